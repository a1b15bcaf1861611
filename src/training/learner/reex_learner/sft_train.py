"""Multi-step supervised fine-tuning in one process: ``python3 -m reex_learner.sft_train``.

Reads a GGUF (the initial model), a pre-tokenized JSONL in the learner's experience format
(``prompt_tokens``, ``tokens``, ``mask``; optional ``db_id`` / ``family`` / ``question_id``), trains for
a step and/or wall-clock budget with AdamW (warmup, then cosine / linear / constant decay), logs the
loss as JSONL, writes GGUF checkpoints and the final GGUF (metadata copied unchanged, as ``step``
does). Cross-entropy on mask-1 tokens only (token mean over the batch): prompt and injected
executor ``<result>`` tokens are context, never targets.

**Prefix-shared packing** (default on). SFT records of one database and one prompt family share
their chat-templated prompt up to the question (system message + schema: most of the tokens). Such
records are packed into one row: ``[shared prefix][suffix 1][suffix 2]...`` where suffix ``i`` is the
rest of record ``i``'s prompt plus its response. Attention is restricted so that suffix ``i`` sees the
prefix and itself only (causally), and positions restart after the prefix for every suffix, so each
suffix token gets exactly the logits it would get in its own unpacked sequence (tested against the
plain model) while the prefix is computed once per row. On the synthetic starter data this cuts the
tokens per epoch about 3x. ``--no-share-prefix`` packs one record per row (plain SFT).

Progress goes to stdout as JSON lines (``event``: start | calibrated | step | eval | checkpoint |
done); ``--log`` gets the step/eval lines too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import math
import os
import random
import sys
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .gguf_io import write_gguf
from .grpo import Pack, PackedBatch, Record, collate_packs, make_packs
from .lora import merged_state, setup_lora, write_lora_gguf
from .lora_args import add_lora_args, lora_requested, lora_spec
from .model import LlamaModel, load_model, packed_allowed, state_for_gguf
from .train import optimizer_step


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------
def read_records(path: str) -> list[Record]:
    """Reads pre-tokenized JSONL; a path ending in .gz or .xz is read through gzip or xz (the synthetic data gzips 30x;
    real questions' schemas repeat across records farther apart than gzip's window, so xz carries them to a GPU machine)."""
    out: list[Record] = []
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            prompt = [int(t) for t in obj["prompt_tokens"]]
            tokens = [int(t) for t in obj["tokens"]]
            mask = [int(m) for m in obj["mask"]]
            if len(mask) != len(tokens):
                raise ValueError(f"{path}:{n}: mask has {len(mask)} entries for {len(tokens)} tokens")
            if not prompt:
                raise ValueError(f"{path}:{n}: empty prompt_tokens")
            family = str(obj.get("family", ""))
            db = str(obj.get("db_id", ""))
            qid = obj.get("question_id", n)
            key = str(qid)
            if db and family and key.endswith(":" + family):
                key = key[: -len(family) - 1]
            out.append(Record(prompt, tokens, mask, f"{db}|{family}" if db else f"#{n}", key, family, db))
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def held_out(key: str, frac: float) -> bool:
    return frac > 0 and (zlib.crc32(key.encode()) % 10_000) < frac * 10_000


def db_weight(db: str, db_weights: Sequence[tuple[str, float]]) -> float:
    """The weight of the first prefix that ``db`` starts with; 1 when none does."""
    for prefix, w in db_weights:
        if db.startswith(prefix):
            return w
    return 1.0


def record_weight(r: Record, weights: dict[str, float], db_weights: Sequence[tuple[str, float]] = ()) -> float:
    """Its family's weight × its database's."""
    return weights.get(r.family, 1.0) * db_weight(r.db, db_weights)


def weighted(records: Sequence[Record], weights: dict[str, float], db_weights: Sequence[tuple[str, float]] = ()) -> list[Record]:
    """Each record floor(w) times, plus once more for a fixed hash-chosen share frac(w) of them
    (w = ``record_weight``)."""
    out: list[Record] = []
    for r in records:
        w = record_weight(r, weights, db_weights)
        k = int(math.floor(w))
        frac = w - k
        if frac > 0 and (zlib.crc32(f"w|{r.key}|{r.family}".encode()) % 10_000) < frac * 10_000:
            k += 1
        out.extend([r] * k)
    return out


def attention_allowed(seg: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) boolean mask of :func:`attention_bias` (True where query t may read key s), for
    ``scaled_dot_product_attention`` (model.packed_allowed without a sliding window)."""
    return packed_allowed(seg)


#: Attention of :func:`packed_forward`: "eager" (the reference maths, f32 scores) or "sdpa"
#: (PyTorch's fused ``scaled_dot_product_attention`` with the same mask; faster and smaller on CUDA).
ATTENTION = {"impl": "eager"}


def attention_bias(seg: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1, T, T) additive bias: 0 where query t may read key s (s <= t and s is in the prefix
    or in t's own suffix), -inf elsewhere. Every position may read itself (no empty rows)."""
    B, T = seg.shape
    bias = torch.zeros(B, T, T, device=seg.device)
    bias = bias.masked_fill(~packed_allowed(seg).view(B, T, T), float("-inf"))
    return bias.view(B, 1, 1, T, T)


def packed_forward(model: LlamaModel, ids: torch.Tensor, pos: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, n_vocab) of packed rows: ``LlamaModel.hidden`` with explicit positions and the packed
    attention mask, so every architecture the model implements (llama, qwen2, gemma3 with its norms,
    GeGLU, embedding scale and sliding window counted in positions) and any LoRA on it are computed as
    the unpacked model computes them. Attention kernel: :data:`ATTENTION`."""
    return model.logits(model.hidden(ids, pos, seg=seg, attn_impl=ATTENTION["impl"]))


def packing_max_diff(model: LlamaModel, records: Sequence[Record], pack_tokens: int = 100_000) -> float:
    """Largest |logit difference| between packed rows and each suffix run alone after its prefix
    (the check that prefix-shared packing computes exactly the unpacked model)."""
    packs = make_packs(records, pack_tokens, True)
    b = collate_packs(packs)
    worst = 0.0
    with torch.no_grad():
        logits = packed_forward(model, b.ids, b.pos, b.seg)
        for i, p in enumerate(packs):
            at = len(p.prefix)
            for toks, _ in p.suffixes:
                ref = model(torch.tensor(p.prefix + toks, dtype=torch.long))[0, len(p.prefix) :]
                worst = max(worst, float((logits[i, at : at + len(toks)] - ref).abs().max()))
                at += len(toks)
    return worst


def batch_loss(model: LlamaModel, b: PackedBatch) -> tuple[torch.Tensor, float]:
    """(sum of -log p over loss tokens, loss-token count). Logits are computed at the loss tokens only:
    the output matrix is most of a large-vocabulary model's cost (Gemma 3: 262k x 640)."""
    hidden = model.hidden(b.ids, b.pos, seg=b.seg, attn_impl=ATTENTION["impl"])
    keep = b.mask > 0
    nll = F.cross_entropy(model.logits(hidden[keep]), b.targets[keep], reduction="none")
    return (nll * b.mask[keep]).sum(), float(b.mask.sum())


def make_batches(packs: Sequence[Pack], batch_tokens: int, rng: random.Random) -> list[list[Pack]]:
    """Rows of similar length together (sorted inside shuffled windows of 64) so that
    rows x longest row <= batch_tokens; batch order shuffled."""
    order = list(packs)
    rng.shuffle(order)
    batches: list[list[Pack]] = []
    for w in range(0, len(order), 64):
        window = sorted(order[w : w + 64], key=lambda p: p.length)
        cur: list[Pack] = []
        for p in window:
            longest = max([p.length] + [q.length for q in cur])
            if cur and longest * (len(cur) + 1) > batch_tokens:
                batches.append(cur)
                cur = []
            cur.append(p)
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


# ------------------------------------------------------------------------------------------------
# Schedule and optimizer
# ------------------------------------------------------------------------------------------------
def lr_at(step: int, progress: float, base: float, warmup: int, schedule: str, min_ratio: float) -> float:
    """Linear warmup over ``warmup`` steps, then decay by ``progress`` in [0, 1] (steps or wall clock)."""
    if warmup > 0 and step < warmup:
        return base * (step + 1) / warmup
    p = min(max(progress, 0.0), 1.0)
    if schedule == "constant":
        f = 1.0
    elif schedule == "linear":
        f = 1.0 - p
    elif schedule == "cosine":
        f = 0.5 * (1.0 + math.cos(math.pi * p))
    else:
        raise ValueError(f"schedule must be cosine|linear|constant, got {schedule!r}")
    return base * (min_ratio + (1.0 - min_ratio) * f)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters (all of them, or a LoRA's), weight decay on matrices only."""
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95), eps=1e-8)


# ------------------------------------------------------------------------------------------------
# Training
# ------------------------------------------------------------------------------------------------
class Logger:
    def __init__(self, path: str | None):
        self.fh = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, event: str, **fields: Any) -> None:
        rec = {"event": event, **fields}
        line = json.dumps(rec, sort_keys=False)
        print(line, flush=True)
        if self.fh and event in ("start", "calibrated", "step", "eval", "checkpoint", "done"):
            self.fh.write(line + "\n")
            self.fh.flush()

    def close(self) -> None:
        if self.fh:
            self.fh.close()


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA when PyTorch sees a GPU, else the CPU; ``cuda`` without one is an error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: PyTorch sees no CUDA device")
    return torch.device(name)


def evaluate(model: LlamaModel, batches: Sequence[list[Pack]]) -> float | None:
    if not batches:
        return None
    model.eval()
    tot, n = 0.0, 0.0
    with torch.no_grad():
        for bp in batches:
            s, c = batch_loss(model, collate_packs(bp).to(model_device(model)))
            tot += float(s)
            n += c
    model.train()
    return tot / max(n, 1.0)


def reinitialize(model: LlamaModel, std: float, seed: int) -> None:
    """Draws fresh weights with the starter's initial scheme (lab/starter/model.ts): matrices normal(0, std), the
    residual projections (attn_output, ffn_down) std / sqrt(2 * layers), norms 1, biases 0. Only the file's shape,
    tokenizer and metadata are kept, so a GPU run can start from a zeroed, compressible copy of the initial model."""
    gen = torch.Generator().manual_seed(seed)
    resid = std / math.sqrt(2 * model.hp.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            else:
                s = resid if name.endswith(("attn_output.weight", "ffn_down.weight")) else std
                p.copy_(torch.randn(p.shape, generator=gen) * s)


def choose_attention(name: str, model: LlamaModel, batches: Sequence[list[Pack]], device: torch.device) -> dict[str, Any]:
    """Sets :data:`ATTENTION` from ``--attention``; ``auto`` takes sdpa on CUDA only when its logits on one batch
    match eager's (max |diff| < 1e-2), so a PyTorch without a fitting kernel trains on the reference maths."""
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if name == "eager" or (name == "auto" and (device.type != "cuda" or not has_sdpa)) or not batches:
        ATTENTION["impl"] = "eager"
        return {"impl": "eager"}
    if not has_sdpa:
        raise ValueError("--attention sdpa needs PyTorch 2 (scaled_dot_product_attention)")
    b = collate_packs(batches[0][:2]).to(device)
    model.eval()
    try:
        with torch.no_grad():
            ATTENTION["impl"] = "eager"
            ref = packed_forward(model, b.ids, b.pos, b.seg)
            ATTENTION["impl"] = "sdpa"
            got = packed_forward(model, b.ids, b.pos, b.seg)
        diff = float((ref - got).abs().max())
    except RuntimeError as err:  # no kernel for this mask/dtype on this build
        if name == "sdpa":
            raise
        ATTENTION["impl"] = "eager"
        return {"impl": "eager", "sdpa_error": str(err)[:200]}
    finally:
        model.train()
    if name == "auto" and not diff < 1e-2:
        ATTENTION["impl"] = "eager"
        return {"impl": "eager", "sdpa_max_diff": diff}
    ATTENTION["impl"] = "sdpa"
    return {"impl": "sdpa", "sdpa_max_diff": diff}


def load_for_training(args: argparse.Namespace, device: torch.device) -> tuple[LlamaModel, Any, dict[str, Any] | None]:
    """The model (``--reinit`` applied), its GGUF, and the LoRA put on it (``--lora-rank``/``--lora-in``:
    base frozen; None for full-weight training)."""
    model, g = load_model(args.model, device=device)
    if args.reinit:
        reinitialize(model, args.reinit, args.seed)
    spec = lora_spec(args)
    lora = setup_lora(model, spec, seed=args.seed) if spec is not None else None
    model.grad_checkpoint = args.grad_checkpoint
    return model, g, lora


def parse_weights(args: argparse.Namespace) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """``--family-weight FAMILY=W`` and ``--db-weight PREFIX=W`` as a dict and an ordered list."""
    weights: dict[str, float] = {}
    for spec in args.family_weight or []:
        fam, _, w = spec.partition("=")
        weights[fam] = float(w)
    db_weights: list[tuple[str, float]] = []
    for spec in args.db_weight or []:
        prefix, _, w = spec.partition("=")
        db_weights.append((prefix, float(w)))
    return weights, db_weights


def check_vocab(records: Sequence[Record], n_vocab: int, path: str) -> None:
    """ValueError when a record holds a token id outside the model's vocabulary."""
    for i, r in enumerate(records):
        if any(not 0 <= t < n_vocab for t in r.prompt) or any(not 0 <= t < n_vocab for t in r.tokens):
            raise ValueError(f"{path}: record {i}: token id outside the model's vocabulary (0..{n_vocab - 1})")


def save_model(path: str, model: LlamaModel, g: Any, lora: dict[str, Any] | None, out_type: str = "keep", adapter: bool = False) -> None:
    """Writes the trained model to ``path``: the LoRA adapter as a llama.cpp LoRA GGUF when ``adapter``
    (``out_type`` f32|f16), else the full GGUF (with a LoRA: the base with the adapter merged in)."""
    if adapter:
        write_lora_gguf(path, model, out_type=out_type, name=f"{g.field('general.name', 'reex')} LoRA")
    else:
        write_gguf(path, g, merged_state(model) if lora is not None else state_for_gguf(model), out_type=out_type)


@dataclass
class TrainData:
    """The packed records of a run: training rows of the current epoch and the held-out eval batches."""

    records: list[Record]
    expanded: list[Record]
    eval_records: list[Record]
    eval_batches: list[list[Pack]]
    epoch_packs: list[Pack]


def prepare_data(args: argparse.Namespace, n_vocab: int, rng: random.Random) -> TrainData:
    """Reads ``--data``, holds out ``--eval-frac`` of the questions, applies the weights, packs."""
    records = read_records(args.data)
    check_vocab(records, n_vocab, args.data)
    weights, db_weights = parse_weights(args)
    train_recs = [r for r in records if not held_out(r.key, args.eval_frac)]
    eval_recs = [r for r in records if held_out(r.key, args.eval_frac) and record_weight(r, weights, db_weights) > 0]
    expanded = weighted(train_recs, weights, db_weights)
    eval_packs = make_packs(eval_recs, args.pack_tokens, not args.no_share_prefix)
    eval_batches = make_batches(eval_packs, args.batch_tokens, random.Random(0))
    epoch_packs = make_packs(expanded, args.pack_tokens, not args.no_share_prefix, random.Random(rng.random()))
    return TrainData(records, expanded, eval_recs, eval_batches, epoch_packs)


@dataclass
class TrainState:
    """What the loop counted (the summary's numbers)."""

    step: int = 0
    epoch: int = 0
    stop_reason: str = "steps"
    first_loss: float | None = None
    tokens: int = 0
    unpacked: int = 0
    loss_tokens: float = 0.0
    curve: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    train_s: float = 0.0


def train_loop(
    args: argparse.Namespace,
    model: LlamaModel,
    g: Any,
    lora: dict[str, Any] | None,
    opt: torch.optim.Optimizer,
    data: TrainData,
    log: Logger,
    rng: random.Random,
) -> TrainState:
    """The optimizer steps, until ``--steps`` or ``--minutes`` runs out: logs, evals, checkpoints."""
    device = model_device(model)
    budget = args.minutes * 60.0 if args.minutes else None
    max_steps = args.steps if args.steps else None
    if budget is None and max_steps is None:
        raise ValueError("give --steps and/or --minutes")
    t0 = time.time()
    deadline = t0 + budget - args.reserve_s if budget is not None else None

    def progress(step: int) -> float:
        ps = step / max_steps if max_steps else 0.0
        pt = (time.time() - t0) / max(budget - args.reserve_s, 1.0) if budget is not None else 0.0
        return max(ps, pt)

    st = TrainState()
    window = {"loss": 0.0, "n": 0.0, "tokens": 0, "unpacked": 0, "t": time.time()}
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    while True:
        for bp in make_batches(data.epoch_packs, args.batch_tokens, rng):
            if max_steps is not None and st.step >= max_steps:
                st.stop_reason = "steps"
                break
            if deadline is not None and time.time() >= deadline:
                st.stop_reason = "time"
                break
            lr = lr_at(st.step, progress(st.step), args.lr, args.warmup, args.schedule, args.min_lr_ratio)
            for grp in opt.param_groups:
                grp["lr"] = lr
            b = collate_packs(bp).to(device)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.amp == "bf16"):
                s, n = batch_loss(model, b)
            loss = s / max(n, 1.0)
            loss.backward()
            gn = optimizer_step(opt, trainable, None, args.max_grad_norm)
            st.step += 1
            if st.first_loss is None:
                st.first_loss = float(loss.detach())
            for k, v in (("loss", float(s.detach())), ("n", n), ("tokens", b.real_tokens), ("unpacked", b.unpacked_tokens)):
                window[k] += v
            st.tokens += b.real_tokens
            st.unpacked += b.unpacked_tokens
            st.loss_tokens += n
            if st.step % args.log_every == 0 or st.step == 1:
                dt = max(time.time() - window["t"], 1e-9)
                rec = {
                    "step": st.step,
                    "epoch": round(st.epoch + 0.0, 0),
                    "loss": round(window["loss"] / max(window["n"], 1.0), 4),
                    "lr": lr,
                    "grad_norm": round(float(gn), 4),
                    "tokens_per_s": round(window["tokens"] / dt, 1),
                    "unpacked_tokens_per_s": round(window["unpacked"] / dt, 1),
                    "tokens": st.tokens,
                    "epochs_done": round(st.loss_tokens / max(sum(p.loss_tokens for p in data.epoch_packs), 1), 3),
                    "elapsed_s": round(time.time() - t0, 1),
                }
                st.curve.append(rec)
                log("step", **rec)
                window = {"loss": 0.0, "n": 0.0, "tokens": 0, "unpacked": 0, "t": time.time()}
            if args.eval_every and st.step % args.eval_every == 0 and data.eval_batches:
                ev = evaluate(model, data.eval_batches)
                st.evals.append({"step": st.step, "eval_loss": ev})
                log("eval", step=st.step, eval_loss=round(ev, 4) if ev is not None else None, elapsed_s=round(time.time() - t0, 1))
                window["t"] = time.time()  # eval time is not training time
            if args.save_every and st.step % args.save_every == 0 and args.checkpoint_dir:
                path = os.path.join(args.checkpoint_dir, f"step-{st.step:05d}{'.lora' if lora else ''}.gguf")
                save_model(path, model, g, lora, args.lora_out_type if lora else "keep", adapter=lora is not None)
                log("checkpoint", step=st.step, path=path)
                window["t"] = time.time()
        else:
            st.epoch += 1
            data.epoch_packs = make_packs(data.expanded, args.pack_tokens, not args.no_share_prefix, random.Random(rng.random()))
            continue
        break
    st.train_s = time.time() - t0
    if st.evals and st.evals[-1]["step"] == st.step:
        final_eval = st.evals[-1]["eval_loss"]
    else:
        final_eval = evaluate(model, data.eval_batches)
    if final_eval is not None and st.evals[-1:] != [{"step": st.step, "eval_loss": final_eval}]:
        st.evals.append({"step": st.step, "eval_loss": final_eval})
        log("eval", step=st.step, eval_loss=round(final_eval, 4), elapsed_s=round(time.time() - t0, 1))
    return st


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Runs the SFT (see the module docstring) and returns the summary (the ``done`` log line)."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    if not args.out and not lora_requested(args):
        raise ValueError("--out is required (or train a LoRA: --lora-rank/--lora-in with --lora-out)")
    rng = random.Random(args.seed)
    log = Logger(args.log)
    t_start = time.time()
    model, g, lora = load_for_training(args, device)
    data = prepare_data(args, g.hparams.n_vocab, rng)
    packs = data.epoch_packs
    params = sum(p.numel() for p in model.parameters())
    attention = choose_attention(args.attention, model, data.eval_batches or make_batches(packs[:8], args.batch_tokens, random.Random(0)), device)
    log(
        "start",
        model=args.model,
        data=args.data,
        parameters=params,
        trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
        lora=lora,
        records=len(data.records),
        train_records=len(data.expanded),
        eval_records=len(data.eval_records),
        packs_per_epoch=len(packs),
        tokens_per_epoch=sum(p.length for p in packs),
        unpacked_tokens_per_epoch=sum(p.unpacked_length for p in packs),
        loss_tokens_per_epoch=sum(p.loss_tokens for p in packs),
        share_prefix=not args.no_share_prefix,
        threads=torch.get_num_threads(),
        device=str(device),
        attention=attention,
        amp=args.amp,
        lr=args.lr,
        minutes=args.minutes,
        argv=sys.argv[1:],
        load_s=round(time.time() - t_start, 2),
    )
    opt = make_optimizer(model, args.lr, args.weight_decay)
    st = train_loop(args, model, g, lora, opt, data, log, rng)
    if lora is not None:
        save_model(args.lora_out, model, g, lora, args.lora_out_type, adapter=True)
    if args.out:
        save_model(args.out, model, g, lora, args.out_type)
    if args.optimizer_state:
        torch.save({"optimizer": opt.state_dict(), "step": st.step}, args.optimizer_state)
    summary = {
        "out": args.out,
        "lora": lora,
        "steps": st.step,
        "stop_reason": st.stop_reason,
        "epochs_done": round(st.loss_tokens / max(sum(p.loss_tokens for p in data.epoch_packs), 1), 3),
        "train_s": round(st.train_s, 1),
        "tokens": st.tokens,
        "unpacked_tokens": st.unpacked,
        "loss_tokens": int(st.loss_tokens),
        "tokens_per_s": round(st.tokens / max(st.train_s, 1e-9), 1),
        "unpacked_tokens_per_s": round(st.unpacked / max(st.train_s, 1e-9), 1),
        "first_loss": st.first_loss,
        "last_loss": st.curve[-1]["loss"] if st.curve else None,
        "eval_loss": st.evals[-1]["eval_loss"] if st.evals else None,
        "evals": st.evals,
        "parameters": params,
        "device": str(device),
    }
    log("done", **summary)
    log.close()
    return summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m reex_learner.sft_train", description="multi-step SFT of a GGUF policy on pre-tokenized records")
    p.add_argument("--model", required=True, help="initial GGUF (llama/qwen2/gemma3)")
    p.add_argument("--data", required=True, help="pre-tokenized JSONL (prompt_tokens, tokens, mask[, db_id, family, question_id]); .gz is read through gzip")
    p.add_argument("--out", help="final GGUF; required unless a LoRA is trained (then: the base with the adapter merged in)")
    p.add_argument("--steps", type=int, default=0, help="optimizer steps (0 = until --minutes)")
    p.add_argument("--minutes", type=float, default=0.0, help="wall-clock training budget (0 = until --steps)")
    p.add_argument("--reserve-s", type=float, default=30.0, help="seconds of --minutes kept for the final eval and export")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.1, help="final lr as a share of --lr")
    p.add_argument("--warmup", type=int, default=30, help="linear warmup steps")
    p.add_argument(
        "--schedule", default="cosine", choices=["cosine", "linear", "constant"], help="decay over the step or time budget (whichever runs out first)"
    )
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of matrices (norms: 0)")
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--batch-tokens", type=int, default=4096, help="rows x longest row per batch (padding included)")
    p.add_argument("--pack-tokens", type=int, default=1024, help="most tokens per packed row")
    p.add_argument("--no-share-prefix", action="store_true", help="one record per row (no prefix-shared packing)")
    p.add_argument(
        "--family-weight",
        action="append",
        help="FAMILY=W: records of FAMILY appear W times per epoch; a fraction keeps that share of them (chosen by question, fixed); repeatable",
    )
    p.add_argument(
        "--db-weight",
        action="append",
        help="PREFIX=W: records whose db_id starts with PREFIX count W times (multiplies the family weight; first matching prefix wins); repeatable",
    )
    p.add_argument("--eval-frac", type=float, default=0.02, help="share of questions held out for the eval loss")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--log", help="append step/eval JSON lines here")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--save-every", type=int, default=0, help="write a GGUF checkpoint every N steps (needs --checkpoint-dir)")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--out-type", default="keep", choices=["keep", "f32", "f16"], help="tensor type of the final GGUF")
    p.add_argument("--optimizer-state", help="save AdamW state here at the end (to continue training)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads of PyTorch")
    p.add_argument("--device", default="cpu", help="cpu | cuda[:N] | auto (CUDA when PyTorch sees a GPU); float32 weights, TF32 matmuls on CUDA")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--grad-checkpoint", action="store_true")
    p.add_argument("--reinit", type=float, default=0.0, help="STD: draw fresh weights (the starter's scheme, seeded by --seed) instead of the file's")
    p.add_argument(
        "--attention",
        default="eager",
        choices=["eager", "sdpa", "auto"],
        help="eager (reference maths) | sdpa (fused scaled_dot_product_attention, PyTorch 2) | auto (sdpa on CUDA when it matches eager on a batch, else eager)",
    )
    p.add_argument("--amp", default="none", choices=["none", "bf16"], help="bf16 autocast of the forward pass (weights and optimizer stay f32)")
    add_lora_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        train(args)
        return 0
    except (ValueError, FileNotFoundError) as err:
        print(f"reex_learner.sft_train: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

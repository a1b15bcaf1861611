"""A multi-step SFT run (a request with ``run``): pre-tokenized records packed with a shared prompt prefix,
trained by ``train.train`` until ``run.steps`` or ``run.minutes`` runs out, with progress lines, evals and checkpoints."""

from __future__ import annotations

import json
import math
import os
import random
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from .grpo import Pack, Record, check_token_ids, collate_packs, make_packs, packed_forward, packed_logprobs, read_jsonl
from .train import Backend, train


def read_records(path: str) -> list[Record]:
    """The pre-tokenized SFT records of a JSONL file (.gz/.xz: ``grpo.read_jsonl``)."""
    out: list[Record] = []
    for n, obj in read_jsonl(path):
        prompt = [int(t) for t in obj["prompt_tokens"]]
        tokens = [int(t) for t in obj["tokens"]]
        mask = [int(m) for m in obj["mask"]]
        if len(mask) != len(tokens):
            raise ValueError(f"{path}:{n}: mask has {len(mask)} entries for {len(tokens)} tokens")
        if not prompt:
            raise ValueError(f"{path}:{n}: empty prompt_tokens")
        family, db = str(obj.get("family", "")), str(obj.get("db_id", ""))
        key = str(obj.get("question_id", n))
        if db and family and key.endswith(":" + family):
            key = key[: -len(family) - 1]
        out.append(Record(prompt, tokens, mask, f"{db}|{family}" if db else f"#{n}", key, family, db))
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def held_out(key: str, frac: float) -> bool:
    return frac > 0 and (zlib.crc32(key.encode()) % 10_000) < frac * 10_000


def record_weight(r: Record, weights: dict[str, float], db_weights: dict[str, float]) -> float:
    """Its family's weight × the weight of the first db prefix its database starts with (1 when none)."""
    return weights.get(r.family, 1.0) * next((w for prefix, w in db_weights.items() if r.db.startswith(prefix)), 1.0)


def weighted(records: Sequence[Record], weights: dict[str, float], db_weights: dict[str, float]) -> list[Record]:
    """Each record floor(w) times, plus once more for a fixed hash-chosen share frac(w) of them (w = ``record_weight``)."""
    out: list[Record] = []
    for r in records:
        w = record_weight(r, weights, db_weights)
        k = int(math.floor(w))
        if w - k > 0 and (zlib.crc32(f"w|{r.key}|{r.family}".encode()) % 10_000) < (w - k) * 10_000:
            k += 1
        out.extend([r] * k)
    return out


def make_batches(packs: Sequence[Pack], batch_tokens: int, rng: random.Random) -> list[list[Pack]]:
    """Rows of similar length together (sorted inside shuffled windows of 64) so that rows x longest row
    <= batch_tokens; batch order shuffled."""
    order = list(packs)
    rng.shuffle(order)
    batches: list[list[Pack]] = []
    for w in range(0, len(order), 64):
        cur: list[Pack] = []
        for p in sorted(order[w : w + 64], key=lambda p: p.length):
            if cur and max([p.length] + [q.length for q in cur]) * (len(cur) + 1) > batch_tokens:
                batches.append(cur)
                cur = []
            cur.append(p)
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def packing_max_diff(model: torch.nn.Module, records: Sequence[Record], pack_tokens: int = 100_000) -> float:
    """Largest |logit difference| between packed rows and each suffix run alone after its prefix (the check
    that prefix-shared packing computes exactly the unpacked model)."""
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


def reinitialize(model: torch.nn.Module, std: float, seed: int) -> None:
    """Draws fresh weights with the starter's initial scheme (lab/starter/model.ts): matrices normal(0, std), the
    residual projections (attn_output, ffn_down) std / sqrt(2 * layers), norms 1, biases 0 (LoRA matrices untouched).
    Only the file's shape, tokenizer and metadata are kept, so a GPU run can start from a zeroed, compressible copy."""
    gen = torch.Generator().manual_seed(seed)
    resid = std / math.sqrt(2 * model.hp.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".lora_" in name:
                continue
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif p.dim() == 1:
                p.zero_()
            else:
                s = resid if name.endswith(("attn_output.weight", "ffn_down.weight")) else std
                p.copy_(torch.randn(p.shape, generator=gen) * s)


def choose_attention(name: str, model: torch.nn.Module, batches: Sequence[list[Pack]], device: torch.device) -> dict[str, Any]:
    """Sets ``model.attn_impl`` from ``runtime.attn``; ``auto`` takes sdpa on CUDA only when its logits on one batch
    match eager's (max |diff| < 1e-2), so a PyTorch without a fitting kernel trains on the reference maths."""
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    model.attn_impl = "eager"
    if name == "eager" or (name == "auto" and (device.type != "cuda" or not has_sdpa)) or not batches:
        return {"impl": "eager"}
    if not has_sdpa:
        raise ValueError("runtime.attn sdpa needs PyTorch 2 (scaled_dot_product_attention)")
    b = collate_packs(batches[0][:2]).to(device)
    model.eval()
    try:
        with torch.no_grad():
            ref = packed_forward(model, b.ids, b.pos, b.seg)
            model.attn_impl = "sdpa"
            diff = float((ref - packed_forward(model, b.ids, b.pos, b.seg)).abs().max())
    except RuntimeError as err:  # no kernel for this mask/dtype on this build
        model.attn_impl = "eager"
        if name == "sdpa":
            raise
        return {"impl": "eager", "sdpa_error": str(err)[:200]}
    finally:
        model.train()
    if name == "auto" and not diff < 1e-2:
        model.attn_impl = "eager"
    return {"impl": model.attn_impl, "sdpa_max_diff": diff}


def evaluate(model: torch.nn.Module, batches: Sequence[list[Pack]], device: torch.device) -> float | None:
    """The mean loss per loss token over ``batches`` (None without any)."""
    if not batches:
        return None
    model.eval()
    tot, n = 0.0, 0.0
    with torch.no_grad():
        for bp in batches:
            b = collate_packs(bp).to(device)
            lp, _ = packed_logprobs(model, b)
            tot += float((-lp * b.mask).sum())
            n += float(b.mask.sum())
    model.train()
    return tot / max(n, 1.0)


class Logger:
    """Progress lines: JSON on stdout, and appended to ``path`` when given."""

    def __init__(self, path: str | None):
        self.fh = open(path, "a", encoding="utf-8") if path else None

    def __call__(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields})
        print(line, flush=True)
        if self.fh:
            self.fh.write(line + "\n")
            self.fh.flush()

    def close(self) -> None:
        if self.fh:
            self.fh.close()


@dataclass
class TrainData:
    """The records of a run: all, the weighted training records, the held-out ones, their eval batches, this epoch's rows."""

    records: list[Record]
    expanded: list[Record]
    eval_records: list[Record]
    eval_batches: list[list[Pack]]
    epoch_packs: list[Pack]


def prepare_data(req: dict[str, Any], n_vocab: int, rng: random.Random) -> TrainData:
    """Reads the records, holds out ``run.evalFrac`` of the questions, applies the weights, packs."""
    r, t, path = req["run"], req["train"], req["paths"]["experience"]
    records = read_records(path)
    check_token_ids((rec.prompt + rec.tokens for rec in records), n_vocab, path)
    weights, db_weights = r["familyWeights"], r["dbWeights"]
    train_recs = [x for x in records if not held_out(x.key, r["evalFrac"])]
    eval_recs = [x for x in records if held_out(x.key, r["evalFrac"]) and record_weight(x, weights, db_weights) > 0]
    expanded = weighted(train_recs, weights, db_weights)
    eval_batches = make_batches(make_packs(eval_recs, t["packTokens"], t["sharePrefix"]), r["batchTokens"], random.Random(0))
    epoch_packs = make_packs(expanded, t["packTokens"], t["sharePrefix"], random.Random(rng.random()))
    return TrainData(records, expanded, eval_recs, eval_batches, epoch_packs)


class Plan:
    """A run's batches and budget for ``train.train`` (which calls :meth:`batches`, :meth:`progress`,
    :meth:`after_step` and :meth:`summary`): what it counted, its progress lines, evals and checkpoints."""

    def __init__(self, req: dict[str, Any], model: Any, save: Any, data: TrainData, log: Logger, rng: random.Random, device: torch.device):
        self.r, self.t, self.model, self.save, self.data, self.log, self.rng, self.device = req["run"], req["train"], model, save, data, log, rng, device
        self.budget = self.r["minutes"] * 60.0 if self.r["minutes"] else None
        self.max_steps = self.r["steps"] or None
        if self.budget is None and self.max_steps is None:
            raise ValueError("run.steps and run.minutes are both 0: a run needs a budget")
        self.t0 = time.time()
        self.deadline = self.t0 + self.budget - self.r["reserveS"] if self.budget is not None else None
        self.step = self.epoch = self.tokens = self.unpacked = 0
        self.loss_tokens, self.first_loss, self.stop_reason, self.train_s = 0.0, None, "steps", 0.0
        self.curve: list[dict[str, Any]] = []
        self.evals: list[dict[str, Any]] = []
        self._window()

    def _window(self) -> None:
        self.window = {"loss": 0.0, "n": 0.0, "tokens": 0, "unpacked": 0, "t": time.time()}

    def progress(self) -> float:
        """How far the run is, in [0, 1]: the larger of its steps and its wall clock (the lr decays over it)."""
        ps = self.step / self.max_steps if self.max_steps else 0.0
        pt = (time.time() - self.t0) / max(self.budget - self.r["reserveS"], 1.0) if self.budget is not None else 0.0
        return max(ps, pt)

    def batches(self) -> Iterator[tuple[list[Pack], bool]]:
        """Batches of rows, epoch after epoch (re-packed with the run's rng), until the budget runs out."""
        while True:
            for bp in make_batches(self.data.epoch_packs, self.r["batchTokens"], self.rng):
                if self.max_steps is not None and self.step >= self.max_steps:
                    self.stop_reason = "steps"
                    return
                if self.deadline is not None and time.time() >= self.deadline:
                    self.stop_reason = "time"
                    return
                yield bp, False
            self.epoch += 1
            self.data.epoch_packs = make_packs(self.data.expanded, self.t["packTokens"], self.t["sharePrefix"], random.Random(self.rng.random()))

    def epochs_done(self) -> float:
        return round(self.loss_tokens / max(sum(p.loss_tokens for p in self.data.epoch_packs), 1), 3)

    def after_step(self, run: Any) -> None:
        """Counts the step ``run`` just took; logs, evals and checkpoints on their schedules."""
        b, r = run.last_batches[0], self.r
        n = float(b.mask.sum())
        self.step += 1
        if self.first_loss is None:
            self.first_loss = run.step_losses[-1]
        for k, v in (("loss", run.step_losses[-1] * max(n, 1.0)), ("n", n), ("tokens", b.real_tokens), ("unpacked", b.unpacked_tokens)):
            self.window[k] += v
        self.tokens, self.unpacked, self.loss_tokens = self.tokens + b.real_tokens, self.unpacked + b.unpacked_tokens, self.loss_tokens + n
        if self.step % r["logEvery"] == 0 or self.step == 1:
            dt = max(time.time() - self.window["t"], 1e-9)
            rec = {
                "step": self.step,
                "epoch": round(self.epoch + 0.0, 0),
                "loss": round(self.window["loss"] / max(self.window["n"], 1.0), 4),
                "lr": run.lrs[-1],
                "grad_norm": round(run.grad_norms[-1], 4),
                "tokens_per_s": round(self.window["tokens"] / dt, 1),
                "unpacked_tokens_per_s": round(self.window["unpacked"] / dt, 1),
                "tokens": self.tokens,
                "epochs_done": self.epochs_done(),
                "elapsed_s": round(time.time() - self.t0, 1),
            }
            self.curve.append(rec)
            self.log("step", **rec)
            self._window()
        if r["evalEvery"] and self.step % r["evalEvery"] == 0 and self.data.eval_batches:
            self._eval(evaluate(self.model, self.data.eval_batches, self.device))
        if r["saveEvery"] and self.step % r["saveEvery"] == 0 and r["checkpointDir"]:
            path = self.save(os.path.join(r["checkpointDir"], f"step-{self.step:05d}"))
            self.log("checkpoint", step=self.step, path=path)
            self.window["t"] = time.time()

    def _eval(self, ev: float | None) -> None:
        self.evals.append({"step": self.step, "eval_loss": ev})
        self.log("eval", step=self.step, eval_loss=round(ev, 4) if ev is not None else None, elapsed_s=round(time.time() - self.t0, 1))
        self.window["t"] = time.time()  # eval time is not training time

    def summary(self, run: Any) -> dict[str, Any]:
        """After the last step: the final eval (unless the last step had one) and the run's numbers."""
        self.train_s = time.time() - self.t0
        if not (self.evals and self.evals[-1]["step"] == self.step):
            ev = evaluate(self.model, self.data.eval_batches, self.device)
            if ev is not None:
                self._eval(ev)
        return {
            "steps": self.step,
            "stop_reason": self.stop_reason,
            "epochs_done": self.epochs_done(),
            "train_s": round(self.train_s, 1),
            "tokens": self.tokens,
            "unpacked_tokens": self.unpacked,
            "loss_tokens": int(self.loss_tokens),
            "tokens_per_s": round(self.tokens / max(self.train_s, 1e-9), 1),
            "unpacked_tokens_per_s": round(self.unpacked / max(self.train_s, 1e-9), 1),
            "first_loss": self.first_loss,
            "last_loss": self.curve[-1]["loss"] if self.curve else None,
            "eval_loss": self.evals[-1]["eval_loss"] if self.evals else None,
            "evals": self.evals,
        }


def run_sft(req: dict[str, Any], request_path: str, device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    """Runs the request's multi-step SFT (see the module docstring); returns the summary (the ``done`` line)."""
    from .cli import load_policy, write_outputs
    from .request import step_config

    if req["mode"] != "sft" or req["backend"] != "gguf":
        raise ValueError("a multi-step run (request.run) is SFT on the gguf backend")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    cfg = step_config(req, dtype)
    rng = random.Random(cfg.seed)
    log = Logger(req["run"]["log"])
    t_start = time.time()
    model, g, _, lora, _ = load_policy(req, device)
    if req["run"]["reinit"]:
        reinitialize(model, req["run"]["reinit"], cfg.seed)
    data = prepare_data(req, g.hparams.n_vocab, rng)
    packs = data.epoch_packs
    sample = data.eval_batches or make_batches(packs[:8], req["run"]["batchTokens"], random.Random(0))
    params = sum(p.numel() for p in model.parameters())
    log(
        "start",
        request=request_path,
        model=req["paths"]["model"],
        data=req["paths"]["experience"],
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
        share_prefix=cfg.share_prefix,
        threads=torch.get_num_threads(),
        device=str(device),
        attention=choose_attention(req["runtime"]["attn"], model, sample, device),
        dtype=req["runtime"]["dtype"],
        lr=cfg.lr,
        minutes=req["run"]["minutes"],
        steps=req["run"]["steps"],
        load_s=round(time.time() - t_start, 2),
    )

    def save(stem: str) -> str:
        return write_outputs(req, model, g, lora, checkpoint=stem)

    summary = train(Backend(model), [], cfg, plan=Plan(req, model, save, data, log, rng, device))
    write_outputs(req, model, g, lora)
    summary = {"out": req["paths"]["out"], "lora": lora, **summary, "parameters": params, "device": str(device)}
    log("done", **summary)
    log.close()
    return summary

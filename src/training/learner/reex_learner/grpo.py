"""GRPO (and SFT) updates over an experience file of multi-turn, executor-in-the-loop rollouts.

Loss (docs/learner.md), per response token t of rollout i with loss-mask m_it (1 = sampled by the model,
0 = prompt or injected executor ``<result>`` text):

    r_it   = exp(logp_new(t) - logp_old(t))                      (importance ratio, token level)
    pg_it  = -min(r_it * A_i, clip(r_it, 1 - eps_low, 1 + eps_high) * A_i)
    kl_it  = exp(ref - new) - (ref - new) - 1                     (k3 estimator, only if beta > 0)
    loss   = sum_it m_it * (pg_it + beta * kl_it) / sum_it m_it   ("token-mean", the default)

The default aggregation is the **token-level mean over all loss tokens of the optimizer batch**
(DAPO-style): every sampled token weighs the same, whatever the length of its rollout, so long
multi-probe rollouts are not down-weighted per token. ``loss_agg="seq-mean-token-mean"`` gives the
original GRPO per-sequence mean instead. With gradient accumulation the denominator is the
token (or sequence) count of the whole optimizer batch, so accumulated micro-batch gradients equal
the full-batch gradient exactly.

Mask-0 tokens: their log-ratio is replaced by 0 with ``torch.where`` *before* ``exp``, so they get
exactly zero gradient and cannot produce inf/NaN whatever their stored old log-prob is; they still
sit in the context (the model attends to them).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

LOG_RATIO_CLAMP = 20.0


# ------------------------------------------------------------------------------------------------
# Experience
# ------------------------------------------------------------------------------------------------
@dataclass
class Rollout:
    prompt_tokens: list[int]
    tokens: list[int]
    mask: list[int]
    old_logprobs: list[float] | None
    advantage: float
    reward: float = 0.0
    components: dict[str, Any] = field(default_factory=dict)
    truncated: bool = False
    interactions: int = 0
    question_id: Any = None

    @property
    def length(self) -> int:
        return len(self.prompt_tokens) + len(self.tokens)


def parse_rollout(obj: dict[str, Any], where: str = "") -> Rollout:
    def need(key: str) -> Any:
        if key not in obj:
            raise ValueError(f"{where}missing field {key!r}")
        return obj[key]

    prompt = [int(t) for t in need("prompt_tokens")]
    tokens = [int(t) for t in need("tokens")]
    mask = [int(m) for m in need("mask")]
    if len(mask) != len(tokens):
        raise ValueError(f"{where}mask has {len(mask)} entries for {len(tokens)} tokens")
    if any(m not in (0, 1) for m in mask):
        raise ValueError(f"{where}mask entries must be 0 or 1")
    old = obj.get("old_logprobs")
    if old is not None:
        # null entries (tokens appended after sampling, such as the end of turn) are scored by the learner
        old = [math.nan if x is None else float(x) for x in old]
        if len(old) != len(tokens):
            raise ValueError(f"{where}old_logprobs has {len(old)} entries for {len(tokens)} tokens")
        bad = [j for j, (m, x) in enumerate(zip(mask, old, strict=True)) if m == 1 and not math.isnan(x) and not (math.isfinite(x) and x <= 1e-6)]
        if bad:
            raise ValueError(f"{where}old_logprobs must be finite and <= 0 where mask = 1 (index {bad[0]})")
    if not prompt and tokens and mask[0] == 1:
        raise ValueError(f"{where}empty prompt_tokens: the first response token has no context to be scored from")
    adv = obj.get("advantage", 0.0)
    return Rollout(
        prompt_tokens=prompt,
        tokens=tokens,
        mask=mask,
        old_logprobs=old,
        advantage=float(adv if adv is not None else 0.0),
        reward=float(obj.get("reward", 0.0) or 0.0),
        components=dict(obj.get("components") or {}),
        truncated=bool(obj.get("truncated", False)),
        interactions=int(obj.get("interactions", 0) or 0),
        question_id=obj.get("question_id"),
    )


def read_experience(path: str) -> list[Rollout]:
    """One JSON object per line (blank lines ignored); see docs/learner.md for the fields."""
    out: list[Rollout] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not JSON: {err}") from err
            out.append(parse_rollout(obj, f"{path}:{n}: "))
    if not out:
        raise ValueError(f"{path}: no rollouts")
    return out


def compute_advantages(rollouts: Sequence[Rollout], mode: str, eps: float = 1e-6) -> None:
    """Overwrites ``advantage`` from ``reward`` (in place). Modes (docs/training.md "Advantages"):
    ``file`` keep what the file says; ``group``: (R - mean_q) / (std_q + eps) within each
    question_id; ``batch``: (R - mean_q) / (std_batch + eps), the group-centred rewards scaled by the
    std of all of them; ``none``: R - mean_q (Dr.GRPO). std is the population std."""
    if mode == "file":
        return
    if mode not in ("group", "batch", "none"):
        raise ValueError(f"advantage mode must be file|group|batch|none, got {mode!r}")
    groups: dict[Any, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(json.dumps(r.question_id, sort_keys=True), []).append(r)
    centred: list[tuple[Rollout, float, float]] = []
    for members in groups.values():
        rewards = [m.reward for m in members]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards))
        for m in members:
            centred.append((m, m.reward - mean, std))
    if mode == "batch":
        vals = [c for _, c, _ in centred]
        mu = sum(vals) / len(vals)
        bstd = math.sqrt(sum((v - mu) ** 2 for v in vals) / len(vals))
    for r, c, gstd in centred:
        if mode == "group":
            r.advantage = c / (gstd + eps)
        elif mode == "batch":
            r.advantage = c / (bstd + eps)
        else:
            r.advantage = c


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, L) int64, right-padded
    targets: torch.Tensor  # (B, L-1): input_ids shifted left
    mask: torch.Tensor  # (B, L-1) float: 1 where targets[t] is a loss token
    old_logprobs: torch.Tensor  # (B, L-1) float (0 where unknown)
    advantages: torch.Tensor  # (B,)
    lengths: list[int]


def collate(rollouts: Sequence[Rollout], pad_id: int = 0, mask_truncated: bool = False, device: Any = "cpu") -> Batch:
    """Response token j of a rollout with P prompt tokens is predicted by the logits at position
    P + j - 1, so its entries go to column P + j - 1 of the (L-1)-wide target arrays."""
    L = max(2, max(r.length for r in rollouts))  # >= 2 so there is at least one target column
    B = len(rollouts)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    mask = torch.zeros(B, L - 1)
    old = torch.zeros(B, L - 1)
    adv = torch.zeros(B)
    for i, r in enumerate(rollouts):
        seq = r.prompt_tokens + r.tokens
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        P = len(r.prompt_tokens)
        if r.tokens and not (mask_truncated and r.truncated):
            start = P - 1
            m = torch.tensor(r.mask, dtype=torch.float32)
            if start < 0:  # empty prompt: the first token cannot be scored
                m, start = m[1:], 0
                lp = r.old_logprobs[1:] if r.old_logprobs is not None else None
            else:
                lp = r.old_logprobs
            mask[i, start : start + len(m)] = m
            if lp is not None:
                old[i, start : start + len(lp)] = torch.nan_to_num(torch.tensor(lp, dtype=torch.float32), nan=0.0)
        adv[i] = r.advantage
    old = old * mask  # 0 where mask = 0, whatever the file said
    return Batch(
        input_ids=ids.to(device),
        targets=ids[:, 1:].to(device),
        mask=mask.to(device),
        old_logprobs=old.to(device),
        advantages=adv.to(device),
        lengths=[r.length for r in rollouts],
    )


def autocast_context(device: Any, compute_dtype: torch.dtype | None):
    """Mixed precision for the forward pass; the weights (and AdamW) stay float32 masters, so
    updates of lr ~ 1e-6 are not lost to bf16/f16 rounding. f16 on CPU is not supported by
    PyTorch's CPU autocast: it runs in float32 (a warning is printed once by the caller)."""
    dev = torch.device(device)
    if compute_dtype is None or compute_dtype == torch.float32:
        return contextlib.nullcontext()
    if dev.type == "cpu" and compute_dtype != torch.bfloat16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=dev.type, dtype=compute_dtype)


def sequence_logprobs(
    model: torch.nn.Module,
    batch: Batch,
    temperature: float = 1.0,
    with_entropy: bool = False,
    compute_dtype: torch.dtype | None = None,
):
    """(B, L-1) log-probs of the targets under ``model`` (and the mean-ready entropy if asked)."""
    with autocast_context(batch.input_ids.device, compute_dtype):
        logits = model(batch.input_ids)[:, :-1, :]
    return target_logprobs(logits, batch.targets, temperature, with_entropy)


def target_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False):
    """Log-probs of ``targets`` under ``logits`` / temperature (and the entropy per position if asked)."""
    if temperature != 1.0:
        logits = logits / temperature
    lp_all = torch.log_softmax(logits.float(), dim=-1)
    lp = lp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return lp, None
    with torch.no_grad():
        ent = -(lp_all.exp() * lp_all).sum(-1)
    return lp, ent


# ------------------------------------------------------------------------------------------------
# Prefix-shared rows (a group's rollouts share their prompt)
# ------------------------------------------------------------------------------------------------
@dataclass
class PackedBatch:
    """Rows in which rollouts of the same prompt share it: the prompt minus its last token once
    (segment 0), then per rollout its last prompt token and its response (segment i >= 1), each
    segment attending to segment 0 and itself only. Arrays are (B, T) in packed positions; the
    target / mask / old log-prob / advantage of a response token sit at the position predicting it."""

    ids: torch.Tensor
    pos: torch.Tensor
    seg: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor  # (B, T)
    rollouts: int
    tokens: int  # real (non-padding) positions
    unpacked_tokens: int  # what the same rollouts cost one row each


def pack_rollouts(
    rollouts: Sequence[Rollout], pack_tokens: int = 2048, pad_id: int = 0, mask_truncated: bool = False, device: Any = "cpu"
) -> list[PackedBatch]:
    """One PackedBatch (one row) per run of same-prompt rollouts that fits ``pack_tokens``
    (a lone rollout longer than that still gets its row)."""
    groups: dict[tuple[int, ...], list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(tuple(r.prompt_tokens), []).append(r)
    rows: list[tuple[list[int], list[Rollout]]] = []
    for prompt, members in groups.items():
        P = max(len(prompt) - 1, 0)
        cur: list[Rollout] = []
        cur_len = P
        for r in members:
            n = len(r.prompt_tokens) - P + len(r.tokens)
            if cur and cur_len + n > pack_tokens:
                rows.append((list(prompt[:P]), cur))
                cur, cur_len = [], P
            cur.append(r)
            cur_len += n
        if cur:
            rows.append((list(prompt[:P]), cur))
    out: list[PackedBatch] = []
    for prefix, members in rows:
        P = len(prefix)
        T = P + sum(len(r.prompt_tokens) - P + len(r.tokens) for r in members)
        ids = torch.full((1, T), pad_id, dtype=torch.long)
        pos = torch.zeros((1, T), dtype=torch.long)
        seg = torch.zeros((1, T), dtype=torch.long)
        targets = torch.zeros((1, T), dtype=torch.long)
        mask = torch.zeros((1, T))
        old = torch.zeros((1, T))
        adv = torch.zeros((1, T))
        if P:
            ids[0, :P] = torch.tensor(prefix, dtype=torch.long)
            pos[0, :P] = torch.arange(P)
        at = P
        for s, r in enumerate(members, 1):
            toks = list(r.prompt_tokens[P:]) + list(r.tokens)
            off = len(r.prompt_tokens) - P  # 1, or 0 for an empty prompt
            n = len(toks)
            ids[0, at : at + n] = torch.tensor(toks, dtype=torch.long)
            pos[0, at : at + n] = torch.arange(P, P + n)
            seg[0, at : at + n] = s
            keep = not (mask_truncated and r.truncated)
            for k, tok in enumerate(r.tokens):
                j = at + off + k - 1  # the position whose logits predict response token k
                if j < at:
                    continue
                targets[0, j] = tok
                if keep and r.mask[k]:
                    mask[0, j] = 1.0
                    if r.old_logprobs is not None and not math.isnan(r.old_logprobs[k]):
                        old[0, j] = float(r.old_logprobs[k])
                adv[0, j] = r.advantage
            at += n
        out.append(
            PackedBatch(
                ids.to(device),
                pos.to(device),
                seg.to(device),
                targets.to(device),
                mask.to(device),
                old.to(device),
                adv.to(device),
                len(members),
                T,
                sum(r.length for r in members),
            )
        )
    return out


def packed_logprobs(model: torch.nn.Module, b: PackedBatch, temperature: float = 1.0, with_entropy: bool = False, compute_dtype: torch.dtype | None = None):
    """(B, T) log-probs of ``b.targets`` at each packed position (entropy too if asked)."""
    from .sft_train import packed_forward

    with autocast_context(b.ids.device, compute_dtype):
        logits = packed_forward(model, b.ids, b.pos, b.seg)
    return target_logprobs(logits, b.targets, temperature, with_entropy)


# ------------------------------------------------------------------------------------------------
# Loss
# ------------------------------------------------------------------------------------------------
def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref) per token: exp(d) - d - 1 with d = ref - logp (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def grpo_token_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    ref_logp: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-token loss (B, T) -- already zero where mask = 0 -- and per-token stats (masked).
    ``advantages``: (B,) one per row, or (B, T) one per token (packed rows hold several rollouts)."""
    clip_high = clip_low if clip_high is None else clip_high
    keep = mask > 0
    log_ratio = torch.where(keep, logp - old_logp, torch.zeros_like(logp))
    log_ratio = torch.clamp(log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = torch.exp(log_ratio)
    adv = advantages if advantages.dim() == 2 else advantages.unsqueeze(-1).expand_as(logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    pg = -torch.min(unclipped, clipped)
    per_token = pg
    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_beta != 0.0:
        d = torch.where(keep, ref_logp - logp, torch.zeros_like(logp))
        kl = torch.exp(d) - d - 1.0
        per_token = per_token + kl_beta * kl
    elif ref_logp is not None:
        with torch.no_grad():
            d = torch.where(keep, ref_logp - logp, torch.zeros_like(logp))
            kl = torch.exp(d) - d - 1.0
    per_token = torch.where(keep, per_token, torch.zeros_like(per_token))
    with torch.no_grad():
        is_clipped = ((adv > 0) & (ratio > 1.0 + clip_high)) | ((adv < 0) & (ratio < 1.0 - clip_low))
        stats = {
            "pg": pg.detach() * mask,
            "kl": kl.detach() * mask,
            "ratio": ratio.detach() * mask,
            "clipped": is_clipped.float() * mask,
        }
    return per_token, stats


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, loss_agg: str, denom: float) -> torch.Tensor:
    """Sum of this micro-batch's share of the optimizer-batch mean (see module docstring)."""
    if loss_agg == "token-mean":
        return per_token.sum() / denom
    if loss_agg == "seq-mean-token-mean":
        ntok = mask.sum(-1)
        per_seq = per_token.sum(-1) / ntok.clamp(min=1.0)
        return per_seq[ntok > 0].sum() / denom
    raise ValueError(f"loss_agg must be token-mean|seq-mean-token-mean, got {loss_agg!r}")


def agg_denominator(rollouts_mask: Iterable[torch.Tensor], loss_agg: str) -> float:
    tot = 0.0
    for m in rollouts_mask:
        tot += float(m.sum()) if loss_agg == "token-mean" else float((m.sum(-1) > 0).sum())
    return max(tot, 1.0)


def micro_batch_loss(
    cfg: StepConfig, lp: torch.Tensor, b: Batch, denom: float, ref_lp: torch.Tensor | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The loss of one micro-batch as its share of the optimizer-batch mean (``denom`` = the loss-token
    or sequence count of the whole optimizer batch), and its per-token stats. ``lp``: the policy's
    (B, L-1) log-probs of ``b.targets``; ``ref_lp``: the reference's (KL term / metric), or None.
    SFT: cross-entropy on mask-1 tokens; GRPO: ``grpo_token_loss``. Pure: no model, no optimizer --
    shared by ``train_step`` and the Hugging Face LoRA path (``hf_lora``)."""
    if cfg.mode == "sft":
        per_token = -lp * b.mask
        loss = aggregate(per_token, b.mask, cfg.loss_agg, denom)
        stats = {"pg": per_token.detach(), "kl": torch.zeros_like(lp), "ratio": b.mask, "clipped": torch.zeros_like(lp)}
        return loss, stats
    per_token, stats = grpo_token_loss(lp, b.old_logprobs, b.advantages, b.mask, cfg.clip, cfg.clip_high, ref_lp, cfg.kl_beta)
    return aggregate(per_token, b.mask, cfg.loss_agg, denom), stats


# ------------------------------------------------------------------------------------------------
# Training step
# ------------------------------------------------------------------------------------------------
@dataclass
class StepConfig:
    mode: str = "grpo"  # grpo | sft
    lr: float = 2e-6
    clip: float = 0.2
    clip_high: float | None = None  # DAPO clip-higher; None = same as clip
    kl_beta: float = 0.0
    loss_agg: str = "token-mean"
    epochs: int = 1
    micro_batch: int = 4  # rollouts per forward/backward
    mini_batch: int = 0  # rollouts per optimizer step (0 = all of them: one step per epoch)
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    temperature: float = 1.0
    mask_truncated: bool = False
    advantage: str = "file"
    shuffle: bool = False
    seed: int = 0
    pad_id: int = 0
    optimizer_state: str | None = None  # path: AdamW moments carried across steps/processes
    compute_dtype: torch.dtype | None = None  # autocast dtype for forward passes (None = float32)
    share_prefix: bool = False  # rollouts with the same prompt share one copy of it in a packed row
    pack_tokens: int = 2048  # row length limit when sharing (a longer group is split over rows)
    warmup_steps: int = 0  # optimizer steps (counted across processes) over which lr ramps up linearly
    max_old_logprob_diff: float = 0.0  # fail before any update when mean |logp - old_logp| exceeds it (0 = off)
    split_half: int = 0  # random half-splits of the groups whose gradients are compared (0 = off)


class OldLogprobMismatch(ValueError):
    """The learner's log-probs of the sampled tokens disagree with the sampler's: the step is off-policy
    in a way the ratio clip cannot absorb (wrong tokenizer, model, temperature or a stale export)."""


def _chunks(xs: Sequence[Any], n: int) -> list[list[Any]]:
    n = max(1, n)
    return [list(xs[i : i + n]) for i in range(0, len(xs), n)]


def make_optimizer(model: torch.nn.Module, cfg: StepConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay)


def load_optimizer_state(opt: torch.optim.Optimizer, path: str | None, cfg: StepConfig) -> bool:
    if not path or not os.path.exists(path):
        return False
    state = torch.load(path, map_location="cpu")
    opt.load_state_dict(state["optimizer"])
    for g in opt.param_groups:  # the command line wins over the saved hyperparameters
        g["lr"], g["betas"], g["eps"], g["weight_decay"] = cfg.lr, cfg.betas, cfg.adam_eps, cfg.weight_decay
    return True


def optimizer_steps_done(opt: torch.optim.Optimizer) -> int:
    """How many steps the optimizer has taken, carried in its state across processes (0 when fresh)."""
    for st in opt.state.values():
        if "step" in st:
            return int(float(st["step"]))
    return 0


def warmup_lr(cfg: StepConfig, done: int) -> float:
    """The learning rate of optimizer step ``done + 1``: ``cfg.lr`` scaled by min(1, (done + 1) / warmup)."""
    if cfg.warmup_steps <= 0:
        return cfg.lr
    return cfg.lr * min(1.0, (done + 1) / cfg.warmup_steps)


def apply_warmup_lr(opt: torch.optim.Optimizer, cfg: StepConfig) -> float:
    """Sets the learning rate of the optimizer step about to be taken (``warmup_lr``) and returns it."""
    lr_now = warmup_lr(cfg, optimizer_steps_done(opt))
    for g in opt.param_groups:
        g["lr"] = lr_now
    return lr_now


def check_old_logprob_diff(cfg: StepConfig, diff_sum: float, diff_n: float) -> None:
    """The ``--max-old-logprob-diff`` guard, run after the first mini-batch's forward passes and
    before its optimizer step: raises OldLogprobMismatch when the mean |logp - old_logp| over its
    ``diff_n`` loss tokens (summing to ``diff_sum``) exceeds the limit."""
    if cfg.max_old_logprob_diff > 0 and diff_n and diff_sum / diff_n > cfg.max_old_logprob_diff:
        raise OldLogprobMismatch(
            f"mean |logp - old_logp| over the first mini-batch's {int(diff_n)} loss tokens is {diff_sum / diff_n:.4g}, "
            f"above --max-old-logprob-diff {cfg.max_old_logprob_diff:g}: the learner does not score the sampled tokens as the sampler did "
            "(another model or tokenizer, another temperature, or weights that are not the rollouts'); no update was made"
        )


def save_optimizer_state(opt: torch.optim.Optimizer, path: str | None) -> None:
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save({"optimizer": opt.state_dict()}, tmp)
    os.replace(tmp, path)


def needs_old_logprobs(r: Rollout) -> bool:
    """True when some loss token of ``r`` has no sampling log-prob (the whole list null, or null entries)."""
    return r.old_logprobs is None or any(math.isnan(x) for x, m in zip(r.old_logprobs, r.mask, strict=True) if m)


def fill_old_logprobs(policy: torch.nn.Module, rollouts: Sequence[Rollout], cfg: StepConfig, device: Any) -> None:
    """Scores ``rollouts`` with ``policy`` (no grad, eval mode) and stores the result where their
    ``old_logprobs`` are missing (all of them, or the null entries; 0 where mask = 0): the on-policy
    case, ratio = 1 before the first update."""
    policy.eval()
    with torch.no_grad():
        for chunk in _chunks(sorted(rollouts, key=lambda r: r.length), cfg.micro_batch):
            b = collate(chunk, cfg.pad_id, device=device)
            lp, _ = sequence_logprobs(policy, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
            for i, r in enumerate(chunk):
                P = len(r.prompt_tokens)
                row = lp[i].tolist()
                scored = [row[P - 1 + j] if P - 1 + j >= 0 else 0.0 for j in range(len(r.tokens))]
                given = r.old_logprobs if r.old_logprobs is not None else [math.nan] * len(r.tokens)
                r.old_logprobs = [(s if math.isnan(g) else g) if m else 0.0 for g, s, m in zip(given, scored, r.mask, strict=True)]


STAT_KEYS = ("pg", "kl", "ratio", "clipped", "entropy", "tokens", "nll")


def _half_gradient(policy: torch.nn.Module, rollouts: Sequence[Rollout], cfg: StepConfig, params: Sequence[torch.nn.Parameter], device: Any) -> torch.Tensor:
    """The flattened policy-gradient of ``rollouts`` alone (token-mean over their loss tokens, no KL)."""
    micros = [collate(m, cfg.pad_id, cfg.mask_truncated, device=device) for m in _chunks(sorted(rollouts, key=lambda r: r.length), cfg.micro_batch)]
    denom = agg_denominator((b.mask for b in micros), cfg.loss_agg)
    for p in params:
        p.grad = None
    for b in micros:
        if float(b.mask.sum()) == 0.0:
            continue
        lp, _ = sequence_logprobs(policy, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
        per_token, _ = grpo_token_loss(lp, b.old_logprobs, b.advantages, b.mask, cfg.clip, cfg.clip_high)
        aggregate(per_token, b.mask, cfg.loss_agg, denom).backward()
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    for p in params:
        p.grad = None
    return flat.detach()


def split_half_agreement(
    policy: torch.nn.Module, rollouts: Sequence[Rollout], cfg: StepConfig, params: Sequence[torch.nn.Parameter], device: Any
) -> dict[str, Any] | None:
    """Does the step's direction generalise across questions? For ``cfg.split_half`` random splits of the
    informative groups (non-zero advantages) into two halves: the cosine and the sign agreement of the two
    halves' gradients (before any update). Near 0 and 0.5: the halves agree no more than noise does."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        if r.advantage != 0.0:
            groups.setdefault(json.dumps(r.question_id, sort_keys=True), []).append(r)
    keys = sorted(groups)
    if len(keys) < 2:
        return None
    rng = random.Random(cfg.seed + 7919)
    cos, sign = [], []
    for _ in range(cfg.split_half):
        rng.shuffle(keys)
        half = len(keys) // 2
        a = _half_gradient(policy, [r for k in keys[:half] for r in groups[k]], cfg, params, device)
        b = _half_gradient(policy, [r for k in keys[half:] for r in groups[k]], cfg, params, device)
        na, nb = float(a.norm()), float(b.norm())
        cos.append(float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0)
        both = (a != 0) & (b != 0)
        sign.append(float(((a > 0) == (b > 0))[both].float().mean()) if bool(both.any()) else 0.5)
    return {"splits": len(cos), "groups": len(keys), "cosine": cos, "cosine_mean": sum(cos) / len(cos), "sign_agreement_mean": sum(sign) / len(sign)}


def accumulate_micro_stats(
    sums: dict[str, float],
    stats: dict[str, torch.Tensor],
    lp: torch.Tensor,
    ent: torch.Tensor,
    b: Batch,
    n: float,
    mode: str,
    ratio_min: float,
    ratio_max: float,
) -> tuple[float, float]:
    """Adds one micro-batch's loss statistics (``n`` loss tokens) to ``sums``; returns the updated
    (ratio_min, ratio_max) over its loss tokens (GRPO only)."""
    sums["tokens"] += n
    sums["pg"] += float(stats["pg"].sum())
    sums["kl"] += float(stats["kl"].sum())
    sums["ratio"] += float(stats["ratio"].sum())
    sums["clipped"] += float(stats["clipped"].sum())
    sums["entropy"] += float((ent * b.mask).sum())
    sums["nll"] += float((-lp.detach() * b.mask).sum())
    keep = b.mask > 0
    if mode == "grpo" and bool(keep.any()):
        r = stats["ratio"][keep]
        ratio_min, ratio_max = min(ratio_min, float(r.min())), max(ratio_max, float(r.max()))
    return ratio_min, ratio_max


def optimizer_step(opt: torch.optim.Optimizer, params: Sequence[torch.nn.Parameter], scaler: Any | None, max_grad_norm: float) -> float:
    """Unscales (fp16), clips to ``max_grad_norm`` (when > 0) and applies the accumulated gradients;
    returns the gradient norm before clipping."""
    if scaler is not None:
        scaler.unscale_(opt)
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        gn = torch.zeros(())
    elif max_grad_norm and max_grad_norm > 0:
        gn = torch.nn.utils.clip_grad_norm_(with_grad, max_grad_norm)
    else:
        gn = torch.norm(torch.stack([p.grad.detach().norm() for p in with_grad]))
    if scaler is not None:
        scaler.step(opt)
        scaler.update()
    else:
        opt.step()
    return float(gn)


def step_metrics(
    cfg: StepConfig,
    rollouts: Sequence[Rollout],
    sums: dict[str, float],
    step_losses: Sequence[float],
    ratio_min: float,
    ratio_max: float,
    grad_norms: Sequence[float],
    first_diff_sum: float,
    first_diff_n: float,
    steps: int,
    resumed: bool,
    with_ref: bool,
    dt: float,
) -> dict[str, Any]:
    """The metrics of a training step (the same keys for the GGUF and the HF path)."""
    ntok = max(sums["tokens"], 1.0)
    rewards = [r.reward for r in rollouts]
    advs = [r.advantage for r in rollouts]
    mean_r = sum(rewards) / len(rewards)
    return {
        "mode": cfg.mode,
        "loss": sum(step_losses) / len(step_losses) if step_losses else None,
        "pg_loss": sums["pg"] / ntok if cfg.mode == "grpo" else None,
        "nll": sums["nll"] / ntok,
        "kl": sums["kl"] / ntok if with_ref else None,
        "clip_frac": sums["clipped"] / ntok if cfg.mode == "grpo" else None,
        "ratio_mean": sums["ratio"] / ntok if cfg.mode == "grpo" else None,
        "ratio_min": ratio_min if math.isfinite(ratio_min) else None,
        "ratio_max": ratio_max if math.isfinite(ratio_max) else None,
        "entropy": sums["entropy"] / ntok,
        "grad_norm": sum(grad_norms) / len(grad_norms) if grad_norms else None,
        "grad_norm_max": max(grad_norms) if grad_norms else None,
        "old_logprob_abs_diff": first_diff_sum / first_diff_n if first_diff_n else None,
        "optimizer_steps": steps,
        "optimizer_resumed": resumed,
        "epochs": cfg.epochs,
        "lr": cfg.lr,
        "rollouts": len(rollouts),
        "loss_tokens_per_epoch": sums["tokens"] / max(cfg.epochs, 1),
        "context_tokens": sum(r.length for r in rollouts),
        "reward_mean": mean_r,
        "reward_std": math.sqrt(sum((x - mean_r) ** 2 for x in rewards) / len(rewards)),
        "advantage_mean": sum(advs) / len(advs),
        "advantage_abs_mean": sum(abs(a) for a in advs) / len(advs),
        "truncated": sum(1 for r in rollouts if r.truncated),
        "interactions_mean": sum(r.interactions for r in rollouts) / len(rollouts),
        "seconds": dt,
        "tokens_per_s": sum(r.length for r in rollouts) * cfg.epochs / dt if dt > 0 else None,
    }


def loop_diagnostics(opt: torch.optim.Optimizer, lrs: Sequence[float], packed: bool, computed_tokens: int, agreement: dict[str, Any] | None) -> dict[str, Any]:
    """The metrics a training loop adds to ``step_metrics`` (both ``train_step`` and ``hf_lora.train_lora_step``)."""
    out: dict[str, Any] = {
        "shared_prefix": packed,
        "computed_tokens": computed_tokens,
        "lr_applied": list(lrs),
        "optimizer_steps_total": optimizer_steps_done(opt),
    }
    if agreement is not None:
        out["split_half"] = agreement
    return out


def step_config_from_args(args: Any, compute_dtype: torch.dtype | None, kl_beta: float, **extra: Any) -> StepConfig:
    """A StepConfig from the command-line arguments that ``step`` and ``hf-step`` both define (same
    names); ``extra``: fields from flags only one of them has (``step``'s --share-prefix, --pack-tokens)."""
    return StepConfig(
        mode=args.mode,
        lr=args.lr,
        clip=args.clip,
        clip_high=args.clip_high,
        kl_beta=kl_beta,
        loss_agg=args.loss_agg,
        epochs=args.epochs,
        micro_batch=args.micro_batch,
        mini_batch=args.mini_batch,
        max_grad_norm=args.max_grad_norm,
        weight_decay=args.weight_decay,
        temperature=args.temperature,
        mask_truncated=args.mask_truncated,
        advantage=args.advantage,
        shuffle=args.shuffle,
        seed=args.seed,
        optimizer_state=args.optimizer_state,
        compute_dtype=compute_dtype,
        warmup_steps=args.warmup_steps,
        max_old_logprob_diff=args.max_old_logprob_diff,
        split_half=args.split_half,
        **extra,
    )


def train_step(
    policy: torch.nn.Module,
    rollouts: Sequence[Rollout],
    cfg: StepConfig,
    ref: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, Any]:
    """Runs ``cfg.epochs`` passes of GRPO (or SFT) over ``rollouts`` and returns metrics."""
    t0 = time.time()
    device = next(policy.parameters()).device
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    rollouts = list(rollouts)
    if cfg.mode not in ("grpo", "sft"):
        raise ValueError(f"mode must be grpo|sft, got {cfg.mode!r}")
    if cfg.mode == "grpo":
        compute_advantages(rollouts, cfg.advantage)
    if cfg.kl_beta and ref is None and cfg.mode == "grpo":
        raise ValueError("kl_beta > 0 needs a reference model")
    opt = optimizer or make_optimizer(policy, cfg)
    resumed = load_optimizer_state(opt, cfg.optimizer_state, cfg) if optimizer is None else False
    params = [p for g in opt.param_groups for p in g["params"]]
    use_scaler = cfg.compute_dtype == torch.float16 and device.type == "cuda"
    scaler = torch.cuda.amp.GradScaler() if use_scaler else None

    # Rollouts without old log-probs (on-policy files): score them once with the current weights.
    missing = [r for r in rollouts if cfg.mode == "grpo" and needs_old_logprobs(r)]
    if missing:
        fill_old_logprobs(policy, missing, cfg, device)
    agreement = split_half_agreement(policy, rollouts, cfg, params, device) if cfg.split_half > 0 and cfg.mode == "grpo" else None
    policy.train()
    lrs: list[float] = []

    sums = {k: 0.0 for k in STAT_KEYS}
    step_losses: list[float] = []
    ratio_min, ratio_max = math.inf, -math.inf
    grad_norms: list[float] = []
    first_diff_sum, first_diff_n = 0.0, 0.0
    steps = 0
    packed = cfg.share_prefix and cfg.loss_agg == "token-mean" and hasattr(policy, "hp")
    computed_tokens = 0
    for epoch in range(cfg.epochs):
        order = list(rollouts)
        if cfg.shuffle:
            rng.shuffle(order)
        minis = _chunks(order, cfg.mini_batch if cfg.mini_batch > 0 else len(order))
        for mi, mini in enumerate(minis):
            if packed:
                batches: list[Any] = pack_rollouts(mini, cfg.pack_tokens, cfg.pad_id, cfg.mask_truncated, device=device)
                score = packed_logprobs
            else:
                micros = _chunks(sorted(mini, key=lambda r: r.length), cfg.micro_batch)
                batches = [collate(m, cfg.pad_id, cfg.mask_truncated, device=device) for m in micros]
                score = sequence_logprobs
            denom = agg_denominator((b.mask for b in batches), cfg.loss_agg)
            opt.zero_grad(set_to_none=True)
            step_loss = 0.0
            for b in batches:
                if float(b.mask.sum()) == 0.0:
                    continue
                computed_tokens += b.tokens if packed else sum(b.lengths)
                lp, ent = score(policy, b, cfg.temperature, with_entropy=True, compute_dtype=cfg.compute_dtype)
                ref_lp = None
                if cfg.mode != "sft" and ref is not None:
                    with torch.no_grad():
                        ref_lp, _ = score(ref, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
                loss, stats = micro_batch_loss(cfg, lp, b, denom, ref_lp)
                if cfg.mode != "sft" and epoch == 0 and mi == 0:
                    first_diff_sum += float(((lp.detach() - b.old_logprobs).abs() * b.mask).sum())
                    first_diff_n += float(b.mask.sum())
                (scaler.scale(loss) if scaler is not None else loss).backward()
                step_loss += float(loss)
                ratio_min, ratio_max = accumulate_micro_stats(sums, stats, lp, ent, b, float(b.mask.sum()), cfg.mode, ratio_min, ratio_max)
            if epoch == 0 and mi == 0:
                check_old_logprob_diff(cfg, first_diff_sum, first_diff_n)
            lrs.append(apply_warmup_lr(opt, cfg))
            grad_norms.append(optimizer_step(opt, params, scaler, cfg.max_grad_norm))
            step_losses.append(step_loss)
            steps += 1
    save_optimizer_state(opt, cfg.optimizer_state)
    metrics = step_metrics(
        cfg, rollouts, sums, step_losses, ratio_min, ratio_max, grad_norms, first_diff_sum, first_diff_n, steps, resumed, ref is not None, time.time() - t0
    )
    metrics.update(loop_diagnostics(opt, lrs, packed, computed_tokens, agreement))
    return metrics

"""Experience and batches: the experience file's rollouts (docs/learner.md), collated one row per
rollout or packed with a shared prompt, and their log-probs under a model."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


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

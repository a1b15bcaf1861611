"""Experience and batches: the experience file's rollouts (docs/learner.md), collated one row per
rollout or packed with a shared prompt, and their log-probs under a model."""

from __future__ import annotations

import contextlib
import gzip
import json
import lzma
import math
import random
from collections.abc import Iterable, Iterator, Sequence
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
        truncated=bool(obj.get("truncated", False)),
        interactions=int(obj.get("interactions", 0) or 0),
        question_id=obj.get("question_id"),
    )


def read_jsonl(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a path ending in .gz or .xz is read through gzip or xz (the
    synthetic SFT data gzips 30x; real schemas repeat farther apart than gzip's window, so xz carries them)."""
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{n}: not JSON: {err}") from err


def read_experience(path: str) -> list[Rollout]:
    """The rollouts of an experience file (docs/learner.md for the fields)."""
    out = [parse_rollout(obj, f"{path}:{n}: ") for n, obj in read_jsonl(path)]
    if not out:
        raise ValueError(f"{path}: no rollouts")
    return out


def check_token_ids(seqs: Iterable[Sequence[int]], n_vocab: int, path: str) -> None:
    """ValueError naming the first of ``seqs`` (a file's rollouts or records, from 0) with a token id outside the model."""
    for i, seq in enumerate(seqs):
        bad = next((t for t in seq if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise ValueError(f"{path}: entry {i}: token id {bad} outside the model's vocabulary (0..{n_vocab - 1}): not this model's tokenizer")


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
class Record:
    prompt: list[int]
    tokens: list[int]
    mask: list[int]
    group: str  # records with the same group may share a packed prefix
    key: str  # question identity (held-out split is by question, all families together)
    family: str
    db: str = ""
    old: list[float] | None = None  # a rollout's old log-probs (None: SFT records)
    adv: float = 0.0  # a rollout's advantage


@dataclass
class Pack:
    """One row: a shared prefix and suffixes that each continue it on their own."""

    prefix: list[int]
    suffixes: list[tuple[list[int], list[int]]]  # (tokens, loss mask) per suffix
    rl: list[tuple[list[float] | None, float]] = field(default_factory=list)  # per suffix: old log-probs aligned to its tokens, advantage

    @property
    def length(self) -> int:
        return len(self.prefix) + sum(len(t) for t, _ in self.suffixes)

    @property
    def unpacked_length(self) -> int:
        return sum(len(self.prefix) + len(t) for t, _ in self.suffixes)

    @property
    def loss_tokens(self) -> int:
        return sum(sum(m) for _, m in self.suffixes)


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs[1:]):
        i += 1
    return i


def make_packs(records: Sequence[Record], pack_tokens: int, share_prefix: bool, rng: random.Random | None = None) -> list[Pack]:
    """Groups records (by database + family when sharing), cuts each group's common prompt prefix
    (at most all but the last prompt token of the shortest prompt, so every suffix starts with a
    prompt token and every loss token is predicted from inside its own suffix), then fills rows up
    to ``pack_tokens`` (a record longer than that gets a row of its own)."""
    groups: dict[str, list[Record]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.group if share_prefix else f"#{i}", []).append(r)
    packs: list[Pack] = []
    for members in groups.values():
        members = list(members)
        if rng is not None:
            rng.shuffle(members)
        P = common_prefix_len([m.prompt for m in members])
        P = max(0, min(P, min(len(m.prompt) for m in members) - 1))
        prefix = members[0].prompt[:P]
        cur: list[tuple[list[int], list[int]]] = []
        rl: list[tuple[list[float] | None, float]] = []
        cur_len = P
        for m in members:
            toks = m.prompt[P:] + m.tokens
            mask = [0] * (len(m.prompt) - P) + m.mask
            if cur and cur_len + len(toks) > pack_tokens:
                packs.append(Pack(prefix, cur, rl))
                cur, rl, cur_len = [], [], P
            cur.append((toks, mask))
            rl.append(([math.nan] * (len(m.prompt) - P) + m.old if m.old is not None else None, m.adv))
            cur_len += len(toks)
        if cur:
            packs.append(Pack(prefix, cur, rl))
    return packs


@dataclass
class PackedBatch:
    """Packed rows as tensors; ``old_logprobs`` and ``advantages`` (B, T) only for rollouts (GRPO)."""

    ids: torch.Tensor  # (B, T)
    pos: torch.Tensor  # (B, T)
    seg: torch.Tensor  # (B, T): 0 prefix, i >= 1 suffix i, -1 padding
    targets: torch.Tensor  # (B, T): next token of the same suffix (0 where none)
    mask: torch.Tensor  # (B, T) float: 1 where targets[t] is a loss token
    real_tokens: int
    unpacked_tokens: int
    old_logprobs: torch.Tensor | None = None
    advantages: torch.Tensor | None = None

    def to(self, device: Any) -> PackedBatch:
        if torch.device(device).type == "cpu":
            return self
        moved = (None if t is None else t.to(device, non_blocking=True) for t in (self.old_logprobs, self.advantages))
        tensors = (t.to(device, non_blocking=True) for t in (self.ids, self.pos, self.seg, self.targets, self.mask))
        return PackedBatch(*tensors, self.real_tokens, self.unpacked_tokens, *moved)


def collate_packs(packs: Sequence[Pack], pad_id: int = 0) -> PackedBatch:
    """The rows of ``packs`` padded to the longest (segment -1); with rollouts' packs, their old log-probs and advantages too."""
    T = max(p.length for p in packs)
    B = len(packs)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    pos = torch.zeros((B, T), dtype=torch.long)
    seg = torch.full((B, T), -1, dtype=torch.long)
    targets = torch.zeros((B, T), dtype=torch.long)
    mask = torch.zeros((B, T))
    rl = bool(packs[0].rl)
    old, adv = (torch.zeros((B, T)), torch.zeros((B, T))) if rl else (None, None)
    for b, p in enumerate(packs):
        P = len(p.prefix)
        ids[b, :P] = torch.tensor(p.prefix, dtype=torch.long) if P else ids[b, :0]
        pos[b, :P] = torch.arange(P)
        seg[b, :P] = 0
        at = P
        for s, (toks, m) in enumerate(p.suffixes, 1):
            n = len(toks)
            ids[b, at : at + n] = torch.tensor(toks, dtype=torch.long)
            pos[b, at : at + n] = torch.arange(P, P + n)
            seg[b, at : at + n] = s
            # token j of the suffix (j >= 1) is predicted at position at + j - 1 (inside the suffix);
            # token 0 is a prompt token (mask 0) by construction of the prefix
            if n > 1:
                targets[b, at : at + n - 1] = torch.tensor(toks[1:], dtype=torch.long)
                mask[b, at : at + n - 1] = torch.tensor(m[1:], dtype=torch.float32)
                if rl:
                    lp, adv[b, at : at + n - 1] = p.rl[s - 1]
                    if lp is not None:
                        old[b, at : at + n - 1] = torch.nan_to_num(torch.tensor(lp[1:], dtype=torch.float32), nan=0.0)
            at += n
    if old is not None:
        old = old * mask  # 0 where mask = 0, whatever the file said
    return PackedBatch(ids, pos, seg, targets, mask, sum(p.length for p in packs), sum(p.unpacked_length for p in packs), old, adv)


def pack_rollouts(
    rollouts: Sequence[Rollout], pack_tokens: int = 2048, pad_id: int = 0, mask_truncated: bool = False, device: Any = "cpu"
) -> list[PackedBatch]:
    """One row per run of same-prompt rollouts that fits ``pack_tokens`` (a lone rollout longer than
    that still gets its row): the prompt minus its last token once, then per rollout its last prompt
    token and its response (the packer of the starter's SFT, :func:`make_packs`)."""
    records = [
        Record(
            r.prompt_tokens,
            r.tokens,
            [0] * len(r.mask) if mask_truncated and r.truncated else r.mask,
            json.dumps(r.prompt_tokens),
            "",
            "",
            "",
            r.old_logprobs,
            r.advantage,
        )
        for r in rollouts
    ]
    return [collate_packs([p], pad_id).to(device) for p in make_packs(records, pack_tokens, True)]


def packed_forward(model: torch.nn.Module, ids: torch.Tensor, pos: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, n_vocab) of packed rows: the model's hidden states with explicit positions and the packed
    attention mask (model.packed_allowed), so every suffix token gets the logits of its own unpacked sequence."""
    return model.logits(model.hidden(ids, pos, seg=seg))


def packed_logprobs(model: torch.nn.Module, b: PackedBatch, temperature: float = 1.0, with_entropy: bool = False, compute_dtype: torch.dtype | None = None):
    """(B, T) log-probs of ``b.targets`` at the packed rows' loss tokens, 0 elsewhere (entropy too if asked).
    Only the loss tokens are projected onto the vocabulary: the output matrix is most of a large-vocabulary
    model's cost (Gemma 3: 262k x 640), and a packed row's prefix has none."""
    keep = b.mask > 0
    with autocast_context(b.ids.device, compute_dtype):
        logits = model.logits(model.hidden(b.ids, b.pos, seg=b.seg)[keep])
    lp_k, ent_k = target_logprobs(logits, b.targets[keep], temperature, with_entropy)
    lp = torch.zeros(b.mask.shape, dtype=lp_k.dtype, device=lp_k.device).masked_scatter(keep, lp_k)
    ent = None if ent_k is None else torch.zeros_like(lp).masked_scatter(keep, ent_k)
    return lp, ent

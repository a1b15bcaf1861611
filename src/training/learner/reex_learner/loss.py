"""The loss: GRPO's clipped surrogate with the k3 KL, or SFT's cross-entropy, as a micro-batch's share of
the optimizer batch's mean (the formulas, aggregation and masking: docs/learner.md, "The loss")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

LOG_RATIO_CLAMP = 20.0


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
    if ref_logp is not None:
        # zero where mask = 0 (whatever the reference says there); a metric only when kl_beta is 0
        with torch.set_grad_enabled(kl_beta != 0.0 and torch.is_grad_enabled()):
            kl = kl_k3(torch.where(keep, logp, 0.0), torch.where(keep, ref_logp, 0.0))
        if kl_beta != 0.0:
            per_token = per_token + kl_beta * kl
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
    """This micro-batch's share of the optimizer-batch mean (``denom``: that batch's ``agg_denominator``)."""
    if loss_agg == "token-mean":
        return per_token.sum() / denom
    ntok = mask.sum(-1)  # seq-mean-token-mean
    per_seq = per_token.sum(-1) / ntok.clamp(min=1.0)
    return per_seq[ntok > 0].sum() / denom


def agg_denominator(masks: Iterable[torch.Tensor], loss_agg: str, floor: float = 1.0) -> float:
    """The loss tokens (token-mean) or sequences with one (seq-mean-token-mean) of ``masks``, at least ``floor``."""
    tot = 0.0
    for m in masks:
        tot += float(m.sum()) if loss_agg == "token-mean" else float((m.sum(-1) > 0).sum())
    return max(tot, floor)


def micro_batch_loss(cfg: Any, lp: torch.Tensor, b: Any, denom: float, ref_lp: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One micro-batch's loss (SFT's cross-entropy or ``grpo_token_loss``) as its share of the optimizer-batch mean,
    and its per-token stats; ``lp``/``ref_lp``: the policy's and the reference's (or None) log-probs of ``b.targets``."""
    if cfg.mode == "sft":
        per_token = -lp * b.mask
        loss = aggregate(per_token, b.mask, cfg.loss_agg, denom)
        stats = {"pg": per_token.detach(), "kl": torch.zeros_like(lp), "ratio": b.mask, "clipped": torch.zeros_like(lp)}
        return loss, stats
    per_token, stats = grpo_token_loss(lp, b.old_logprobs, b.advantages, b.mask, cfg.clip, cfg.clip_high, ref_lp, cfg.kl_beta)
    return aggregate(per_token, b.mask, cfg.loss_agg, denom), stats

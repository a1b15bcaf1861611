"""The one training loop of the learner, for GRPO and SFT alike, over a :class:`Backend`: one optimizer, one
lr schedule, one optimizer step (docs/learner.md, "The loss")."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .grpo import Rollout, collate, collate_packs, pack_rollouts, packed_logprobs, sequence_logprobs
from .loss import agg_denominator, micro_batch_loss

#: AdamW's first-moment decay and epsilon (fixed, not hyper-parameters of a run); the padding token id.
ADAM_BETA1 = 0.9
ADAM_EPS = 1e-8
PAD_ID = 0


@dataclass(frozen=True)
class StepConfig:
    """One step's settings: the request's ``train`` fields (snake_case, field for field; request.py), its
    mode and optimizer state, and the autocast compute dtype. No defaults: TypeScript's config has them."""

    mode: str  # grpo | sft
    optimizer_state: str | None  # AdamW moments carried across steps/processes
    compute_dtype: torch.dtype | None  # autocast dtype of forward passes (None = float32)
    lr: float
    clip: float
    clip_high: float | None  # DAPO clip-higher; None = clip
    kl_beta: float
    temperature: float
    loss_agg: str
    epochs: int
    micro_batch: int  # rollouts per forward/backward
    mini_batch: int  # rollouts per optimizer step (0 = all)
    max_grad_norm: float
    weight_decay: float
    warmup_steps: int  # optimizer steps (counted across processes) of the linear lr ramp
    max_old_logprob_diff: float  # fail before any update above this mean |logp - old_logp| (0 = off)
    split_half: int  # random half-splits of the groups whose gradients are compared (0 = off)
    mask_truncated: bool
    share_prefix: bool  # rollouts of one prompt share it in a packed row
    pack_tokens: int
    shuffle: bool
    seed: int
    adam_beta2: float  # AdamW's second-moment decay (beta1 is 0.9)
    decay_norms: bool  # weight decay on 1-D parameters (norms, biases) too, else on matrices only
    schedule: str  # constant | linear | cosine: the lr after warm-up, decayed over a run's progress
    min_lr_ratio: float  # the decayed lr's floor, as a share of lr
    progress: float  # how far the training run is before this step, in [0, 1] (a multi-step run counts its own)


class OldLogprobMismatch(ValueError):
    """The learner's log-probs of the sampled tokens disagree with the sampler's: the step is off-policy
    in a way the ratio clip cannot absorb (wrong tokenizer, model, temperature or a stale export)."""


def _chunks(xs: Sequence[Any], n: int) -> list[list[Any]]:
    n = max(1, n)
    return [list(xs[i : i + n]) for i in range(0, len(xs), n)]


def make_optimizer(model: torch.nn.Module, cfg: StepConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters: group 0 decays (every parameter, or with ``decay_norms`` off the
    matrices only), group 1 (the 1-D rest, when any is left out) does not."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if cfg.decay_norms or p.dim() >= 2]
    rest = [p for p in params if not (cfg.decay_norms or p.dim() >= 2)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}] + ([{"params": rest, "weight_decay": 0.0}] if rest else [])
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(ADAM_BETA1, cfg.adam_beta2), eps=ADAM_EPS)


def load_optimizer_state(opt: torch.optim.Optimizer, path: str | None, cfg: StepConfig) -> bool:
    if not path or not os.path.exists(path):
        return False
    opt.load_state_dict(torch.load(path, map_location="cpu")["optimizer"])
    for i, g in enumerate(opt.param_groups):  # the request wins over the saved hyperparameters
        g["lr"], g["betas"], g["eps"] = cfg.lr, (ADAM_BETA1, cfg.adam_beta2), ADAM_EPS
        g["weight_decay"] = cfg.weight_decay if i == 0 else 0.0
    return True


def optimizer_steps_done(opt: torch.optim.Optimizer) -> int:
    """How many steps the optimizer has taken, carried in its state across processes (0 when fresh)."""
    return next((int(float(st["step"])) for st in opt.state.values() if "step" in st), 0)


def lr_at(cfg: StepConfig, done: int, progress: float) -> float:
    """The learning rate of optimizer step ``done + 1``: a linear warm-up over ``cfg.warmup_steps``, then
    ``cfg.schedule`` decayed by ``progress`` in [0, 1] (a run's steps or wall clock) to ``min_lr_ratio``."""
    if cfg.warmup_steps > 0 and done < cfg.warmup_steps:
        return cfg.lr * min(1.0, (done + 1) / cfg.warmup_steps)
    p = min(max(progress, 0.0), 1.0)
    f = {"constant": 1.0, "linear": 1.0 - p, "cosine": 0.5 * (1.0 + math.cos(math.pi * p))}[cfg.schedule]
    return cfg.lr * (cfg.min_lr_ratio + (1.0 - cfg.min_lr_ratio) * f)


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
            b = collate(chunk, PAD_ID, device=device)
            lp, _ = sequence_logprobs(policy, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
            for i, r in enumerate(chunk):
                P = len(r.prompt_tokens)
                row = lp[i].tolist()
                scored = [row[P - 1 + j] if P - 1 + j >= 0 else 0.0 for j in range(len(r.tokens))]
                given = r.old_logprobs if r.old_logprobs is not None else [math.nan] * len(r.tokens)
                r.old_logprobs = [(s if math.isnan(g) else g) if m else 0.0 for g, s, m in zip(given, scored, r.mask, strict=True)]


def _half_gradient(policy: torch.nn.Module, rollouts: Sequence[Rollout], cfg: StepConfig, params: Sequence[torch.nn.Parameter], device: Any) -> torch.Tensor:
    """The flattened policy-gradient of ``rollouts`` alone (token-mean over their loss tokens, no KL)."""
    micros = [collate(m, PAD_ID, cfg.mask_truncated, device=device) for m in _chunks(sorted(rollouts, key=lambda r: r.length), cfg.micro_batch)]
    denom = agg_denominator((b.mask for b in micros), cfg.loss_agg)
    for p in params:
        p.grad = None
    for b in micros:
        if float(b.mask.sum()) == 0.0:
            continue
        lp, _ = sequence_logprobs(policy, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
        micro_batch_loss(cfg, lp, b, denom)[0].backward()
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


def save_atomic(obj: Any, path: str) -> None:
    """``torch.save`` through a temporary file and a rename (optimizer state, master weights)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------
# Processes (torchrun / accelerate launch set WORLD_SIZE, RANK, LOCAL_RANK)
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def shard_rollouts(rollouts: Sequence[Rollout], rank: int, world_size: int) -> list[Rollout]:
    """This rank's share of ``rollouts``: sorted by length (ties by position), then dealt round-robin, so
    ranks get near-equal counts and token loads, every rollout goes to exactly one rank, and one rank
    gets them all in length order (its micro-batches)."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside 0..{world_size - 1}")
    order = sorted(range(len(rollouts)), key=lambda i: (rollouts[i].length, i))
    return [rollouts[i] for i in order[rank::world_size]]


def all_reduce(values: Sequence[float], dist_info: DistInfo, op: str = "sum", device: Any = "cpu") -> list[float]:
    if not dist_info.enabled:
        return [float(v) for v in values]
    import torch.distributed as dist

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op])
    return t.tolist()


def _fill_missing_old_logprobs(backend: Backend, rollouts: list[Rollout], cfg: StepConfig, device: Any) -> None:
    """Scores the rollouts without old log-probs (each rank its share, then gathered)."""
    d = backend.dist
    missing = [i for i, r in enumerate(rollouts) if needs_old_logprobs(r)]
    if not missing or cfg.mode != "grpo":
        return
    mine = missing[d.rank :: d.world_size]
    if mine:
        fill_old_logprobs(backend.plain, [rollouts[i] for i in mine], cfg, device)
    if d.enabled:
        import torch.distributed as dist

        gathered: list[Any] = [None] * d.world_size
        dist.all_gather_object(gathered, [(i, rollouts[i].old_logprobs) for i in mine])
        for part in gathered:
            for i, lps in part:
                rollouts[i].old_logprobs = lps


# ------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------
class Backend:
    """What the loop needs of a model: ``module`` (its trainable parameters train), ``plain`` (``(B, L) -> logits``
    without DDP), ``policy`` (the one the loss differentiates), ``ref`` (the KL reference or None), ``dist`` and
    ``sync`` (DDP's no_sync but for the last backward). This one is the GGUF model, whose rows may be packed."""

    def __init__(self, model: torch.nn.Module, ref: Any = None):
        self.module = self.plain = self.policy = model
        self.ref = ref
        self.dist = DistInfo()
        self.packs = hasattr(model, "hp")

    def sync(self, last: bool) -> Any:
        return contextlib.nullcontext()

    def extra_metrics(self) -> dict[str, Any]:
        return {}


def _step_batches(rollouts: list[Rollout], cfg: StepConfig) -> Iterator[tuple[list[Rollout], bool]]:
    """A step's optimizer batches: ``cfg.epochs`` passes over ``rollouts`` in mini-batches (shuffled with the
    seed, the same on every rank), each with whether it is the step's first."""
    rng = random.Random(cfg.seed)
    for epoch in range(cfg.epochs):
        order = list(rollouts)
        if cfg.shuffle:
            rng.shuffle(order)
        for mi, mini in enumerate(_chunks(order, cfg.mini_batch if cfg.mini_batch > 0 else len(order))):
            yield mini, epoch == 0 and mi == 0


def train(
    backend: Backend | torch.nn.Module, rollouts: Sequence[Rollout], cfg: StepConfig, optimizer: torch.optim.Optimizer | None = None, plan: Any = None
) -> dict[str, Any]:
    """The loop: optimizer steps over ``rollouts`` (``cfg.epochs`` passes of GRPO or SFT: a step), or over
    ``plan``'s batches of packed records until its budget runs out (a multi-step SFT run, sft_run.Plan,
    which sees each step and makes the summary). Updates ``backend.module``'s trainable parameters and
    returns the metrics (reduced over ranks). A plain module is a :class:`Backend` without reference."""
    t0 = time.time()
    b_ = backend if isinstance(backend, Backend) else Backend(backend)
    if cfg.kl_beta and b_.ref is None and cfg.mode == "grpo":
        raise ValueError("kl_beta > 0 needs a reference model")
    if b_.dist.enabled and cfg.split_half > 0:
        raise ValueError("split_half runs in one process only (not under torchrun / accelerate launch)")
    opt = optimizer or make_optimizer(b_.module, cfg)
    resumed = load_optimizer_state(opt, cfg.optimizer_state, cfg) if optimizer is None else False
    params = [p for g in opt.param_groups for p in g["params"]]
    if not params:
        raise ValueError("the model has no trainable parameters")
    device = params[0].device
    torch.manual_seed(cfg.seed)
    rollouts = list(rollouts)
    _fill_missing_old_logprobs(b_, rollouts, cfg, device)
    agreement = split_half_agreement(b_.plain, rollouts, cfg, params, device) if cfg.split_half > 0 and cfg.mode == "grpo" else None
    run = _Run(b_, cfg, opt, params, device, "packs" if plan is not None else None)
    for mini, first in plan.batches() if plan is not None else _step_batches(rollouts, cfg):
        run.optimizer_step(mini, first, plan.progress() if plan is not None else cfg.progress)
        if plan is not None:
            plan.after_step(run)
    if cfg.optimizer_state and b_.dist.is_main:
        save_atomic({"optimizer": opt.state_dict()}, cfg.optimizer_state)
    return plan.summary(run) if plan is not None else run.metrics(rollouts, resumed, agreement, time.time() - t0)


class _Run:
    """One call of :func:`train`: its optimizer steps and what they add up to."""

    def __init__(self, backend: Backend, cfg: StepConfig, opt: torch.optim.Optimizer, params: list[torch.nn.Parameter], device: Any, rows: str | None):
        self.b, self.cfg, self.opt, self.params, self.device = backend, cfg, opt, params, device
        self.comm = device if device.type == "cuda" else "cpu"  # NCCL reduces CUDA tensors only; gloo CPU ones
        self.ref = backend.ref if cfg.mode == "grpo" else None
        self.packed = rows == "packs" or (cfg.share_prefix and cfg.loss_agg == "token-mean" and backend.packs and not backend.dist.enabled)
        self.rows = rows or ("packed" if self.packed else "plain")
        self.score = packed_logprobs if self.packed else sequence_logprobs
        use_scaler = cfg.compute_dtype == torch.float16 and device.type == "cuda"
        self.scaler = torch.cuda.amp.GradScaler() if use_scaler else None
        self.sums = dict.fromkeys(("pg", "kl", "ratio", "clipped", "entropy", "tokens", "nll"), 0.0)
        self.step_losses: list[float] = []
        self.grad_norms: list[float] = []
        self.lrs: list[float] = []
        self.ratio = [math.inf, -math.inf]
        self.first_diff = [0.0, 0.0]
        self.computed_tokens = 0
        backend.module.train()

    def _micro_batches(self, mini: list[Any]) -> tuple[list[Any], float]:
        """The micro-batches of one optimizer step on this rank and the loss denominator over all ranks. ``rows``:
        "plain" (a row per rollout), "packed" (prefix-shared rows of rollouts) or "packs" (a run's packed rows)."""
        cfg, d, device = self.cfg, self.b.dist, self.device
        if self.rows == "packs":
            batches: list[Any] = [collate_packs(mini).to(device)]
        elif self.rows == "packed":
            batches = pack_rollouts(mini, cfg.pack_tokens, PAD_ID, cfg.mask_truncated, device=device)
        else:
            local = shard_rollouts(mini, d.rank, d.world_size)
            batches = [collate(m, PAD_ID, cfg.mask_truncated, device=device) for m in _chunks(local, cfg.micro_batch)]
        denom = max(all_reduce([agg_denominator((b.mask for b in batches), cfg.loss_agg, floor=0.0)], d, "sum", self.comm)[0], 1.0)
        if d.enabled and not batches:
            # a rank without rollouts still runs a backward (no loss token, zero gradient) so DDP's all-reduce has every rank
            batches = [collate([Rollout([PAD_ID, PAD_ID], [], [], None, 0.0)], PAD_ID, device=device)]
        return batches, denom

    def optimizer_step(self, mini: list[Any], first: bool, progress: float) -> None:
        cfg, b, opt = self.cfg, self.b, self.opt
        batches, denom = self._micro_batches(mini)
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for k, batch in enumerate(batches):
            last = k == len(batches) - 1
            n = float(batch.mask.sum())
            # under DDP exactly one backward per optimizer step synchronises (the last, even without loss tokens)
            if n == 0.0 and not (b.dist.enabled and last):
                continue
            with b.sync(last):
                step_loss += float(self._micro(batch, n, denom, first))
        if first:  # the guard sees every rank's tokens, so all ranks stop together
            self.first_diff = all_reduce(self.first_diff, b.dist, "sum", self.comm)
            diff_sum, diff_n = self.first_diff
            if cfg.max_old_logprob_diff > 0 and diff_n and diff_sum / diff_n > cfg.max_old_logprob_diff:
                raise OldLogprobMismatch(
                    f"mean |logp - old_logp| over the first mini-batch's {int(diff_n)} loss tokens is {diff_sum / diff_n:.4g}, "
                    f"above learner.maxOldLogprobDiff {cfg.max_old_logprob_diff:g}: the learner does not score the sampled tokens as the sampler did "
                    "(another model or tokenizer, another temperature, or weights that are not the rollouts'); no update was made"
                )
        self.lrs.append(lr_at(cfg, optimizer_steps_done(opt), progress))
        for g in opt.param_groups:
            g["lr"] = self.lrs[-1]
        if self.scaler is not None:
            self.scaler.unscale_(opt)
        with_grad = [p for p in self.params if p.grad is not None]
        if not with_grad:
            gn = torch.zeros(())
        elif cfg.max_grad_norm > 0:
            gn = torch.nn.utils.clip_grad_norm_(with_grad, cfg.max_grad_norm)
        else:
            gn = torch.norm(torch.stack([p.grad.detach().norm() for p in with_grad]))
        # the package's one optimizer step; fp16 skips it on inf/nan gradients (their norm), as GradScaler.step does
        if self.scaler is None or math.isfinite(float(gn)):
            opt.step()
        if self.scaler is not None:
            self.scaler.update()  # reads the inf check unscale_ recorded
        self.grad_norms.append(float(gn))
        self.step_losses.append(step_loss)
        self.last_batches = batches

    def _micro(self, batch: Any, n: float, denom: float, first: bool) -> torch.Tensor:
        """One micro-batch's forward and backward; adds its loss statistics (``n`` loss tokens) to the run's."""
        cfg, dtype, sums = self.cfg, self.cfg.compute_dtype, self.sums
        lp, ent = self.score(self.b.policy, batch, cfg.temperature, with_entropy=True, compute_dtype=dtype)
        ref_lp = None
        if self.ref is not None and n > 0:
            with torch.no_grad():
                ref_lp, _ = self.score(self.ref, batch, cfg.temperature, compute_dtype=dtype)
        loss, stats = micro_batch_loss(cfg, lp, batch, denom, ref_lp)
        if cfg.mode != "sft" and first:
            self.first_diff[0] += float(((lp.detach() - batch.old_logprobs).abs() * batch.mask).sum())
            self.first_diff[1] += n
        scaled = loss * self.b.dist.world_size  # DDP averages the ranks' gradients; the loss wants their sum
        (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
        if n > 0:
            self.computed_tokens += batch.real_tokens if self.packed else sum(batch.lengths)
        sums["tokens"] += n
        for k in ("pg", "kl", "ratio", "clipped"):
            sums[k] += float(stats[k].sum())
        sums["entropy"] += float((ent * batch.mask).sum())
        sums["nll"] += float((-lp.detach() * batch.mask).sum())
        keep = batch.mask > 0
        if cfg.mode == "grpo" and bool(keep.any()):
            r = stats["ratio"][keep]
            self.ratio = [min(self.ratio[0], float(r.min())), max(self.ratio[1], float(r.max()))]
        return loss

    def metrics(self, rollouts: list[Rollout], resumed: bool, agreement: dict[str, Any] | None, dt: float) -> dict[str, Any]:
        """The metrics of a step (the same keys for every backend), reduced over ranks."""
        cfg, d, grpo = self.cfg, self.b.dist, self.cfg.mode == "grpo"
        keys = list(self.sums)
        red = all_reduce([self.sums[k] for k in keys] + self.step_losses + [self.computed_tokens], d, "sum", self.comm)
        sums = dict(zip(keys, red[: len(keys)], strict=True))
        losses, gns = red[len(keys) : len(keys) + len(self.step_losses)], self.grad_norms
        lo, hi = all_reduce([self.ratio[0]], d, "min", self.comm)[0], all_reduce([self.ratio[1]], d, "max", self.comm)[0]
        ntok, (diff_sum, diff_n) = max(sums["tokens"], 1.0), self.first_diff
        rewards, advs = [r.reward for r in rollouts], [r.advantage for r in rollouts]
        mean_r = sum(rewards) / len(rewards)
        out = {
            "mode": cfg.mode,
            "loss": sum(losses) / len(losses) if losses else None,
            "pg_loss": sums["pg"] / ntok if grpo else None,
            "nll": sums["nll"] / ntok,
            "kl": sums["kl"] / ntok if self.ref is not None else None,
            "clip_frac": sums["clipped"] / ntok if grpo else None,
            "ratio_mean": sums["ratio"] / ntok if grpo else None,
            "ratio_min": lo if math.isfinite(lo) else None,
            "ratio_max": hi if math.isfinite(hi) else None,
            "entropy": sums["entropy"] / ntok,
            "grad_norm": sum(gns) / len(gns) if gns else None,
            "grad_norm_max": max(gns) if gns else None,
            "old_logprob_abs_diff": diff_sum / diff_n if diff_n else None,
            "optimizer_steps": len(self.step_losses),
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
            "shared_prefix": self.packed,
            "computed_tokens": int(red[-1]),
            "lr_applied": list(self.lrs),
            "optimizer_steps_total": optimizer_steps_done(self.opt),
        }
        if agreement is not None:
            out["split_half"] = agreement
        return {**out, **self.b.extra_metrics()}

"""Path (b): GRPO / SFT on a Hugging Face checkpoint with a LoRA adapter (transformers + peft).

``python3 -m reex_learner hf-step --base HF_DIR_OR_ID [--adapter-in DIR] --experience STEP.jsonl
--adapter-out DIR [--gguf-out ADAPTER.gguf] ...`` (see docs/learner.md, "Path (b)").

* The policy is the frozen base (``AutoModelForCausalLM``) plus a trainable LoRA adapter (peft): a
  fresh one (``--lora-r/--lora-alpha/--lora-targets``) or ``--adapter-in`` from the previous step.
* The experience file is the GGUF path's (``grpo.read_experience``): token ids of the GGUF the
  rollouts ran on, which must have been converted from this same HF checkpoint (llama.cpp's
  ``convert_hf_to_gguf.py`` keeps the HF tokenizer's ids).
* The loss is ``grpo.micro_batch_loss`` -- the very function ``grpo.train_step`` uses (GRPO clip +
  k3 KL, or SFT; token-mean or seq-mean-token-mean), over ``grpo.collate`` batches scored by
  ``grpo.sequence_logprobs``.
* The KL reference is the base model itself with the adapter switched off (peft's
  ``disable_adapter()`` context): no second copy of the weights. ``--ref-free`` drops it.
* AdamW over the LoRA parameters only (kept in float32 whatever ``--dtype`` the base is loaded in),
  gradient-norm clipping, micro-batch accumulation, mini-batches and epochs as in ``grpo``; warm-up,
  the old-log-prob guard and the split-half diagnostic are grpo's own functions, and the metrics
  (``grpo.step_metrics`` + ``grpo.loop_diagnostics``) have every key ``grpo.train_step`` reports.
* Multi-GPU: under torchrun / ``accelerate launch`` (``WORLD_SIZE > 1``) every rank reads the whole
  file (advantages are computed over all of it), takes its share of each optimizer mini-batch
  (``shard_rollouts``), and DistributedDataParallel all-reduces the LoRA gradients once per optimizer
  step. The token-mean denominator is all-reduced first and each rank's loss is multiplied by the
  world size (DDP averages), so the update equals the single-process one (tested on CPU/gloo).

transformers and peft are imported only when a model is loaded (``require_hf``), so everything else
here -- the loop, sharding, the GGUF conversion command -- imports and is tested without them.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .grpo import (
    STAT_KEYS,
    Batch,
    Rollout,
    StepConfig,
    _chunks,
    accumulate_micro_stats,
    apply_warmup_lr,
    check_old_logprob_diff,
    collate,
    compute_advantages,
    fill_old_logprobs,
    load_optimizer_state,
    loop_diagnostics,
    make_optimizer,
    micro_batch_loss,
    needs_old_logprobs,
    optimizer_step,
    save_optimizer_state,
    sequence_logprobs,
    split_half_agreement,
    step_metrics,
)
from .grpo import step_config_from_args as grpo_step_config_from_args
from .llama_cpp_paths import llama_cpp_candidates

HF_IMPORT_HINT = (
    "path (b) needs transformers and peft: pip install transformers==4.50.3 peft==0.14.0 (the tested pins; "
    "`bash scripts/install-hf-deps.sh` makes a venv with them, torch 2.5.1 and trl 0.16.1, and prints its python). "
    "The GGUF path (`python3 -m reex_learner step`) needs neither."
)

DEFAULT_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
DEFAULT_KL_BETA = 0.001


class MissingHFDependency(ImportError):
    """transformers or peft is not importable."""


def require_hf() -> tuple[Any, Any]:
    """Imports (transformers, peft) or raises MissingHFDependency with the install hint."""
    try:
        import peft  # type: ignore
        import transformers  # type: ignore
    except ImportError as err:
        raise MissingHFDependency(f"{HF_IMPORT_HINT} [{type(err).__name__}: {err}]") from err
    return transformers, peft


# ------------------------------------------------------------------------------------------------
# Distributed (torchrun / accelerate launch)
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


def dist_from_env(env: dict[str, str] | None = None) -> DistInfo:
    """torchrun and ``accelerate launch`` both set WORLD_SIZE, RANK and LOCAL_RANK."""
    env = os.environ if env is None else env
    world = int(env.get("WORLD_SIZE", "1") or 1)
    rank = int(env.get("RANK", "0") or 0)
    local = int(env.get("LOCAL_RANK", str(rank)) or 0)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"bad distributed environment: RANK={rank} WORLD_SIZE={world}")
    return DistInfo(rank=rank, world_size=world, local_rank=local)


def init_distributed(info: DistInfo, device: str) -> str:
    """Initialises the default process group when WORLD_SIZE > 1 (NCCL on CUDA, gloo on CPU) and
    returns the device this rank uses (``cuda:LOCAL_RANK`` on CUDA)."""
    if not info.enabled:
        return device
    import torch.distributed as dist

    if str(device).startswith("cuda"):
        device = f"cuda:{info.local_rank}"
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        backend = "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)  # env:// (MASTER_ADDR/PORT from the launcher)
    return device


def shard_rollouts(rollouts: Sequence[Rollout], rank: int, world_size: int) -> list[Rollout]:
    """This rank's share of ``rollouts``: sorted by length (ties by position), then dealt
    round-robin, so ranks get near-equal counts (differing by at most one) and near-equal token
    loads, every rollout goes to exactly one rank, and with one rank the order is the one
    ``grpo.train_step`` uses for its micro-batches."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside 0..{world_size - 1}")
    order = sorted(range(len(rollouts)), key=lambda i: (rollouts[i].length, i))
    return [rollouts[i] for i in order[rank::world_size]]


def _all_reduce(values: Sequence[float], dist_info: DistInfo, op: str = "sum", device: Any = "cpu") -> list[float]:
    if not dist_info.enabled:
        return [float(v) for v in values]
    import torch.distributed as dist

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[op])
    return t.tolist()


def _comm_device(device: torch.device) -> Any:
    """NCCL reduces CUDA tensors only; gloo CPU ones."""
    return device if device.type == "cuda" else "cpu"


# ------------------------------------------------------------------------------------------------
# Model views for grpo.sequence_logprobs (which calls ``model(input_ids) -> logits``)
# ------------------------------------------------------------------------------------------------
def _logits_of(out: Any) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


class LogitsView(torch.nn.Module):
    """``module(input_ids=..., use_cache=False).logits`` as a plain ``(B, L) -> (B, L, V)`` call.
    Sequences are right-padded and attention is causal, so no attention mask is needed: padding
    after a sequence cannot change the logits of the positions before it."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module = module

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return _logits_of(self.module(input_ids=input_ids, use_cache=False))


class AdapterDisabledView(torch.nn.Module):
    """The frozen base as the KL reference: the same peft model run inside ``disable_adapter()``."""

    def __init__(self, peft_model: torch.nn.Module):
        super().__init__()
        self.peft_model = peft_model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        with self.peft_model.disable_adapter():
            return _logits_of(self.peft_model(input_ids=input_ids, use_cache=False))


def wrap_ddp(model: torch.nn.Module, device: Any) -> torch.nn.Module:
    """DistributedDataParallel over the trainable (LoRA) parameters only. The frozen base weights and
    the buffers are excluded from DDP's start-up broadcast (every rank loaded them from the same
    files); the LoRA parameters are broadcast from rank 0, so a fresh adapter starts identical on all
    ranks whatever each rank's random init was."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ignore = [n for n, p in model.named_parameters() if not p.requires_grad] + [n for n, _ in model.named_buffers()]
    if hasattr(DDP, "_set_params_and_buffers_to_ignore_for_model"):
        DDP._set_params_and_buffers_to_ignore_for_model(model, ignore)
    dev = torch.device(device)
    kw: dict[str, Any] = {"device_ids": [dev.index if dev.index is not None else torch.cuda.current_device()]} if dev.type == "cuda" else {}
    return DDP(model, broadcast_buffers=False, **kw)


# ------------------------------------------------------------------------------------------------
# The training loop (model-agnostic: any module with LoRA-only trainable parameters and a
# ``disable_adapter()`` context manager; the tests drive it with a toy model)
# ------------------------------------------------------------------------------------------------
def _empty_batch(pad_id: int, device: Any) -> Batch:
    """A 2-token row with no loss token: a rank whose share of a mini-batch is empty still runs one
    forward/backward so that DDP's all-reduce has every rank (its gradient is exactly zero)."""
    return collate([Rollout([pad_id, pad_id], [], [], None, 0.0)], pad_id, device=device)


def _local_denominator(batches: Sequence[Batch], loss_agg: str) -> float:
    """Like grpo.agg_denominator before its max(., 1): the global count is the sum over ranks."""
    if loss_agg == "token-mean":
        return float(sum(float(b.mask.sum()) for b in batches))
    if loss_agg == "seq-mean-token-mean":
        return float(sum(float((b.mask.sum(-1) > 0).sum()) for b in batches))
    raise ValueError(f"loss_agg must be token-mean|seq-mean-token-mean, got {loss_agg!r}")


def _fill_missing_old_logprobs(policy_view: torch.nn.Module, rollouts: list[Rollout], cfg: StepConfig, device: Any, dist_info: DistInfo) -> None:
    missing = [i for i, r in enumerate(rollouts) if needs_old_logprobs(r)]
    if not missing or cfg.mode != "grpo":
        return
    mine = missing[dist_info.rank :: dist_info.world_size]
    if mine:
        fill_old_logprobs(policy_view, [rollouts[i] for i in mine], cfg, device)
    if dist_info.enabled:
        import torch.distributed as dist

        gathered: list[Any] = [None] * dist_info.world_size
        dist.all_gather_object(gathered, [(i, rollouts[i].old_logprobs) for i in mine])
        for part in gathered:
            for i, lps in part:
                rollouts[i].old_logprobs = lps


def train_lora_step(
    model: torch.nn.Module,
    rollouts: Sequence[Rollout],
    cfg: StepConfig,
    *,
    ref_free: bool = False,
    dist_info: DistInfo = DistInfo(),
    ddp_model: torch.nn.Module | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> dict[str, Any]:
    """``cfg.epochs`` passes of GRPO (or SFT) over ``rollouts`` updating the trainable parameters of
    ``model`` (the LoRA adapter); the reference for the KL term / ``kl`` metric is ``model`` inside
    ``model.disable_adapter()`` unless ``ref_free``. With ``dist_info.enabled``, ``ddp_model`` is
    ``model`` wrapped in DDP and the process group is initialised. Warm-up (``cfg.warmup_steps``),
    the old-log-prob guard (``cfg.max_old_logprob_diff``, on the first mini-batch's mean over all
    ranks, before any update) and the split-half diagnostic (one process only) are grpo's own
    functions. Returns the same metrics as ``grpo.train_step`` (reduced over ranks) plus
    ``world_size`` and ``trainable_params``."""
    t0 = time.time()
    if cfg.mode not in ("grpo", "sft"):
        raise ValueError(f"mode must be grpo|sft, got {cfg.mode!r}")
    if dist_info.enabled and ddp_model is None:
        raise ValueError("distributed run without a DDP-wrapped model")
    if ref_free and cfg.kl_beta and cfg.mode == "grpo":
        raise ValueError("--ref-free has no reference: --kl-beta must be 0")
    if dist_info.enabled and cfg.split_half > 0:
        raise ValueError("--split-half runs in one process only (not under torchrun / accelerate launch)")
    W = dist_info.world_size
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError("the model has no trainable (LoRA) parameters")
    device = trainable[0].device
    comm = _comm_device(device)
    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    rollouts = list(rollouts)
    if cfg.mode == "grpo":
        compute_advantages(rollouts, cfg.advantage)  # over the whole file, before any sharding

    train_view = LogitsView(ddp_model if ddp_model is not None else model)
    plain_view = LogitsView(model)
    ref_view = None if (ref_free or cfg.mode == "sft") else AdapterDisabledView(model)

    opt = optimizer or make_optimizer(model, cfg)
    resumed = load_optimizer_state(opt, cfg.optimizer_state, cfg) if optimizer is None else False
    params = [p for g in opt.param_groups for p in g["params"]]
    use_scaler = cfg.compute_dtype == torch.float16 and device.type == "cuda"
    scaler = torch.cuda.amp.GradScaler() if use_scaler else None

    _fill_missing_old_logprobs(plain_view, rollouts, cfg, device, dist_info)
    agreement = split_half_agreement(plain_view, rollouts, cfg, params, device) if cfg.split_half > 0 and cfg.mode == "grpo" else None
    model.train()
    lrs: list[float] = []
    computed_tokens = 0

    sums = {k: 0.0 for k in STAT_KEYS}
    step_losses: list[float] = []
    ratio_min, ratio_max = math.inf, -math.inf
    grad_norms: list[float] = []
    first_diff_sum, first_diff_n = 0.0, 0.0
    steps = 0
    for epoch in range(cfg.epochs):
        order = list(rollouts)
        if cfg.shuffle:
            rng.shuffle(order)  # same seed on every rank: the same global order everywhere
        minis = _chunks(order, cfg.mini_batch if cfg.mini_batch > 0 else len(order))
        for mi, mini in enumerate(minis):
            local = shard_rollouts(mini, dist_info.rank, W)
            batches = [collate(m, cfg.pad_id, cfg.mask_truncated, device=device) for m in _chunks(local, cfg.micro_batch)] if local else []
            denom = max(_all_reduce([_local_denominator(batches, cfg.loss_agg)], dist_info, "sum", comm)[0], 1.0)
            if dist_info.enabled and not batches:
                batches = [_empty_batch(cfg.pad_id, device)]
            opt.zero_grad(set_to_none=True)
            step_loss = 0.0
            for k, b in enumerate(batches):
                last = k == len(batches) - 1
                n = float(b.mask.sum())
                # Under DDP exactly one backward per optimizer step synchronises (the last one, run
                # even without loss tokens); the others accumulate locally under no_sync().
                if n == 0.0 and not (dist_info.enabled and last):
                    continue
                sync = ddp_model.no_sync() if (ddp_model is not None and not last) else contextlib.nullcontext()
                with sync:
                    ref_lp = None
                    if ref_view is not None and n > 0:
                        with torch.no_grad():  # adapter off: the frozen base
                            ref_lp, _ = sequence_logprobs(ref_view, b, cfg.temperature, compute_dtype=cfg.compute_dtype)
                    lp, ent = sequence_logprobs(train_view, b, cfg.temperature, with_entropy=True, compute_dtype=cfg.compute_dtype)
                    loss, stats = micro_batch_loss(cfg, lp, b, denom, ref_lp)
                    if cfg.mode != "sft" and epoch == 0 and mi == 0:
                        first_diff_sum += float(((lp.detach() - b.old_logprobs).abs() * b.mask).sum())
                        first_diff_n += n
                    scaled = loss * W if dist_info.enabled else loss  # DDP averages; we want the sum
                    (scaler.scale(scaled) if scaler is not None else scaled).backward()
                step_loss += float(loss)
                computed_tokens += sum(b.lengths) if n > 0 else 0
                ratio_min, ratio_max = accumulate_micro_stats(sums, stats, lp, ent, b, n, cfg.mode, ratio_min, ratio_max)
            if epoch == 0 and mi == 0:  # the guard sees every rank's tokens, so all ranks stop together
                first_diff_sum, first_diff_n = _all_reduce([first_diff_sum, first_diff_n], dist_info, "sum", comm)
                check_old_logprob_diff(cfg, first_diff_sum, first_diff_n)
            lrs.append(apply_warmup_lr(opt, cfg))
            grad_norms.append(optimizer_step(opt, params, scaler, cfg.max_grad_norm))
            step_losses.append(step_loss)
            steps += 1
    save_optimizer_state(opt, cfg.optimizer_state if dist_info.is_main else None)

    keys = list(sums)
    red = _all_reduce([sums[k] for k in keys] + step_losses + [computed_tokens], dist_info, "sum", comm)
    sums = dict(zip(keys, red[: len(keys)], strict=True))
    step_losses = red[len(keys) : len(keys) + len(step_losses)]
    computed_tokens = int(red[-1])
    ratio_min = _all_reduce([ratio_min], dist_info, "min", comm)[0]
    ratio_max = _all_reduce([ratio_max], dist_info, "max", comm)[0]

    metrics = step_metrics(
        cfg,
        rollouts,
        sums,
        step_losses,
        ratio_min,
        ratio_max,
        grad_norms,
        first_diff_sum,
        first_diff_n,
        steps,
        resumed,
        ref_view is not None,
        time.time() - t0,
    )
    return {
        **metrics,
        **loop_diagnostics(opt, lrs, False, computed_tokens, agreement),
        "world_size": W,
        "trainable_params": int(sum(p.numel() for p in trainable)),
        "ref": None if ref_view is None else "base (adapter disabled)",
    }


# ------------------------------------------------------------------------------------------------
# Loading / saving with transformers + peft
# ------------------------------------------------------------------------------------------------
@dataclass
class LoraSettings:
    r: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = DEFAULT_LORA_TARGETS
    dropout: float = 0.0


def parse_targets(text: str) -> tuple[str, ...]:
    out = tuple(t.strip() for t in text.split(",") if t.strip())
    if not out:
        raise ValueError("--lora-targets: no module names")
    return out


def _dtype_kwarg(transformers: Any) -> str:
    """transformers 4.56 renamed from_pretrained's ``torch_dtype`` to ``dtype``."""
    try:
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    except ValueError:
        return "torch_dtype"
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def load_policy(
    base: str,
    adapter_in: str | None,
    lora: LoraSettings,
    weight_dtype: torch.dtype,
    device: Any,
    attn: str | None = None,
    grad_checkpoint: bool = False,
    trust_remote_code: bool = False,
    seed: int = 0,
) -> torch.nn.Module:
    """Base checkpoint (frozen, in ``weight_dtype``) + LoRA adapter (trainable, float32) on ``device``."""
    transformers, peft = require_hf()
    kwargs: dict[str, Any] = {_dtype_kwarg(transformers): weight_dtype, "trust_remote_code": trust_remote_code}
    if attn and attn != "auto":
        kwargs["attn_implementation"] = attn
    try:
        import accelerate  # type: ignore  # noqa: F401

        # load straight onto this rank's device (8 ranks x a 7B model would not fit in host RAM first)
        kwargs.update(low_cpu_mem_usage=True, device_map={"": str(device)})
    except ImportError:
        pass
    model = transformers.AutoModelForCausalLM.from_pretrained(base, **kwargs)
    if "device_map" not in kwargs:
        model.to(device)
    model.config.use_cache = False
    if grad_checkpoint:
        try:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        except TypeError:  # older transformers: reentrant checkpointing needs inputs that require grad
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()
    torch.manual_seed(seed)  # same fresh-adapter init on every rank (DDP also broadcasts rank 0's)
    if adapter_in:
        model = peft.PeftModel.from_pretrained(model, adapter_in, is_trainable=True)
    else:
        cfg = peft.LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            target_modules=list(lora.targets),
            lora_dropout=lora.dropout,
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = peft.get_peft_model(model, cfg)
    for p in model.parameters():  # master weights: an lr of 2e-6 is below bf16 resolution
        if p.requires_grad and p.dtype != torch.float32:
            p.data = p.data.float()
    return model


def vocab_rows(model: torch.nn.Module) -> int:
    return int(model.get_input_embeddings().num_embeddings)


def check_token_ids(rollouts: Sequence[Rollout], n_vocab: int, path: str) -> None:
    for i, r in enumerate(rollouts):
        for t in r.prompt_tokens + r.tokens:
            if not 0 <= t < n_vocab:
                raise ValueError(
                    f"{path}: rollout {i}: token id {t} outside the model's embedding rows (0..{n_vocab - 1}); "
                    "the rollouts' GGUF must be converted from this HF checkpoint"
                )


# ------------------------------------------------------------------------------------------------
# GGUF LoRA export through llama.cpp's own convert_lora_to_gguf.py
# ------------------------------------------------------------------------------------------------
def _candidate_convert_scripts() -> list[Path]:
    env = os.environ.get("REEX_LLAMA_CPP")
    return llama_cpp_candidates("convert_lora_to_gguf.py", Path(env) / "convert_lora_to_gguf.py" if env else None)


def find_convert_lora_script(explicit: str | None = None) -> Path:
    if explicit:
        p = Path(explicit)
        if p.is_dir():
            p = p / "convert_lora_to_gguf.py"
        if not p.is_file():
            raise FileNotFoundError(f"convert_lora_to_gguf.py not found at {explicit}")
        return p
    for p in _candidate_convert_scripts():
        if p.is_file():
            return p
    raise FileNotFoundError(
        "llama.cpp's convert_lora_to_gguf.py was not found. It ships in "
        "node_modules/node-llama-cpp/llama/llama.cpp/; if that folder is missing, run "
        "`git clone node_modules/node-llama-cpp/llama/gitRelease.bundle /tmp/llama.cpp`, "
        "or pass --convert-script / set REEX_LLAMA_CPP to a llama.cpp checkout."
    )


def resolve_local_base(base: str) -> str:
    """convert_lora_to_gguf.py needs the base as a local folder (config.json + weights index): a
    folder is used as is, a hub id is looked up in the local Hugging Face cache (no download)."""
    if os.path.isdir(base):
        return base
    try:
        from huggingface_hub import snapshot_download  # type: ignore

        return snapshot_download(base, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - any failure means: not available locally
        raise ValueError(f"--gguf-out needs the base checkpoint as a local folder; {base!r} is not one and is not in the HF cache ({err})") from err


def convert_lora_command(script: Path, adapter_dir: str, base_dir: str, out: str, outtype: str = "f32", python: str | None = None) -> list[str]:
    return [python or sys.executable, str(script), "--base", str(base_dir), "--outfile", str(out), "--outtype", outtype, str(adapter_dir)]


def convert_adapter_to_gguf(adapter_dir: str, base_dir: str, out: str, outtype: str = "f32", script: str | None = None) -> list[str]:
    cmd = convert_lora_command(find_convert_lora_script(script), adapter_dir, base_dir, out, outtype)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(out):
        tail = (r.stderr or r.stdout or "")[-3000:]
        raise ValueError(f"convert_lora_to_gguf.py failed (exit {r.returncode}): {' '.join(cmd)}\n{tail}")
    return cmd


# ------------------------------------------------------------------------------------------------
# The hf-step command
# ------------------------------------------------------------------------------------------------
_WEIGHT_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def resolve_kl_beta(kl_beta: float | None, ref_free: bool) -> float:
    """Default DEFAULT_KL_BETA, or 0 with --ref-free; a non-zero --kl-beta with --ref-free is an error."""
    if kl_beta is None:
        return 0.0 if ref_free else DEFAULT_KL_BETA
    if ref_free and kl_beta != 0.0:
        raise ValueError("--ref-free has no reference model: --kl-beta must be 0 (or left out)")
    return float(kl_beta)


def step_config_from_args(args: Any, compute_dtype: torch.dtype | None) -> StepConfig:
    kl_beta = resolve_kl_beta(args.kl_beta, args.ref_free) if args.mode == "grpo" else 0.0
    return grpo_step_config_from_args(args, compute_dtype, kl_beta)


def lora_settings_from_args(args: Any) -> LoraSettings:
    if args.lora_r < 1:
        raise ValueError("--lora-r must be >= 1")
    return LoraSettings(r=args.lora_r, alpha=args.lora_alpha, targets=parse_targets(args.lora_targets), dropout=args.lora_dropout)


def pick_device_and_dtype(device: str, dtype: str) -> tuple[str, torch.dtype]:
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    wdt = _WEIGHT_DTYPES[dtype]
    if wdt == torch.float16 and not str(device).startswith("cuda"):
        print("reex_learner: --dtype f16 needs CUDA; loading the base in f32 on CPU", file=sys.stderr)
        wdt = torch.float32
    return device, wdt


def run_hf_step(args: Any) -> dict[str, Any]:
    """Everything ``hf-step`` does; returns the metrics (rank 0's view, reduced over ranks)."""
    from .grpo import read_experience

    require_hf()  # fail early, before touching the GPU, with the install hint
    t0 = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)
    dist_info = dist_from_env()
    device, weight_dtype = pick_device_and_dtype(args.device, args.dtype)
    device = init_distributed(dist_info, device)
    compute_dtype = None if weight_dtype == torch.float32 else weight_dtype
    cfg = step_config_from_args(args, compute_dtype)
    lora = lora_settings_from_args(args)
    if args.gguf_out:  # check before spending GPU time
        find_convert_lora_script(args.convert_script)
        gguf_base = resolve_local_base(args.base)
    rollouts = read_experience(args.experience)
    model = load_policy(
        args.base,
        args.adapter_in,
        lora,
        weight_dtype,
        device,
        attn=args.attn,
        grad_checkpoint=args.grad_checkpoint,
        trust_remote_code=args.trust_remote_code,
        seed=args.seed,
    )
    check_token_ids(rollouts, vocab_rows(model), args.experience)
    ddp_model = wrap_ddp(model, device) if dist_info.enabled else None
    load_s = time.time() - t0
    try:
        metrics = train_lora_step(model, rollouts, cfg, ref_free=args.ref_free, dist_info=dist_info, ddp_model=ddp_model)
        t1 = time.time()
        convert_cmd = None
        if dist_info.is_main:
            model.save_pretrained(args.adapter_out)
            if args.gguf_out:
                convert_cmd = convert_adapter_to_gguf(args.adapter_out, gguf_base, args.gguf_out, args.gguf_outtype, args.convert_script)
    finally:
        if dist_info.enabled:
            import gc

            import torch.distributed as dist

            del ddp_model  # a DDP object still alive at interpreter exit can hang the process
            gc.collect()
            if dist.is_initialized():
                dist.barrier()  # the others wait for rank 0's save/convert (nothing to gather)
                dist.destroy_process_group()
    peft_cfg = getattr(model, "peft_config", {}).get("default")
    targets = getattr(peft_cfg, "target_modules", None) or lora.targets
    targets = [targets] if isinstance(targets, str) else sorted(targets)
    metrics.update(
        {
            "base": args.base,
            "adapter_in": args.adapter_in,
            "adapter_out": args.adapter_out,
            "gguf_out": args.gguf_out,
            "convert_command": convert_cmd,
            "experience": args.experience,
            "device": str(device),
            "dtype": str(weight_dtype).replace("torch.", ""),
            "kl_beta": cfg.kl_beta,
            "lora": {
                "r": getattr(peft_cfg, "r", lora.r),
                "alpha": getattr(peft_cfg, "lora_alpha", lora.alpha),
                "targets": targets,
            },
            "load_s": load_s,
            "write_s": time.time() - t1,
        }
    )
    return metrics

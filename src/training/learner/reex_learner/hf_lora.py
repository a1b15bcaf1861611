"""The Hugging Face backend of ``train.train`` (a request with ``backend: "hf"``): a peft LoRA adapter on a
transformers checkpoint, one process or DDP under torchrun (docs/learner.md, "Path (b)")."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .gguf_io import llama_cpp_file
from .train import Backend, DistInfo, train

HF_IMPORT_HINT = (
    "path (b) needs transformers and peft: pip install transformers==4.50.3 peft==0.14.0 (the tested pins; "
    "`bash scripts/install-hf-deps.sh` makes a venv with them, torch 2.5.1 and trl 0.16.1, and prints its python). "
    "The GGUF path (`python3 -m reex_learner step`) needs neither."
)


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


class HFBackend(Backend):
    """A peft model for :func:`train.train`: the LoRA parameters train; the KL reference is the same model
    inside ``disable_adapter()`` (no second copy of the weights) when ``with_ref``; under torchrun
    ``ddp_model`` is it wrapped in DDP (the process group initialised). Any module with LoRA-only
    trainable parameters and a ``disable_adapter()`` context works (the tests drive a toy one)."""

    def __init__(self, model: torch.nn.Module, with_ref: bool, dist_info: DistInfo | None = None, ddp_model: torch.nn.Module | None = None):
        dist_info = dist_info or DistInfo()
        if dist_info.enabled and ddp_model is None:
            raise ValueError("distributed run without a DDP-wrapped model")
        self.module, self.dist, self.ddp = model, dist_info, ddp_model
        self.plain = LogitsView(model)
        self.policy = LogitsView(ddp_model if ddp_model is not None else model)
        self.ref = AdapterDisabledView(model) if with_ref else None
        self.packs = False

    def sync(self, last: bool) -> Any:
        return self.ddp.no_sync() if (self.ddp is not None and not last) else contextlib.nullcontext()

    def extra_metrics(self) -> dict[str, Any]:
        trainable = [p for p in self.module.parameters() if p.requires_grad]
        return {
            "world_size": self.dist.world_size,
            "trainable_params": int(sum(p.numel() for p in trainable)),
            "ref": None if self.ref is None else "base (adapter disabled)",
        }


# ------------------------------------------------------------------------------------------------
# Loading / saving with transformers + peft
# ------------------------------------------------------------------------------------------------
#: llama.cpp's names of the block matrices (the request's LoRA targets) -> the HF modules they are converted from.
HF_TARGETS = {
    "attn_q": "q_proj",
    "attn_k": "k_proj",
    "attn_v": "v_proj",
    "attn_output": "o_proj",
    "ffn_gate": "gate_proj",
    "ffn_up": "up_proj",
    "ffn_down": "down_proj",
}


@dataclass(frozen=True)
class LoraSettings:
    r: int
    alpha: float
    targets: tuple[str, ...]  # HF module names
    dropout: float = 0.0  # keep 0 for GRPO: dropout makes the ratio noisy


def parse_targets(text: str) -> tuple[str, ...]:
    """The request's targets (llama.cpp names, or ``all``) as HF module names; HF names pass as they are."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        names = list(HF_TARGETS)
    if not names:
        raise ValueError("lora.targets: no module names")
    return tuple(HF_TARGETS.get(n, n) for n in names)


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


# ------------------------------------------------------------------------------------------------
# GGUF LoRA export through llama.cpp's own convert_lora_to_gguf.py
# ------------------------------------------------------------------------------------------------
def find_convert_lora_script(explicit: str | None = None) -> Path:
    p = Path(explicit) if explicit else llama_cpp_file("convert_lora_to_gguf.py", "REEX_LLAMA_CPP")
    p = p / "convert_lora_to_gguf.py" if p is not None and p.is_dir() else p
    if p is None or not p.is_file():
        raise FileNotFoundError(
            f"llama.cpp's convert_lora_to_gguf.py was not found{f' at {explicit}' if explicit else ''}. It ships in "
            "node_modules/node-llama-cpp/llama/llama.cpp/; if that folder is missing, run "
            "`git clone node_modules/node-llama-cpp/llama/gitRelease.bundle /tmp/llama.cpp`, "
            "or pass hf.convertScript / set REEX_LLAMA_CPP to a llama.cpp checkout."
        )
    return p


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
def run_hf_step(req: dict[str, Any]) -> dict[str, Any]:
    """A request with ``backend: "hf"``: one step of a LoRA adapter on a Hugging Face checkpoint
    (``paths.model``); returns the metrics (rank 0's view, reduced over ranks)."""
    from .cli import torch_runtime
    from .grpo import check_token_ids, read_experience
    from .request import step_config

    require_hf()  # fail early, before touching the GPU, with the install hint
    t0 = time.time()
    paths, lo, rt, hf = req["paths"], req["lora"], req["runtime"], req["hf"]
    if lo is None or hf is None:
        raise ValueError("the hf backend trains a LoRA adapter: the request needs its lora and hf fields")
    dist_info = dist_from_env()
    _, device, weight_dtype = torch_runtime(rt)
    device = init_distributed(dist_info, device)
    cfg = step_config(req, None if weight_dtype == torch.float32 else weight_dtype)
    lora = LoraSettings(r=lo["rank"], alpha=lo["alpha"], targets=parse_targets(lo["targets"]))
    if hf["ggufOut"]:  # check before spending GPU time
        find_convert_lora_script(hf["convertScript"])
        gguf_base = resolve_local_base(paths["model"])
    rollouts = read_experience(paths["experience"])
    model = load_policy(paths["model"], lo["in"], lora, weight_dtype, device, rt["attn"], rt["gradCheckpoint"], hf["trustRemoteCode"], cfg.seed)
    check_token_ids((r.prompt_tokens + r.tokens for r in rollouts), model.get_input_embeddings().num_embeddings, paths["experience"])
    ddp_model = wrap_ddp(model, device) if dist_info.enabled else None
    load_s = time.time() - t0
    try:
        metrics = train(HFBackend(model, cfg.mode == "grpo" and cfg.kl_beta > 0, dist_info, ddp_model), rollouts, cfg)
        t1 = time.time()
        convert_cmd = None
        if dist_info.is_main:
            model.save_pretrained(lo["out"])
            if hf["ggufOut"]:
                convert_cmd = convert_adapter_to_gguf(lo["out"], gguf_base, hf["ggufOut"], hf["ggufOutType"], hf["convertScript"])
    finally:
        _close_distributed(dist_info, ddp_model)
    peft_cfg = getattr(model, "peft_config", {}).get("default")
    targets = getattr(peft_cfg, "target_modules", None) or lora.targets
    metrics.update(
        {
            "base": paths["model"],
            "adapter_in": lo["in"],
            "adapter_out": lo["out"],
            "gguf_out": hf["ggufOut"],
            "convert_command": convert_cmd,
            "experience": paths["experience"],
            "device": str(device),
            "dtype": str(weight_dtype).replace("torch.", ""),
            "kl_beta": cfg.kl_beta,
            "lora": {"r": getattr(peft_cfg, "r", lora.r), "alpha": getattr(peft_cfg, "lora_alpha", lora.alpha), "targets": sorted(targets)},
            "load_s": load_s,
            "write_s": time.time() - t1,
        }
    )
    return metrics


def _close_distributed(dist_info: DistInfo, ddp_model: Any) -> None:
    if not dist_info.enabled:
        return
    import gc

    import torch.distributed as dist

    del ddp_model  # a DDP object still alive at interpreter exit can hang the process
    gc.collect()
    if dist.is_initialized():
        dist.barrier()  # the others wait for rank 0's save/convert (nothing to gather)
        dist.destroy_process_group()

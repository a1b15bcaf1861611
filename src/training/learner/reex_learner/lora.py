"""LoRA adapters on the learner's own GGUF model (``W + (alpha / r) B @ A``, only the adapters train), written and
read as llama.cpp LoRA GGUFs (the file format: docs/learner.md, "LoRA on a frozen base")."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .gguf_io import SUPPORTED_ARCHS, _to_float32, finish_atomically, gguf_module

#: The block matrices a LoRA may target, by llama.cpp tensor name; a fresh adapter's default targets.
LORA_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
DEFAULT_TARGETS = "attn_q,attn_k,attn_v,attn_output"


def parse_targets(spec: str | Sequence[str]) -> list[str]:
    """``"attn_q,attn_v"`` (or a list) -> the targets in :data:`LORA_TARGETS` order; ``all`` = every one."""
    names = [t.strip() for t in (spec.split(",") if isinstance(spec, str) else spec) if t.strip()]
    if names == ["all"]:
        return list(LORA_TARGETS)
    bad = [t for t in names if t not in LORA_TARGETS]
    if bad or not names:
        raise ValueError(f"LoRA targets must be some of {','.join(LORA_TARGETS)} (or all), got {spec!r}")
    return [t for t in LORA_TARGETS if t in names]


def lora_scale(alpha: float, rank: int) -> float:
    """``alpha / rank`` as llama.cpp computes it (float32; ``alpha`` 0 means scale 1)."""
    if not alpha:
        return 1.0
    return float(np.float32(alpha) / np.float32(rank))


class LoraLinear(nn.Linear):
    """An ``nn.Linear`` (same ``weight``/``bias`` parameters, so the model's GGUF names do not change)
    plus ``scale * lora_b @ lora_a``; ``lora_enabled = False`` switches the adapter off."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        nn.Module.__init__(self)
        if rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {rank}")
        self.in_features, self.out_features = base.in_features, base.out_features
        self.register_parameter("weight", base.weight)
        self.register_parameter("bias", base.bias)
        self.rank, self.alpha = int(rank), float(alpha)
        self.scale = lora_scale(self.alpha, self.rank)
        dev = base.weight.device
        self.lora_a = nn.Parameter(torch.zeros(self.rank, self.in_features, dtype=torch.float32, device=dev))
        self.lora_b = nn.Parameter(torch.zeros(self.out_features, self.rank, dtype=torch.float32, device=dev))
        self.lora_enabled = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``W x + b + scale * B (A x)``, the order of llama.cpp's build_lora_mm."""
        out = F.linear(x, self.weight, self.bias)
        if not self.lora_enabled:
            return out
        delta = F.linear(F.linear(x.to(self.lora_a.dtype), self.lora_a), self.lora_b) * self.scale
        return out + delta.to(out.dtype)

    def delta_weight(self) -> torch.Tensor:
        """``scale * B @ A`` (out, in), float32."""
        return (self.lora_b.detach().float() @ self.lora_a.detach().float()) * self.scale

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, lora_rank={self.rank}, lora_alpha={self.alpha:g}"


def _tensor_name(il: int, target: str) -> str:
    return f"blk.{il}.{target}.weight"


def _split_name(name: str) -> tuple[int, str]:
    """``blk.N.TARGET.weight`` -> (N, TARGET); ValueError for anything else."""
    parts = name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or not parts[1].isdigit() or parts[3] != "weight" or parts[2] not in LORA_TARGETS:
        raise ValueError(f"LoRA tensor for {name!r}: only the block matrices {','.join(LORA_TARGETS)} can carry an adapter")
    return int(parts[1]), parts[2]


def freeze(model: nn.Module) -> None:
    """``requires_grad = False`` on every parameter that is not a LoRA matrix."""
    for name, p in model.named_parameters():
        if not name.rsplit(".", 1)[-1].startswith("lora_"):
            p.requires_grad_(False)


def _attach(model: nn.Module, il: int, target: str, rank: int, alpha: float) -> LoraLinear:
    block = model.layers[il]
    base = getattr(block, target)
    if isinstance(base, LoraLinear):
        raise ValueError(f"{_tensor_name(il, target)} already has a LoRA adapter")
    lin = LoraLinear(base, rank, alpha)
    setattr(block, target, lin)
    return lin


def attach_lora(model: nn.Module, rank: int, alpha: float, targets: str | Sequence[str] = DEFAULT_TARGETS, seed: int = 0) -> list[str]:
    """Puts a fresh adapter (A as peft's kaiming_uniform_(a=sqrt(5)), seeded; B = 0) on ``targets`` of
    every block and freezes the rest; returns the targeted GGUF tensor names."""
    names = parse_targets(targets)
    gen = torch.Generator().manual_seed(seed)
    out = []
    for il in range(len(model.layers)):
        for target in names:
            lin = _attach(model, il, target, rank, alpha)
            bound = 1.0 / math.sqrt(lin.in_features)  # kaiming_uniform_(a=sqrt(5)): gain sqrt(1/3) * sqrt(3/fan_in)
            with torch.no_grad():
                lin.lora_a.copy_((torch.rand(lin.lora_a.shape, generator=gen) * 2.0 - 1.0) * bound)
            out.append(_tensor_name(il, target))
    freeze(model)
    return out


def lora_modules(model: nn.Module) -> Iterator[tuple[str, LoraLinear]]:
    """(base GGUF tensor name, module) for every adapter of ``model``, in block then target order."""
    for il, block in enumerate(model.layers):
        for target in LORA_TARGETS:
            m = getattr(block, target, None)
            if isinstance(m, LoraLinear):
                yield _tensor_name(il, target), m


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The adapters' A and B matrices (what the optimizer trains)."""
    return [p for _, m in lora_modules(model) for p in (m.lora_a, m.lora_b)]


@contextlib.contextmanager
def lora_disabled(model: nn.Module) -> Iterator[None]:
    """Runs the block with every adapter of ``model`` switched off (the base model)."""
    mods = [m for _, m in lora_modules(model)]
    saved = [m.lora_enabled for m in mods]
    try:
        for m in mods:
            m.lora_enabled = False
        yield
    finally:
        for m, s in zip(mods, saved, strict=True):
            m.lora_enabled = s


class BaseView:
    """The LoRA model with its adapters switched off, usable where a frozen reference model is (KL to
    the base without a second copy of the weights): call, ``hidden``, ``logits``, ``hp``."""

    def __init__(self, model: nn.Module):
        self.model = model
        self.hp = model.hp

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with lora_disabled(self.model):
            return self.model(*args, **kwargs)

    def hidden(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        with lora_disabled(self.model):
            return self.model.hidden(*args, **kwargs)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.logits(x)

    def eval(self) -> BaseView:
        return self

    def parameters(self) -> Iterator[nn.Parameter]:
        return self.model.parameters()


# ------------------------------------------------------------------------------------------------
# The adapter file
# ------------------------------------------------------------------------------------------------
@dataclass
class LoraAdapter:
    """A LoRA adapter in memory: per base tensor name, A (r, in) and B (out, r) float32 arrays."""

    arch: str
    alpha: float
    pairs: dict[str, tuple[np.ndarray, np.ndarray]]

    @property
    def ranks(self) -> list[int]:
        """The distinct ranks of its pairs (llama.cpp reads each pair's rank from lora_b)."""
        return sorted({int(a.shape[0]) for a, _ in self.pairs.values()})

    @property
    def targets(self) -> list[str]:
        """The block matrices it adapts, in LORA_TARGETS order."""
        return [t for t in LORA_TARGETS if any(_split_name(n)[1] == t for n in self.pairs)]


def adapter_from_model(model: nn.Module) -> LoraAdapter:
    """The adapters of ``model`` (one alpha for the file, as llama.cpp reads one)."""
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    alphas = set()
    for name, m in lora_modules(model):
        pairs[name] = (m.lora_a.detach().to("cpu", torch.float32).numpy().copy(), m.lora_b.detach().to("cpu", torch.float32).numpy().copy())
        alphas.add(m.alpha)
    if not pairs:
        raise ValueError("the model has no LoRA adapter")
    if len(alphas) != 1:
        raise ValueError(f"adapters with different alphas {sorted(alphas)} cannot share one llama.cpp LoRA file")
    return LoraAdapter(arch=model.hp.arch, alpha=alphas.pop(), pairs=pairs)


def write_lora_gguf(path: str | os.PathLike[str], adapter: LoraAdapter | nn.Module, out_type: str = "f32", name: str | None = None) -> None:
    """Writes ``adapter`` (or a model's adapters) as a llama.cpp LoRA GGUF (see the module docstring),
    tensors in ``out_type`` f32 (default: llama.cpp then computes the adapter in f32) or f16. Atomic."""
    if not isinstance(adapter, LoraAdapter):
        adapter = adapter_from_model(adapter)
    if out_type not in ("f32", "f16"):
        raise ValueError(f"LoRA out type must be f32|f16, got {out_type!r}")
    gguf = gguf_module()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch=adapter.arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    if name:
        writer.add_name(name)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(adapter.alpha))
    dtype = np.float32 if out_type == "f32" else np.float16
    for base, (a, b) in adapter.pairs.items():
        _split_name(base)
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ValueError(f"{base}: lora_a {a.shape} and lora_b {b.shape} are not (r, in) and (out, r)")
        writer.add_tensor(f"{base}.lora_a", np.ascontiguousarray(a, dtype=dtype))
        writer.add_tensor(f"{base}.lora_b", np.ascontiguousarray(b, dtype=dtype))
    finish_atomically(writer, tmp, path)


def read_lora_gguf(path: str | os.PathLike[str]) -> LoraAdapter:
    """Reads a llama.cpp LoRA GGUF (ours or convert_lora_to_gguf.py's) into float32 arrays, checking
    what llama.cpp checks: general.type ``adapter``, adapter.type ``lora``, complete A/B pairs of
    matching rank."""
    gguf = gguf_module()
    reader = gguf.GGUFReader(str(path), "r")
    meta = {f.name: f.contents() for f in reader.fields.values() if not f.name.startswith("GGUF.")}
    if meta.get("general.type") != "adapter" or meta.get("adapter.type") != "lora":
        raise ValueError(f"{path}: not a LoRA adapter (general.type {meta.get('general.type')!r}, adapter.type {meta.get('adapter.type')!r})")
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"{path}: architecture {arch!r} is not supported (supported: {sorted(SUPPORTED_ARCHS)})")
    halves: dict[str, dict[str, np.ndarray]] = {}
    for t in reader.tensors:
        base, _, kind = t.name.rpartition(".")
        if kind not in ("lora_a", "lora_b"):
            raise ValueError(f"{path}: tensor {t.name} is neither .lora_a nor .lora_b (norm or embedding adapters are not supported)")
        _split_name(base)
        halves.setdefault(base, {})[kind] = _to_float32(gguf, t)
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for base, h in halves.items():
        if set(h) != {"lora_a", "lora_b"}:
            raise ValueError(f"{path}: LoRA tensor pair for {base} is missing one component")
        a, b = h["lora_a"], h["lora_b"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
            raise ValueError(f"{path}: {base}: lora_a {a.shape} and lora_b {b.shape} (torch order) do not make (out, r) @ (r, in)")
        pairs[base] = (a, b)
    if not pairs:
        raise ValueError(f"{path}: no LoRA tensors")
    return LoraAdapter(arch=arch, alpha=float(meta.get("adapter.lora.alpha", 0.0) or 0.0), pairs=pairs)


def _check_fits(adapter: LoraAdapter, arch: str, shapes: dict[str, tuple[int, ...]]) -> None:
    """ValueError unless every pair of ``adapter`` adapts a matrix of this architecture with B @ A's shape."""
    if adapter.arch != arch:
        raise ValueError(f"LoRA architecture {adapter.arch!r} does not match the model's {arch!r}")
    for name, (a, b) in adapter.pairs.items():
        if name not in shapes:
            raise ValueError(f"LoRA tensor {name}: the model has no such matrix")
        if (b.shape[0], a.shape[1]) != shapes[name]:
            raise ValueError(f"LoRA tensor {name}: B @ A is {(b.shape[0], a.shape[1])}, the model's matrix {shapes[name]}")


def apply_lora(model: nn.Module, adapter: LoraAdapter) -> list[str]:
    """Puts ``adapter``'s matrices on ``model`` (which must be its base's architecture and shapes) and
    freezes the rest; returns the targeted GGUF tensor names."""
    shapes = {_tensor_name(il, t): tuple(getattr(layer, t).weight.shape) for il, layer in enumerate(model.layers) for t in LORA_TARGETS}
    _check_fits(adapter, model.hp.arch, shapes)
    for base, (a, b) in adapter.pairs.items():
        il, target = _split_name(base)
        lin = _attach(model, il, target, int(a.shape[0]), adapter.alpha)
        with torch.no_grad():
            lin.lora_a.copy_(torch.from_numpy(np.ascontiguousarray(a)))
            lin.lora_b.copy_(torch.from_numpy(np.ascontiguousarray(b)))
    freeze(model)
    return list(adapter.pairs)


def merge_into(base: Any, adapter: LoraAdapter, scale: float = 1.0) -> dict[str, np.ndarray]:
    """The tensors of ``base`` (a read GGUF) that ``adapter`` changes, as ``W + scale * (alpha / r) B @ A``
    in float32: what llama.cpp computes with the adapter at ``scale`` (default 1), folded into the weights."""
    _check_fits(adapter, base.arch, {n: tuple(t.shape) for n, t in base.tensors.items()})
    merged: dict[str, np.ndarray] = {}
    for name, (a, b) in adapter.pairs.items():
        w = base.tensors[name]
        factor = np.float32(scale) * np.float32(lora_scale(adapter.alpha, int(a.shape[0])))
        merged[name] = np.asarray(w, dtype=np.float32) + factor * (b.astype(np.float32) @ a.astype(np.float32))
    return merged


# ------------------------------------------------------------------------------------------------
# A request's adapter
# ------------------------------------------------------------------------------------------------
def setup_lora(model: nn.Module, spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """Applies ``spec["in"]`` (an adapter to continue from) or a fresh adapter of ``spec``'s rank, alpha and
    targets to ``model`` (base frozen); returns what the metrics report. ``spec``: a request's ``lora``."""
    if spec["in"]:
        adapter = read_lora_gguf(spec["in"])
        apply_lora(model, adapter)
        alpha, ranks, targets = adapter.alpha, adapter.ranks, adapter.targets
    else:
        alpha, targets = float(spec["alpha"]), parse_targets(spec["targets"])
        attach_lora(model, spec["rank"], alpha, targets, seed=seed)
        ranks = [spec["rank"]]
    return {
        "rank": ranks[0] if len(ranks) == 1 else ranks,
        "alpha": alpha,
        "targets": targets,
        "trainable_parameters": sum(p.numel() for p in lora_parameters(model)),
        "in": spec["in"],
        "out": spec["out"],
    }

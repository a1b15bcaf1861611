"""A plain PyTorch decoder that computes what llama.cpp computes for the same GGUF (``llama``, ``qwen2``,
``gemma3``): the maths, RoPE, Gemma 3's sliding window and the measured agreement are in docs/learner.md."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .gguf_io import GGUFModel, HParams, read_gguf

_BLOCK_TENSORS = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation (ggml_gelu / HF gelu_pytorch_tanh)."""
    return F.gelu(x, approximate="tanh")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_angles(
    positions: torch.Tensor, n_rot: int, base: float, freq_scale: float = 1.0, freq_factors: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of shape ``positions.shape + (n_rot // 2,)``, computed as ggml_rope_cache_init does:
    ``theta = p; for each pair: use theta (/ freq_factor), theta *= theta_scale`` in float32."""
    theta_scale = torch.tensor(np.float32(base) ** np.float32(-2.0 / n_rot), dtype=torch.float32)
    theta = positions.to(torch.float32)
    cols = []
    for i in range(n_rot // 2):
        t = theta
        if freq_factors is not None:
            t = t / freq_factors[i].to(torch.float32)
        cols.append(t * freq_scale if freq_scale != 1.0 else t)
        theta = theta * theta_scale
    angles = torch.stack(cols, dim=-1)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, n_rot: int, rope_type: str) -> torch.Tensor:
    """x: (B, T, H, D); cos/sin: (B or 1, T, n_rot/2). Rotates the first n_rot channels of each head."""
    cos = cos.unsqueeze(2).to(x.dtype)  # (B, T, 1, n_rot/2)
    sin = sin.unsqueeze(2).to(x.dtype)
    xr, rest = x[..., :n_rot], x[..., n_rot:]
    if rope_type == "norm":
        x0, x1 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    elif rope_type == "neox":
        half = n_rot // 2
        x0, x1 = xr[..., :half], xr[..., half:]
        out = torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    else:
        raise ValueError(f"unknown rope type {rope_type!r}")
    return torch.cat((out, rest), dim=-1) if rest.shape[-1] else out


def packed_allowed(seg: torch.Tensor, positions: torch.Tensor | None = None, window: int = 0) -> torch.Tensor:
    """(B, 1, T, T) boolean attention mask of packed rows, True where query t may read key s: s <= t and
    s is in the shared prefix (segment 0) or in t's own segment; every position may read itself (no
    empty rows for padding, segment -1). With ``window`` > 0 (a sliding-window layer) also
    ``positions[t] - positions[s] < window``: llama.cpp's is_masked_swa counts positions, and inside a
    segment and its prefix the packed positions are the unpacked ones."""
    B, T = seg.shape
    idx = torch.arange(T, device=seg.device)
    causal = idx.unsqueeze(0) <= idx.unsqueeze(1)  # [t, s]: s <= t
    same = (seg.unsqueeze(2) == seg.unsqueeze(1)) | (seg.unsqueeze(1) == 0)  # (B, t, s)
    allowed = causal.unsqueeze(0) & same
    if window > 0:
        if positions is None:
            raise ValueError("a sliding window over packed rows needs their positions")
        allowed = allowed & ((positions.unsqueeze(2) - positions.unsqueeze(1)) < window)
    allowed = allowed | torch.eye(T, dtype=torch.bool, device=seg.device).unsqueeze(0)
    return allowed.view(B, 1, T, T)


class Block(nn.Module):
    def __init__(self, hp: HParams, biases: dict[str, bool], il: int = 0):
        super().__init__()
        e, hd = hp.n_embd, hp.head_dim
        self.hp = hp
        self.gemma = hp.arch == "gemma3"
        # a local (sliding-window) layer: RoPE with rope_base_swa, and keys at positions <= p - n_swa
        # hidden from the query at p (n_swa 0: plain causal attention)
        self.local = hp.is_swa(il)
        self.n_swa = hp.n_swa if self.local else 0
        # gate activation, a plain attribute so that a test can swap in a kernel's rounding
        self.ffn_act = gelu_tanh if self.gemma else F.silu
        self.attn_norm = RMSNorm(e, hp.rms_eps)
        self.attn_q = nn.Linear(e, hp.n_head * hd, bias=biases.get("attn_q", False))
        self.attn_k = nn.Linear(e, hp.n_head_kv * hd, bias=biases.get("attn_k", False))
        self.attn_v = nn.Linear(e, hp.n_head_kv * hd, bias=biases.get("attn_v", False))
        self.attn_output = nn.Linear(hp.n_head * hd, e, bias=biases.get("attn_output", False))
        self.ffn_norm = RMSNorm(e, hp.rms_eps)
        self.ffn_gate = nn.Linear(e, hp.n_ff, bias=biases.get("ffn_gate", False))
        self.ffn_up = nn.Linear(e, hp.n_ff, bias=biases.get("ffn_up", False))
        self.ffn_down = nn.Linear(hp.n_ff, e, bias=biases.get("ffn_down", False))
        if self.gemma:
            self.attn_q_norm = RMSNorm(hd, hp.rms_eps)
            self.attn_k_norm = RMSNorm(hd, hp.rms_eps)
            self.post_attention_norm = RMSNorm(e, hp.rms_eps)
            self.post_ffw_norm = RMSNorm(e, hp.rms_eps)

    def attention(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn_impl: str, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """Self-attention of the normed input ``x`` (B, T, n_embd). ``allowed``: None for the causal
        mask (and this layer's sliding window) over T, else a (B, 1, T, T) boolean mask (True where
        query t may read key s) that replaces them -- packed rows (:func:`packed_allowed`)."""
        hp = self.hp
        B, T, _ = x.shape
        q = self.attn_q(x).view(B, T, hp.n_head, hp.head_dim)
        k = self.attn_k(x).view(B, T, hp.n_head_kv, hp.head_dim)
        v = self.attn_v(x).view(B, T, hp.n_head_kv, hp.head_dim)
        if self.gemma:
            q = self.attn_q_norm(q)
            k = self.attn_k_norm(k)
        q = apply_rope(q, cos, sin, hp.n_rot, hp.rope_type).transpose(1, 2)  # (B, H, T, D)
        k = apply_rope(k, cos, sin, hp.n_rot, hp.rope_type).transpose(1, 2)  # (B, Hkv, T, D)
        v = v.transpose(1, 2)
        group = hp.n_head // hp.n_head_kv
        # sliding window: also hide keys n_swa or more positions back (llama.cpp's is_masked_swa)
        window = self.n_swa if 0 < self.n_swa < T else 0
        if attn_impl == "sdpa" and hasattr(F, "scaled_dot_product_attention"):
            if group > 1:
                k = k.repeat_interleave(group, dim=1)
                v = v.repeat_interleave(group, dim=1)
            # `scale=` only exists from torch 2.1; pre-scale q instead (default scale is 1/sqrt(D))
            q = q * (hp.attn_scale * (hp.head_dim**0.5))
            if allowed is not None:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
            elif window:
                idx = torch.arange(T, device=x.device)
                d = idx.unsqueeze(1) - idx.unsqueeze(0)  # query - key
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=(d >= 0) & (d < window))
            else:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            qg = q.reshape(B, hp.n_head_kv, group, T, hp.head_dim)
            kg = k.unsqueeze(2)  # (B, Hkv, 1, T, D)
            vg = v.unsqueeze(2)
            scores = torch.matmul(qg, kg.transpose(-1, -2)).float() * hp.attn_scale  # (B, Hkv, G, T, T)
            if allowed is not None:
                hidden = ~allowed.unsqueeze(2)  # (B, 1, 1, T, T)
            else:
                hidden = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                if window:
                    hidden = hidden | torch.ones(T, T, dtype=torch.bool, device=x.device).tril(-window)
            scores = scores.masked_fill(hidden, float("-inf"))
            probs = torch.softmax(scores, dim=-1).to(v.dtype)
            out = torch.matmul(probs, vg).reshape(B, hp.n_head, T, hp.head_dim)
        out = out.transpose(1, 2).reshape(B, T, hp.n_head * hp.head_dim)
        return self.attn_output(out)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn_impl: str = "eager", allowed: torch.Tensor | None = None) -> torch.Tensor:
        """One block; ``allowed`` as in :meth:`attention`."""
        if not self.gemma:
            h = x + self.attention(self.attn_norm(x), cos, sin, attn_impl, allowed)
            n = self.ffn_norm(h)
            return h + self.ffn_down(F.silu(self.ffn_gate(n)) * self.ffn_up(n))
        h = x + self.post_attention_norm(self.attention(self.attn_norm(x), cos, sin, attn_impl, allowed))
        n = self.ffn_norm(h)
        return h + self.post_ffw_norm(self.ffn_down(self.ffn_act(self.ffn_gate(n)) * self.ffn_up(n)))


class LlamaModel(nn.Module):
    """Parameter names mirror the GGUF names with ``blk.N.`` spelled ``layers.N.`` (see
    :func:`gguf_name` / :func:`module_name`)."""

    def __init__(self, hp: HParams, biases: dict[str, bool] | None = None, rope_freqs: torch.Tensor | None = None):
        super().__init__()
        self.hp = hp
        self.token_embd = nn.Embedding(hp.n_vocab, hp.n_embd)
        self.layers = nn.ModuleList(Block(hp, biases or {}, il) for il in range(hp.n_layer))
        # Gemma scales the embeddings by sqrtf(n_embd) (in float32, as ggml_scale does)
        self.embd_scale = float(np.sqrt(np.float32(hp.n_embd))) if hp.arch == "gemma3" else 1.0
        self.output_norm = RMSNorm(hp.n_embd, hp.rms_eps)
        self.output: nn.Linear | None = None if hp.tied_output else nn.Linear(hp.n_embd, hp.n_vocab, bias=False)
        if rope_freqs is not None:
            self.register_buffer("rope_freqs", rope_freqs.float(), persistent=False)
        else:
            self.rope_freqs = None
        self.attn_impl = "eager"
        self.grad_checkpoint = False

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """tokens: (T,) or (B, T) int64 -> logits (B, T, n_vocab) float32. Positions default to
        0..T-1 per row (right padding is harmless: real tokens never attend to later positions).
        The sliding window of Gemma's local layers counts tokens (T index), as the causal mask does."""
        return self.logits(self.hidden(tokens, positions))

    def hidden(
        self, tokens: torch.Tensor, positions: torch.Tensor | None = None, seg: torch.Tensor | None = None, attn_impl: str | None = None
    ) -> torch.Tensor:
        """The final-normed hidden states (B, T, n_embd) that :meth:`logits` projects onto the vocabulary.
        ``seg`` (B, T): packed rows (segment 0 a shared prefix, i >= 1 a continuation of it, -1 padding;
        see :func:`packed_allowed`), with ``positions`` restarting after the prefix. ``attn_impl``
        overrides ``self.attn_impl``."""
        if tokens.dim() == 1:
            tokens = tokens.unsqueeze(0)
        B, T = tokens.shape
        hp = self.hp
        attn_impl = attn_impl or self.attn_impl
        if positions is None:
            positions = torch.arange(T, device=tokens.device).unsqueeze(0)
        allowed = allowed_swa = None
        if seg is not None:
            allowed = packed_allowed(seg)
            windows = {layer.n_swa for layer in self.layers if layer.local and layer.n_swa > 0}
            if len(windows) > 1:
                raise ValueError("packed rows need one sliding-window size for all local layers")
            if windows:
                allowed_swa = packed_allowed(seg, positions.expand(B, T), windows.pop())
        cos, sin = rope_angles(positions, hp.n_rot, hp.rope_base, hp.rope_freq_scale, self.rope_freqs)
        rope_swa = None
        if any(layer.local for layer in self.layers):
            # llama.cpp passes no frequency factors to Gemma 3's RoPE
            rope_swa = rope_angles(positions, hp.n_rot, hp.rope_base_swa, hp.rope_freq_scale_swa, None)
        x = self.token_embd(tokens)
        if self.embd_scale != 1.0:
            x = x * self.embd_scale
        for layer in self.layers:
            c, s = rope_swa if (layer.local and rope_swa is not None) else (cos, sin)
            mask = allowed_swa if (allowed_swa is not None and layer.local and layer.n_swa > 0) else allowed
            if self.grad_checkpoint and self.training and torch.is_grad_enabled():
                from torch.utils.checkpoint import checkpoint

                x = checkpoint(layer, x, c, s, attn_impl, mask, use_reentrant=False)
            else:
                x = layer(x, c, s, attn_impl, mask)
        return self.output_norm(x)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Output projection (tied to ``token_embd`` when the file has no ``output.weight``), then the
        final logit soft-cap when the model has one; float32."""
        w = self.token_embd.weight if self.output is None else self.output.weight
        out = F.linear(x, w).float()
        cap = self.hp.final_logit_softcap
        if cap:
            out = torch.tanh(out * (1.0 / cap)) * cap  # ggml: scale(1/c), tanh, scale(c)
        return out

    # --- GGUF <-> module -----------------------------------------------------------------------
    def gguf_tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(GGUF name, tensor) for every tensor of the model file (LoRA adapters excluded: lora.py)."""
        for name, p in self.named_parameters():
            if not name.rsplit(".", 1)[-1].startswith("lora_"):
                yield gguf_name(name), p


def gguf_name(module_name: str) -> str:
    return "blk." + module_name[len("layers.") :] if module_name.startswith("layers.") else module_name


def module_name(gguf_tensor_name: str) -> str:
    return "layers." + gguf_tensor_name[len("blk.") :] if gguf_tensor_name.startswith("blk.") else gguf_tensor_name


def from_gguf(g: GGUFModel, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> LlamaModel:
    """Builds the module from a read GGUF. Tensors the module does not know (other than
    ``rope_freqs.weight``, which becomes a buffer) are an error, so nothing is silently dropped."""
    hp = g.hparams
    biases = {t: f"blk.0.{t}.bias" in g.tensors for t in _BLOCK_TENSORS}
    rope_freqs = torch.from_numpy(g.tensors["rope_freqs.weight"].copy()) if "rope_freqs.weight" in g.tensors else None
    model = LlamaModel(hp, biases, rope_freqs)
    expected = dict(model.named_parameters())
    seen = set()
    with torch.no_grad():
        for name, arr in g.tensors.items():
            if name == "rope_freqs.weight":
                continue
            mname = module_name(name)
            if mname not in expected:
                raise ValueError(f"GGUF tensor {name} has no place in the {hp.arch} module")
            p = expected[mname]
            t = torch.from_numpy(np.ascontiguousarray(arr))
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"GGUF tensor {name}: shape {tuple(t.shape)} != expected {tuple(p.shape)}")
            p.copy_(t)
            seen.add(mname)
    missing = set(expected) - seen
    if missing:
        raise ValueError(f"GGUF lacks tensors: {sorted(gguf_name(m) for m in missing)}")
    return model.to(device=device, dtype=dtype)


def load_model(path: str, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> tuple[LlamaModel, GGUFModel]:
    g = read_gguf(path)
    return from_gguf(g, dtype=dtype, device=device), g


def state_for_gguf(model: LlamaModel) -> dict[str, torch.Tensor]:
    """The model's GGUF tensors, float32 on CPU, for write_gguf, with any LoRA adapter merged in: ``W + (alpha / r) B @ A``."""
    from .lora import lora_modules

    state = {name: t.detach().to("cpu", torch.float32) for name, t in model.gguf_tensors()}
    for name, m in lora_modules(model):
        state[name] = state[name] + m.delta_weight().cpu()
    return state


def load_master(model: LlamaModel, g: GGUFModel, path: str) -> bool:
    """Replaces ``model``'s weights (read from the GGUF ``g``) with the float32 masters saved at ``path``,
    when the file exists; returns whether it did. The GGUF must be the masters' export: every F32/F16
    tensor of ``g`` must equal its master rounded to that type, else ValueError (the masters belong to
    other weights, e.g. a run resumed from another checkpoint without its masters)."""
    if not os.path.exists(path):
        return False
    from .gguf_io import _encode, gguf_module

    saved = torch.load(path, map_location="cpu")
    state = saved.get("state", saved) if isinstance(saved, dict) else saved
    params = dict(model.named_parameters())
    if set(state) != set(params):
        raise ValueError(f"{path}: master weights name other tensors than the model's")
    gguf = gguf_module()
    plain = (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16)  # types the export stores exactly rounded
    with torch.no_grad():
        for name, p in params.items():
            t = state[name]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"{path}: master {name} has shape {tuple(t.shape)}, the model {tuple(p.shape)}")
            qtype, stored = g.tensor_types[gguf_name(name)], g.tensors[gguf_name(name)].astype(np.float32)
            if qtype in plain and not np.array_equal(_encode(gguf, name, t.float().numpy(), qtype)[0].astype(np.float32), stored):
                raise ValueError(
                    f"{path}: the model's {gguf_name(name)} is not the export of these master weights; pass the GGUF written with them, or drop the masters"
                )
            p.copy_(t.to(p.device, p.dtype))
    return True


def save_master(model: LlamaModel, path: str) -> None:
    """Writes ``model``'s float32 weights to ``path`` atomically (the masters the next step continues from)."""
    from .train import save_atomic

    save_atomic({"state": {n: p.detach().to("cpu", torch.float32).clone() for n, p in model.named_parameters()}}, path)

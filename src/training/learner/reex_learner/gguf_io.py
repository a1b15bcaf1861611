"""Reads a llama-family GGUF into numpy tensors and hyperparameters through llama.cpp's gguf-py, and writes
tensors back with every other field kept verbatim (gguf-py's ``(ne1, ne0)`` arrays are ``nn.Linear``'s layout)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_GGUF_MODULE = None


def llama_cpp_file(name: str, env: str) -> Path | None:
    """The first existing ``name`` in a llama.cpp tree: under ``$env``, then, for each folder above this package,
    the tree ``npm install`` extracts (node_modules/.cache/reex-llama.cpp) and node-llama-cpp's own clone, then
    those under the working directory and /tmp/llama.cpp."""
    roots = [Path(os.environ[env])] if os.environ.get(env) else []
    for parent in [*Path(__file__).resolve().parents, Path.cwd()]:
        roots += [parent / "node_modules" / ".cache" / "reex-llama.cpp", parent / "node_modules" / "node-llama-cpp" / "llama" / "llama.cpp"]
    return next((r / name for r in [*roots, Path("/tmp/llama.cpp")] if (r / name).exists()), None)


def gguf_module():
    """Imports llama.cpp's gguf-py (from node-llama-cpp's llama.cpp clone, $REEX_GGUF_PY, or an
    installed ``gguf`` package), once."""
    global _GGUF_MODULE
    if _GGUF_MODULE is not None:
        return _GGUF_MODULE
    d = llama_cpp_file("gguf-py/gguf/__init__.py", "REEX_GGUF_PY")
    if d is not None and str(d.parents[1]) not in sys.path:
        sys.path.insert(0, str(d.parents[1]))
    try:
        import gguf  # type: ignore
    except ImportError as err:  # pragma: no cover - environment problem
        raise ImportError(
            "llama.cpp's gguf-py was not found. `npm install` extracts it from node-llama-cpp's "
            "llama.cpp bundle into node_modules/.cache/reex-llama.cpp (bash scripts/extract-llama-py.sh "
            "does it again); or set REEX_GGUF_PY to a gguf-py folder."
        ) from err
    _GGUF_MODULE = gguf
    return gguf


# Architectures whose tensors and graph the learner implements, with llama.cpp's rope type for each
# (see llama_model_rope_type in llama.cpp/src/llama-model.cpp): "norm" rotates pairs (2i, 2i+1),
# "neox" rotates pairs (i, i + n_rot/2).
SUPPORTED_ARCHS: dict[str, str] = {"llama": "norm", "qwen2": "neox", "gemma3": "neox"}


@dataclass
class HParams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_rot: int
    rope_type: str  # "norm" | "neox"
    rope_base: float
    rope_freq_scale: float
    rms_eps: float
    n_ctx_train: int
    attn_scale: float  # multiplier of QK^T; 1/sqrt(head_dim) unless the file says otherwise
    tied_output: bool
    # Gemma 3 (zero/empty for llama and qwen2): sliding-window ("local") attention over the last
    # n_swa positions in the layers flagged in swa_layers, which use RoPE base rope_base_swa and
    # scale rope_freq_scale_swa; final_logit_softcap > 0 caps logits at c*tanh(logit/c).
    n_swa: int = 0
    swa_layers: tuple[bool, ...] = ()
    rope_base_swa: float = 10000.0
    rope_freq_scale_swa: float = 1.0
    final_logit_softcap: float = 0.0

    def is_swa(self, il: int) -> bool:
        """Whether layer ``il`` attends only to the last ``n_swa`` positions (llama.cpp's is_swa)."""
        return self.n_swa > 0 and il < len(self.swa_layers) and bool(self.swa_layers[il])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class MetaField:
    name: str
    type: Any  # gguf.GGUFValueType
    sub_type: Any  # gguf.GGUFValueType | None (arrays)
    value: Any


@dataclass
class GGUFModel:
    """A GGUF file in memory: metadata (verbatim), tensors (numpy, gguf-py layout), hyperparameters."""

    path: str | None
    arch: str
    hparams: HParams
    fields: list[MetaField]
    tensors: dict[str, np.ndarray]  # insertion order = file order
    tensor_types: dict[str, Any]  # name -> gguf.GGMLQuantizationType as stored
    alignment: int = 32

    def field(self, name: str, default: Any = None) -> Any:
        for f in self.fields:
            if f.name == name:
                return f.value
        return default


def _to_float32(gguf, t) -> np.ndarray:
    Q = gguf.GGMLQuantizationType
    if t.tensor_type == Q.F32:
        return np.array(t.data, dtype=np.float32, copy=True)
    if t.tensor_type == Q.F16:
        return np.array(t.data, dtype=np.float32)
    # BF16 and block-quantised types: gguf-py knows how to dequantise most of them.
    try:
        from gguf import quants  # type: ignore
    except ImportError as err:  # pragma: no cover
        raise ValueError(f"tensor {t.name}: type {t.tensor_type.name} needs gguf.quants") from err
    try:
        return np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
    except NotImplementedError as err:
        raise ValueError(f"tensor {t.name}: cannot dequantise {t.tensor_type.name}; convert the model to f16/f32 first") from err


def read_gguf(path: str | os.PathLike[str]) -> GGUFModel:
    """Reads a GGUF file: tensors become float32 numpy arrays (f16/bf16/quantised ones are widened;
    their stored type is remembered for writing back), metadata is kept verbatim."""
    gguf = gguf_module()
    reader = gguf.GGUFReader(str(path), "r")
    fields: list[MetaField] = []
    for f in reader.fields.values():
        if f.name.startswith("GGUF."):
            continue  # virtual fields (version, counts) that the writer regenerates
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        fields.append(MetaField(f.name, vtype, sub, f.contents()))
    meta = {f.name: f.value for f in fields}
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"{path}: architecture {arch!r} is not supported (supported: {sorted(SUPPORTED_ARCHS)})")
    tensors: dict[str, np.ndarray] = {}
    types: dict[str, Any] = {}
    for t in reader.tensors:
        tensors[t.name] = _to_float32(gguf, t)
        types[t.name] = t.tensor_type
    hp = _hparams(arch, meta, tensors, str(path))
    return GGUFModel(
        path=str(path),
        arch=arch,
        hparams=hp,
        fields=fields,
        tensors=tensors,
        tensor_types=types,
        alignment=int(meta.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT)),
    )


def _hparams(arch: str, meta: Mapping[str, Any], tensors: Mapping[str, np.ndarray], path: str) -> HParams:
    def key(name: str, default: Any = None, required: bool = True) -> Any:
        full = f"{arch}.{name}"
        if full in meta:
            return meta[full]
        if required and default is None:
            raise ValueError(f"{path}: missing metadata {full}")
        return default

    if any(".attn_qkv." in n for n in tensors):
        raise ValueError(f"{path}: fused attn_qkv tensors are not supported; use separate attn_q/k/v")
    if any("_exps." in n or ".ffn_gate_inp." in n for n in tensors):
        raise ValueError(f"{path}: mixture-of-experts models are not supported")
    n_embd = int(key("embedding_length"))
    n_head = int(key("attention.head_count"))
    n_head_kv = int(key("attention.head_count_kv", n_head))
    head_dim = int(key("attention.key_length", n_embd // n_head))
    v_dim = int(key("attention.value_length", head_dim))
    if v_dim != head_dim:
        raise ValueError(f"{path}: key_length != value_length is not supported")
    n_rot = int(key("rope.dimension_count", head_dim))
    emb = tensors["token_embd.weight"]
    n_vocab = int(emb.shape[0])
    scaling = key("rope.scaling.type", "none", required=False)
    freq_scale = 1.0
    if scaling == "linear":
        freq_scale = 1.0 / float(key("rope.scaling.factor", 1.0, required=False))
    elif scaling not in ("none", None, ""):
        raise ValueError(f"{path}: rope scaling {scaling!r} is not supported (only none/linear)")
    attn_scale = float(key("attention.scale", 0.0, required=False) or 0.0)
    if attn_scale == 0.0:
        attn_scale = 1.0 / float(np.sqrt(np.float32(head_dim)))
    n_layer = int(key("block_count"))
    gemma: dict[str, Any] = {}
    if arch == "gemma3":
        gemma = _gemma3_hparams(key, n_layer, n_embd, n_head, head_dim)
        attn_scale = gemma.pop("attn_scale")
    return HParams(
        arch=arch,
        n_vocab=n_vocab,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        n_ff=int(key("feed_forward_length")),
        n_rot=n_rot,
        rope_type=SUPPORTED_ARCHS[arch],
        rope_base=float(key("rope.freq_base", 10000.0, required=False)),
        rope_freq_scale=freq_scale,
        rms_eps=float(key("attention.layer_norm_rms_epsilon")),
        n_ctx_train=int(key("context_length", 0, required=False) or 0),
        attn_scale=attn_scale,
        tied_output="output.weight" not in tensors,
        **gemma,
    )


def _gemma3_hparams(key: Any, n_layer: int, n_embd: int, n_head: int, head_dim: int) -> dict[str, Any]:
    """What llama.cpp's llama_model_gemma3::load_arch_hparams (src/models/gemma3.cpp) reads: the sliding window and its
    layers, their RoPE, the query scale and the logit soft-cap (docs/learner.md, "Gemma 3")."""
    n_swa = int(key("attention.sliding_window", 0, required=False) or 0)
    swa_layers: tuple[bool, ...] = ()
    if n_swa > 0:
        pattern = key("attention.sliding_window_pattern", 6, required=False)
        if isinstance(pattern, (list, tuple)):
            swa_layers = tuple(bool(v) for v in pattern)[:n_layer]
            swa_layers += (False,) * (n_layer - len(swa_layers))
        else:
            n = int(pattern)
            swa_layers = tuple(n == 0 or il % n < n - 1 for il in range(n_layer))
    dim = n_embd // n_head if n_layer == 62 else head_dim
    return dict(
        n_swa=n_swa,
        swa_layers=swa_layers,
        rope_base_swa=float(key("rope.freq_base_swa", 10000.0, required=False)),
        rope_freq_scale_swa=1.0,
        final_logit_softcap=float(key("final_logit_softcapping", 0.0, required=False) or 0.0),
        attn_scale=1.0 / float(np.sqrt(np.float32(dim))),
    )


def _encode(gguf, name: str, data: np.ndarray, qtype) -> tuple[np.ndarray, Any]:
    """Converts a float32 array to the stored type; returns (array, raw_dtype or None)."""
    Q = gguf.GGMLQuantizationType
    data = np.ascontiguousarray(data, dtype=np.float32)
    if qtype == Q.F32:
        return data, None
    if qtype == Q.F16:
        return data.astype(np.float16), None
    try:
        from gguf import quants  # type: ignore

        return quants.quantize(data, qtype), qtype
    except Exception as err:  # NotImplementedError (K-quants, IQ*), QuantError (shape), ImportError
        print(f"reex_learner: cannot re-quantise {name} to {qtype.name} ({err}); writing it as F16", file=sys.stderr)
        return data.astype(np.float16), None


def quantized_matrices(model: GGUFModel) -> list[str]:
    """Names of the 2-D tensors stored quantised (neither F32, F16 nor BF16): weights an update
    smaller than the quantisation step cannot move, so a trainer exports such a model as f16."""
    gguf = gguf_module()
    Q = gguf.GGMLQuantizationType
    plain = {Q.F32, Q.F16, Q.BF16}
    return [n for n, a in model.tensors.items() if a.ndim > 1 and model.tensor_types[n] not in plain]


def finish_atomically(writer: Any, tmp: Path, path: Path) -> None:
    """Writes a GGUFWriter opened on ``tmp`` (header, metadata, tensors) and renames it to ``path``;
    on any failure the temporary file is removed and ``path`` is left as it was."""
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        try:
            writer.close()
        finally:
            if tmp.exists():
                tmp.unlink()
        raise


def write_gguf(
    path: str | os.PathLike[str],
    model: GGUFModel,
    tensors: Mapping[str, Any] | None = None,
    out_type: str = "keep",
) -> None:
    """Writes ``model``'s metadata unchanged plus its tensors, replacing those given in ``tensors``
    (GGUF names -> numpy arrays or torch tensors, gguf-py layout). ``out_type``: "keep" stores each
    tensor in the type it was read as; "f32"/"f16"/"q8_0" force 2-D weights to that type (1-D tensors
    such as norms stay f32, as llama.cpp's converter and llama-quantize do). Written atomically
    (temp file + rename)."""
    gguf = gguf_module()
    Q = gguf.GGMLQuantizationType
    final: dict[str, np.ndarray] = {}
    for name, arr in model.tensors.items():
        new = tensors.get(name) if tensors is not None else None
        if new is None:
            final[name] = arr
            continue
        if hasattr(new, "detach"):
            new = new.detach().to("cpu").float().numpy()
        new = np.asarray(new, dtype=np.float32)
        if new.shape != arr.shape:
            raise ValueError(f"tensor {name}: shape {new.shape} != stored {arr.shape}")
        final[name] = new
    unknown = set(tensors or {}) - set(model.tensors)
    if unknown:
        raise ValueError(f"tensors not in the model: {sorted(unknown)}")

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch=model.arch)
    writer.data_alignment = model.alignment
    forced = {"f32": Q.F32, "f16": Q.F16, "q8_0": Q.Q8_0}
    if out_type != "keep" and out_type not in forced:
        raise ValueError(f"out_type must be keep|f32|f16|q8_0, got {out_type!r}")
    qtypes: dict[str, Any] = {}
    for name, arr in final.items():
        qtype = model.tensor_types[name]
        if out_type in forced and arr.ndim > 1:
            qtype = forced[out_type]
        qtypes[name] = qtype
    types_changed = any(qtypes[n] != model.tensor_types[n] for n in final)
    for f in model.fields:
        if f.name == "general.architecture":
            continue  # GGUFWriter writes it first, from `arch`
        value = f.value
        if f.name == "general.file_type" and types_changed:
            value = {"f32": 0, "f16": 1, "q8_0": 7}[out_type]  # LLAMA_FTYPE_ALL_F32 / MOSTLY_F16 / MOSTLY_Q8_0
        writer.add_key_value(f.name, value, f.type, sub_type=f.sub_type)
    if out_type == "q8_0" and types_changed and model.field("general.quantization_version") is None:
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr in final.items():
        data, raw = _encode(gguf, name, arr, qtypes[name])
        writer.add_tensor(name, data, raw_dtype=raw)
    finish_atomically(writer, tmp, path)

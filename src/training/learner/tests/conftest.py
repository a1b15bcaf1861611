"""Shared fixtures: tiny GGUF models (made by the project's own writer when it can run, else by
gguf-py here), llama.cpp logits through node-llama-cpp, and a 1-thread torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LEARNER = Path(__file__).resolve().parents[1]
ROOT = LEARNER.parents[2]
sys.path.insert(0, str(LEARNER))

import torch  # noqa: E402

torch.set_num_threads(1)

from reex_learner.gguf_io import gguf_module, read_gguf, write_gguf  # noqa: E402

LOGITS_SCRIPT = Path(__file__).resolve().parent / "llama_logits.mjs"
TSX = ROOT / "node_modules" / ".bin" / "tsx"
MAKE_MODEL = ROOT / "scripts" / "make-test-model.ts"


def _make_with_project_script(out: Path, f16: bool = False) -> bool:
    if os.environ.get("REEX_LEARNER_TEST_PY_MODEL"):  # exercise the gguf-py fallback writer
        return False
    if not (TSX.exists() and MAKE_MODEL.exists() and shutil.which("node")):
        return False
    cmd = [str(TSX), str(MAKE_MODEL), str(out)] + (["--f16"] if f16 else [])
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return r.returncode == 0 and out.exists()


def make_tiny_gguf_py(out: Path, seed: int = 1, f16: bool = False, arch: str = "llama") -> None:
    """Fallback writer (same shapes as src/policy/tiny-model.ts): 2 blocks, width 64, 4 heads,
    2 KV heads, byte-level gpt2 vocabulary of 256 bytes + a few merges + ChatML specials."""
    import numpy as np

    gguf = gguf_module()
    rng = np.random.default_rng(seed)
    # GPT-2 byte -> unicode map
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    b2u = {b: chr(c) for b, c in zip(bs, cs, strict=True)}
    tokens = [b2u[b] for b in range(256)]
    merges = ["S E", "L E", "SE LE", "Ġ F", "R O", "ĠF RO"]
    for m in merges:
        tokens.append(m.replace(" ", ""))
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * len(tokens) + [3] * len(specials)
    tokens += specials
    V, E, H, HKV, FF, L = len(tokens), 64, 4, 2, 128, 2
    hd = E // H
    w = gguf.GGUFWriter(str(out), arch=arch)
    w.add_string("general.name", f"reex-tiny-py-seed{seed}")
    w.add_uint32("general.file_type", 1 if f16 else 0)
    for k, v in [
        ("context_length", 2048),
        ("embedding_length", E),
        ("block_count", L),
        ("feed_forward_length", FF),
        ("attention.head_count", H),
        ("attention.head_count_kv", HKV),
        ("rope.dimension_count", hd),
        ("vocab_size", V),
    ]:
        w.add_uint32(f"{arch}.{k}", v)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(f"{arch}.rope.freq_base", 10000.0)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_string("tokenizer.ggml.pre", "default")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.token_type", types)
    w.add_array("tokenizer.ggml.merges", merges)
    w.add_uint32("tokenizer.ggml.bos_token_id", V - 3)
    w.add_uint32("tokenizer.ggml.eos_token_id", V - 1)
    w.add_bool("tokenizer.ggml.add_bos_token", False)

    def t(name, shape, std, mean=0.0, bias_ok=False):
        a = (mean + std * rng.standard_normal(shape)).astype(np.float32)
        if f16 and len(shape) > 1:
            a = a.astype(np.float16)
        w.add_tensor(name, a)

    t("token_embd.weight", (V, E), 1.0)
    t("output_norm.weight", (E,), 0.0, 1.0)
    t("output.weight", (V, E), 0.3)
    for i in range(L):
        t(f"blk.{i}.attn_norm.weight", (E,), 0.0, 1.0)
        t(f"blk.{i}.attn_q.weight", (E, E), E**-0.5)
        t(f"blk.{i}.attn_k.weight", (HKV * hd, E), E**-0.5)
        t(f"blk.{i}.attn_v.weight", (HKV * hd, E), E**-0.5)
        t(f"blk.{i}.attn_output.weight", (E, E), E**-0.5)
        t(f"blk.{i}.ffn_norm.weight", (E,), 0.0, 1.0)
        t(f"blk.{i}.ffn_gate.weight", (FF, E), E**-0.5)
        t(f"blk.{i}.ffn_up.weight", (FF, E), E**-0.5)
        t(f"blk.{i}.ffn_down.weight", (E, FF), FF**-0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def to_qwen2(src: Path, out: Path, seed: int = 3) -> None:
    """Re-labels a tiny llama GGUF as qwen2 (rope NEOX) and adds random Q/K/V biases, as Qwen2 has."""
    import numpy as np

    g = read_gguf(src)
    g.arch = "qwen2"
    for f in g.fields:
        if f.name == "general.architecture":
            f.value = "qwen2"
        elif f.name.startswith("llama."):
            f.name = "qwen2." + f.name[len("llama.") :]
    gguf = gguf_module()
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, arr in g.tensors.items():
        tensors[name] = arr
        for proj in ("attn_q", "attn_k", "attn_v"):
            if name.endswith(f".{proj}.weight"):
                tensors[name.replace(".weight", ".bias")] = (0.5 * rng.standard_normal(arr.shape[0])).astype(np.float32)
    g.tensor_types.update({n: gguf.GGMLQuantizationType.F32 for n in tensors if n not in g.tensor_types})
    g.tensors = tensors
    write_gguf(out, g)


def to_gemma3(src: Path, out: Path, seed: int = 5, n_swa: int = 8) -> None:
    """Re-labels a tiny llama GGUF as gemma3: Q/K norms over head_dim, post-attention and post-FFN norms
    (random weights around 1), tied output (output.weight dropped), sliding window ``n_swa`` on layer 0
    (pattern 2: even layers local, odd ones global), global RoPE base 1e6 and local 1e4 -- every piece
    of llama.cpp's gemma3 graph the learner implements, at the tiny model's size."""
    import numpy as np
    from reex_learner.gguf_io import MetaField

    g = read_gguf(src)
    gguf = gguf_module()
    V = gguf.GGUFValueType
    g.arch = "gemma3"
    fields = []
    for f in g.fields:
        if f.name == "general.architecture":
            f.value = "gemma3"
        elif f.name.startswith("llama."):
            f.name = "gemma3." + f.name[len("llama.") :]
        if f.name == "gemma3.rope.freq_base":
            f.value = 1e6
        fields.append(f)
    hd = g.hparams.head_dim
    extra = [
        ("attention.key_length", V.UINT32, hd),
        ("attention.value_length", V.UINT32, hd),
        ("attention.sliding_window", V.UINT32, n_swa),
        ("attention.sliding_window_pattern", V.UINT32, 2),
        ("rope.freq_base_swa", V.FLOAT32, 10000.0),
    ]
    at = next(i for i, f in enumerate(fields) if f.name.startswith("tokenizer."))
    fields[at:at] = [MetaField(f"gemma3.{k}", t, None, v) for k, t, v in extra]
    g.fields = fields
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, arr in g.tensors.items():
        if name == "output.weight":
            continue
        tensors[name] = arr
        if name.endswith(".attn_norm.weight"):
            blk = name[: -len("attn_norm.weight")]
            for t, n in (("attn_q_norm", hd), ("attn_k_norm", hd), ("post_attention_norm", arr.shape[0]), ("post_ffw_norm", arr.shape[0])):
                tensors[f"{blk}{t}.weight"] = (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)
    g.tensor_types = {n: g.tensor_types.get(n, gguf.GGMLQuantizationType.F32) for n in tensors}
    g.tensors = tensors
    write_gguf(out, g)


def ggml_gelu_f16_table(x: torch.Tensor) -> torch.Tensor:
    """ggml's CPU gelu (GGML_GELU_FP16): f16(gelu_tanh(f16(x))) from a table for -10 < x < 10,
    0 below, x above (ggml_vec_geglu_f32 then multiplies by the up projection in f32)."""
    xh = x.float().half().float()
    a, s = 0.044715, 0.79788456080286535587989211986876
    g = ((0.5 * xh) * (1.0 + torch.tanh((s * xh) * (1.0 + (a * xh) * xh)))).half().float()
    x32 = x.float()
    return torch.where(x32 <= -10.0, torch.zeros_like(x32), torch.where(x32 >= 10.0, x32, g)).to(x.dtype)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def tiny_f32(model_dir) -> Path:
    out = model_dir / "tiny.gguf"
    if not _make_with_project_script(out):
        make_tiny_gguf_py(out)
    return out


@pytest.fixture(scope="session")
def tiny_f16(model_dir) -> Path:
    out = model_dir / "tiny16.gguf"
    if not _make_with_project_script(out, f16=True):
        make_tiny_gguf_py(out, f16=True)
    return out


@pytest.fixture(scope="session")
def tiny_qwen2(model_dir, tiny_f32) -> Path:
    out = model_dir / "tiny-qwen2.gguf"
    to_qwen2(tiny_f32, out)
    return out


@pytest.fixture(scope="session")
def tiny_gemma3(model_dir, tiny_f32) -> Path:
    out = model_dir / "tiny-gemma3.gguf"
    to_gemma3(tiny_f32, out)
    return out


def llama_cpp_available() -> str | None:
    """None when node-llama-cpp can run here, else the reason it cannot."""
    if not shutil.which("node"):
        return "node is not installed"
    if not (ROOT / "node_modules" / "node-llama-cpp").exists():
        return "node_modules/node-llama-cpp is missing (npm ci)"
    return None


def llama_cpp_logits(model: Path, tokens: list[int], *flags: str) -> torch.Tensor:
    """(T, n_vocab) logits from llama.cpp (CPU) for every position of `tokens`."""
    why = llama_cpp_available()
    if why:
        pytest.skip(why)
    r = subprocess.run(
        ["node", str(LOGITS_SCRIPT), str(model), json.dumps(tokens), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        raise RuntimeError(f"llama_logits.mjs failed ({r.returncode}): {r.stderr[-2000:]}")
    rows = json.loads(r.stdout)["rows"]
    assert [row["position"] for row in rows] == list(range(len(tokens)))
    return torch.tensor([row["logits"] for row in rows], dtype=torch.float32)


def llama_cpp_logit_rows(
    model: Path,
    tokens_or_text,
    *flags: str,
    positions: list[int] | None = None,
    timeout: float = 300,
):
    """(tokens, positions, (len(positions), n_vocab) logits) from llama.cpp (CPU), through a binary
    file rather than JSON (a Gemma row has 262144 logits). ``tokens_or_text``: token ids, or a str
    that llama.cpp tokenises (BOS prepended when the model adds one). ``positions``: the rows to
    return (default all)."""
    import tempfile

    import numpy as np

    why = llama_cpp_available()
    if why:
        pytest.skip(why)
    text = isinstance(tokens_or_text, str)
    arg = tokens_or_text if text else json.dumps(list(tokens_or_text))
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "logits.f32"
        cmd = ["node", str(LOGITS_SCRIPT), str(model), arg, *flags, "--out", str(out)]
        if text:
            cmd.append("--text")
        if positions is not None:
            cmd += ["--positions", ",".join(str(p) for p in positions)]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"llama_logits.mjs failed ({r.returncode}): {r.stderr[-2000:]}")
        meta = json.loads(r.stdout)
        tokens = meta.get("tokens", None if text else list(tokens_or_text))
        got = [row["position"] for row in meta["rows"]]
        assert got == (list(range(len(tokens))) if positions is None else sorted(set(positions)))
        n_vocab = int(meta["n_vocab"])
        logits = np.fromfile(out, dtype="<f4").reshape(len(got), n_vocab)
    return tokens, got, torch.from_numpy(logits.copy())


def llama_cpp_tokenize(model: Path, text: str, timeout: float = 120) -> list[int]:
    """The model's tokens for ``text`` as llama.cpp tokenises it (special tokens parsed, BOS
    prepended when the model adds one)."""
    why = llama_cpp_available()
    if why:
        pytest.skip(why)
    cmd = ["node", str(LOGITS_SCRIPT), str(model), text, "--text", "--tokenize-only"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"llama_logits.mjs failed ({r.returncode}): {r.stderr[-2000:]}")
    return list(json.loads(r.stdout)["tokens"])


# a token sequence that mixes bytes, merges and the ChatML specials
def sample_tokens(n_vocab: int, n: int = 48, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    toks = torch.randint(0, n_vocab, (n,), generator=g).tolist()
    toks[0] = n_vocab - 2  # <|im_start|>
    return toks


#: The Gemma 3 270M GGUF that `npx reex models pull gemma-3-270m` puts in models/.
# The Q4_K_M file against the learner's exact maths: llama.cpp rounds every matmul input to 8 bits
# (Q8_K), with kernels that differ by instruction set. Measured max |d log p| ~2 on every CPU so far;
# max |d logit| ~2-3 with AVX2 and 4.27 with AVX-512 VNNI (part of it a shift of a whole row, which
# log-softmax removes). Loose on purpose: the F32 copy is the tight comparison; a wrong architecture
# (no sliding window, the wrong RoPE base) is off by more than 8.
GEMMA_Q4_TOL_LOGIT = 6.0
GEMMA_Q4_TOL_LOGP = 4.0
GEMMA = ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"

#: Skips a test module that needs the pulled Gemma GGUF.
requires_gemma = pytest.mark.skipif(
    not GEMMA.exists(),
    reason=f"{GEMMA.relative_to(ROOT)} is not there: `npx reex models pull gemma-3-270m` fetches it (about 250 MB)",
)


# ------------------------------------------------------------------------------------------------
# Step settings and request files (the learner has no defaults: the tests state theirs here)
# ------------------------------------------------------------------------------------------------
#: The tests' settings of a step (snake_case, StepConfig's fields); each test overrides what it is about.
TEST_TRAIN = dict(
    lr=2e-6,
    clip=0.2,
    clip_high=None,
    kl_beta=0.0,
    temperature=1.0,
    loss_agg="token-mean",
    epochs=1,
    micro_batch=4,
    mini_batch=0,
    max_grad_norm=1.0,
    weight_decay=0.0,
    warmup_steps=0,
    max_old_logprob_diff=0.0,
    split_half=0,
    mask_truncated=False,
    share_prefix=False,
    pack_tokens=2048,
    shuffle=False,
    seed=0,
    adam_beta2=0.999,
    decay_norms=True,
    schedule="constant",
    min_lr_ratio=1.0,
    progress=0.0,
)


#: The tests' settings of a multi-step SFT run (a request's ``run``, camelCase); each test overrides what it is about.
RUN = dict(
    steps=3,
    minutes=0.0,
    reserveS=0.0,
    batchTokens=4096,
    evalFrac=0.0,
    evalEvery=0,
    logEvery=1,
    saveEvery=0,
    checkpointDir=None,
    log=None,
    familyWeights={},
    dbWeights={},
    reinit=0.0,
)


def make_cfg(mode: str = "grpo", optimizer_state: str | None = None, compute_dtype=None, **kw):
    """A StepConfig of the tests' settings with ``kw`` overriding them."""
    from reex_learner.train import StepConfig

    return StepConfig(mode=mode, optimizer_state=optimizer_state, compute_dtype=compute_dtype, **{**TEST_TRAIN, **kw})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.capitalize() for w in rest)


def make_request(
    model,
    experience,
    *,
    metrics,
    optimizer_state,
    mode="grpo",
    out=None,
    ref=None,
    master=None,
    lora=None,
    backend="gguf",
    hf=None,
    runtime=None,
    run=None,
    **train,
):
    """A complete request (every field, as TypeScript writes one) with the tests' settings; ``train``: snake_case overrides."""
    return {
        "version": 1,
        "backend": backend,
        "mode": mode,
        "paths": {
            "model": str(model),
            "experience": str(experience),
            "out": None if out is None else str(out),
            "ref": None if ref is None else str(ref),
            "master": None if master is None else str(master),
            "metrics": str(metrics),
            "optimizerState": None if optimizer_state is None else str(optimizer_state),
        },
        "lora": None if lora is None else {"in": None, "rank": 4, "alpha": 8.0, "targets": "attn_q,attn_k,attn_v,attn_output", "outType": "f32", **lora},
        "runtime": {"device": "cpu", "dtype": "f32", "threads": 1, "gradCheckpoint": False, "attn": "eager", "outType": "keep", **(runtime or {})},
        "train": {_camel(k): v for k, v in {**TEST_TRAIN, **train}.items()},
        "hf": hf,
        "run": None if run is None else {**RUN, **run},
    }


def write_request(path: Path, req: dict) -> Path:
    path.write_text(json.dumps(req, indent=1))
    return path


def run_step(request_path: Path, python: str = sys.executable, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m reex_learner step --request FILE`` with the learner on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(LEARNER)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    return subprocess.run(
        [python, "-m", "reex_learner", "step", "--request", str(request_path)], cwd=LEARNER, env=env, capture_output=True, text=True, timeout=timeout
    )

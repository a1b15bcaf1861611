"""A LoRA adapter on the real Gemma 3 270M (Q4_K_M) GGUF: llama.cpp with the base plus the learner's
adapter GGUF computes the learner's logits -- what the server does when it hot-loads the adapter beside
the unchanged base.

Skipped unless models/gemma-3-270m-q4_k_m.gguf is there (`npx reex models pull gemma-3-270m`), like
test_gemma_parity.py, whose two references and bounds this reuses: an F32 copy of the file (the
weights the module uses; ggml's f16 gelu table emulated; TOL_F32) and the Q4_K_M file itself
(llama.cpp's 8-bit rounding of quantised matmul inputs; conftest's GEMMA_Q4_TOL_* and argmax agreement >= 0.9). A random
rank-8 adapter on all seven block matrices of the 18 layers, 79-token chat prompt, all rows.
"""

from __future__ import annotations

import time

import pytest
import torch
from conftest import (
    GEMMA,
    GEMMA_Q4_TOL_LOGIT,
    GEMMA_Q4_TOL_LOGP,
    ggml_gelu_f16_table,
    llama_cpp_available,
    llama_cpp_logit_rows,
    llama_cpp_tokenize,
    requires_gemma,
)

pytestmark = requires_gemma

# test_gemma_parity.py's bounds (measured there: ~2e-2 against the F32 copy, ~2 against the Q4_K_M file)
TOL_F32 = 0.1
# B ~ N(0, B_STD): moves this model's logits by several units (the comparison is not vacuous); 0.02
# moves them by ~29, a model so far from the base that the Q4_K_M kernels' rounding grows to ~7
B_STD = 0.005

PROMPT = (
    "<start_of_turn>user\n"
    "You translate questions into SQLite. Schema: customers(id INTEGER PRIMARY KEY, name TEXT, city TEXT); "
    "orders(id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), placed_at TEXT, total REAL).\n"
    "Question: which customers in Berlin placed more than three orders in 2023? Answer with one SQL query."
    "<end_of_turn>\n<start_of_turn>model\n"
)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(model with the adapter, its GGUF, tokens, adapter path, F32 copy path)."""
    why = llama_cpp_available()
    if why:
        pytest.skip(why)
    from reex_learner.gguf_io import write_gguf
    from reex_learner.lora import attach_lora, lora_modules, write_lora_gguf
    from reex_learner.model import load_model

    t = time.time()
    model, g = load_model(str(GEMMA))
    model.eval()
    attach_lora(model, rank=8, alpha=16.0, targets="all", seed=0)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, m in lora_modules(model):
            m.lora_b.copy_(torch.randn(m.lora_b.shape, generator=gen) * B_STD)
    d = tmp_path_factory.mktemp("gemma-lora")
    adapter, f32 = d / "adapter.gguf", d / "gemma-3-270m-f32.gguf"
    write_lora_gguf(adapter, model)
    write_gguf(f32, g, out_type="f32")
    tokens = llama_cpp_tokenize(GEMMA, PROMPT)
    print(f"\ngemma LoRA: loaded, adapter ({adapter.stat().st_size / 1e6:.1f} MB) and F32 copy written in {time.time() - t:.1f}s")
    yield model, g, tokens, adapter, f32
    f32.unlink()


def _ours(model, tokens, gelu_table: bool) -> torch.Tensor:
    acts = [layer.ffn_act for layer in model.layers]
    if gelu_table:
        for layer in model.layers:
            layer.ffn_act = ggml_gelu_f16_table
    try:
        with torch.no_grad():
            return model(torch.tensor(tokens))[0]
    finally:
        for layer, act in zip(model.layers, acts, strict=True):
            layer.ffn_act = act


def _llama(path, tokens, *flags) -> torch.Tensor:
    t = time.time()
    _, _, ref = llama_cpp_logit_rows(path, tokens, "--exact", *flags)
    print(f"\ngemma LoRA: llama.cpp {path.name} {' '.join(flags)} in {time.time() - t:.1f}s")
    return ref


def test_gemma_adapter_matches_llama_cpp(setup):
    from reex_learner.lora import lora_disabled

    model, _, tokens, adapter, f32 = setup
    ours = _ours(model, tokens, gelu_table=True)
    ref = _llama(f32, tokens, "--lora", str(adapter))
    with lora_disabled(model):
        base = _ours(model, tokens, gelu_table=True)
    dl = (ours - ref).abs().max().item()
    dp = (torch.log_softmax(ours, -1) - torch.log_softmax(ref, -1)).abs().max().item()
    effect = (ours - base).abs().max().item()
    print(
        f"\ngemma F32 copy + LoRA (r 8, all targets, {len(tokens)} tokens): max |d logit| {dl:.3e}, max |d log p| {dp:.3e}; "
        f"the adapter moves logits by up to {effect:.2f}, base vs llama.cpp+adapter {(base - ref).abs().max().item():.2f}"
    )
    assert dl < TOL_F32 and dp < TOL_F32
    assert effect > 1.0 and (base - ref).abs().max().item() > 1.0

    # the server's configuration: the Q4_K_M base itself plus the adapter
    exact = _ours(model, tokens, gelu_table=False)
    ref_q = _llama(GEMMA, tokens, "--lora", str(adapter))
    ql = (exact - ref_q).abs().max().item()
    qp = (torch.log_softmax(exact, -1) - torch.log_softmax(ref_q, -1)).abs().max().item()
    agree = (exact.argmax(-1) == ref_q.argmax(-1)).float().mean().item()
    print(f"gemma Q4_K_M + LoRA: max |d logit| {ql:.3f}, max |d log p| {qp:.3f}, argmax agreement {agree:.3f}")
    assert ql < GEMMA_Q4_TOL_LOGIT and qp < GEMMA_Q4_TOL_LOGP and agree >= 0.9

"""(a) The PyTorch module computes llama.cpp's logits for the same GGUF and tokens."""

from __future__ import annotations

import torch
from conftest import llama_cpp_logits, sample_tokens
from reex_learner.model import load_model


def test_f32_matches_llama_cpp_exact_numerics(tiny_f32):
    """Flash attention off and an F32 KV cache: llama.cpp does the same f32 maths as we do."""
    model, g = load_model(str(tiny_f32))
    tokens = sample_tokens(g.hparams.n_vocab, 48)
    with torch.no_grad():
        ours = model(torch.tensor(tokens))[0]
    ref = llama_cpp_logits(tiny_f32, tokens, "--exact")
    diff = (ours - ref).abs().max().item()
    print(f"f32 exact: max |logit diff| over {len(tokens)} positions = {diff:.2e}")
    assert diff < 1e-3
    # and so do log-softmaxes
    assert (torch.log_softmax(ours, -1) - torch.log_softmax(ref, -1)).abs().max().item() < 1e-3


def test_f32_matches_llama_cpp_serving_defaults(tiny_f32):
    """llama.cpp's defaults (F16 KV cache, flash attention "auto") round K/V/attention to f16:
    a few 1e-3 on logits of magnitude ~10. Loose bound; the exact test above checks the maths."""
    model, g = load_model(str(tiny_f32))
    tokens = sample_tokens(g.hparams.n_vocab, 48, seed=1)
    with torch.no_grad():
        ours = model(torch.tensor(tokens))[0]
    ref = llama_cpp_logits(tiny_f32, tokens)
    diff = (torch.log_softmax(ours, -1) - torch.log_softmax(ref, -1)).abs().max().item()
    print(f"f32 serving defaults: max |logprob diff| = {diff:.2e}")
    assert diff < 3e-2


def test_f16_weights_match_llama_cpp(tiny_f16):
    """F16 weights: ggml rounds the activations to f16 for f16 matmuls; bound 1e-2."""
    model, g = load_model(str(tiny_f16))
    tokens = sample_tokens(g.hparams.n_vocab, 32, seed=2)
    with torch.no_grad():
        ours = model(torch.tensor(tokens))[0]
    ref = llama_cpp_logits(tiny_f16, tokens, "--exact")
    diff = (ours - ref).abs().max().item()
    print(f"f16 weights: max |logit diff| = {diff:.2e}")
    assert diff < 1e-2


def test_qwen2_neox_rope_and_biases_match_llama_cpp(tiny_qwen2):
    model, g = load_model(str(tiny_qwen2))
    assert g.hparams.rope_type == "neox" and model.layers[0].attn_q.bias is not None
    tokens = sample_tokens(g.hparams.n_vocab, 40, seed=3)
    with torch.no_grad():
        ours = model(torch.tensor(tokens))[0]
    ref = llama_cpp_logits(tiny_qwen2, tokens, "--exact")
    diff = (ours - ref).abs().max().item()
    print(f"qwen2: max |logit diff| = {diff:.2e}")
    assert diff < 1e-3


def test_wrong_rope_would_be_caught(tiny_f32):
    """Negative control: the comparison is sensitive to the RoPE pairing (NEOX instead of NORM)."""
    model, g = load_model(str(tiny_f32))
    tokens = sample_tokens(g.hparams.n_vocab, 24, seed=4)
    ref = llama_cpp_logits(tiny_f32, tokens, "--exact")
    model.hp.rope_type = "neox"
    with torch.no_grad():
        wrong = model(torch.tensor(tokens))[0]
    # position 0 has no rotation (angle 0) so it still matches; later positions must not
    assert (wrong[0] - ref[0]).abs().max().item() < 1e-3
    assert (wrong[1:] - ref[1:]).abs().max().item() > 1e-2

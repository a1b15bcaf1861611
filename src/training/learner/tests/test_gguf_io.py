"""(d) GGUF export -> reload gives the same logits; metadata is carried over unchanged."""

from __future__ import annotations

import numpy as np
import torch
from conftest import llama_cpp_logits, sample_tokens
from reex_learner.gguf_io import read_gguf, write_gguf
from reex_learner.model import from_gguf, load_model, state_for_gguf


def _meta(g):
    return [(f.name, f.type, f.sub_type, f.value) for f in g.fields]


def test_export_reload_same_logits_and_metadata_f32(tiny_f32, tmp_path):
    model, g = load_model(str(tiny_f32))
    out = tmp_path / "roundtrip.gguf"
    write_gguf(out, g, state_for_gguf(model))
    g2 = read_gguf(out)
    assert _meta(g2) == _meta(g)
    assert list(g2.tensors) == list(g.tensors)
    for name in g.tensors:
        assert g2.tensor_types[name] == g.tensor_types[name]
        assert np.array_equal(g2.tensors[name], g.tensors[name]), name
    model2 = from_gguf(g2)
    tokens = torch.tensor(sample_tokens(g.hparams.n_vocab, 32))
    with torch.no_grad():
        assert torch.equal(model(tokens), model2(tokens))
    # an untouched export is byte-identical to the project's own writer's file
    assert out.read_bytes() == tiny_f32.read_bytes()


def test_updated_weights_survive_export_f32(tiny_f32, tmp_path):
    model, g = load_model(str(tiny_f32))
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    out = tmp_path / "updated.gguf"
    write_gguf(out, g, state_for_gguf(model))
    model2, _ = load_model(str(out))
    tokens = torch.tensor(sample_tokens(g.hparams.n_vocab, 32, seed=5))
    with torch.no_grad():
        a, b = model(tokens), model2(tokens)
    assert torch.equal(a, b)
    # and llama.cpp reads the exported file as the same model
    ref = llama_cpp_logits(out, tokens.tolist(), "--exact")
    assert (a[0] - ref).abs().max().item() < 1e-3


def test_f16_keeps_type_and_rounds_once(tiny_f16, tmp_path):
    model, g = load_model(str(tiny_f16))
    out = tmp_path / "rt16.gguf"
    write_gguf(out, g, state_for_gguf(model))
    g2 = read_gguf(out)
    assert g2.tensor_types == g.tensor_types
    assert out.read_bytes() == tiny_f16.read_bytes()  # f16 -> f32 -> f16 is lossless
    out32 = tmp_path / "as32.gguf"
    write_gguf(out32, g, state_for_gguf(model), out_type="f32")
    g3 = read_gguf(out32)
    assert all(t.name == "F32" for t in g3.tensor_types.values())
    assert dict((f.name, f.value) for f in g3.fields)["general.file_type"] == 0
    m3 = from_gguf(g3)
    tokens = torch.tensor(sample_tokens(g.hparams.n_vocab, 16))
    with torch.no_grad():
        assert torch.equal(model(tokens), m3(tokens))


def test_shape_mismatch_is_an_error(tiny_f32, tmp_path):
    g = read_gguf(tiny_f32)
    try:
        write_gguf(tmp_path / "bad.gguf", g, {"output_norm.weight": np.zeros(3, dtype=np.float32)})
    except ValueError as err:
        assert "shape" in str(err)
    else:
        raise AssertionError("expected a ValueError")
    assert not (tmp_path / "bad.gguf").exists()


def test_q8_0_is_dequantised_and_requantised(tiny_f32, tmp_path):
    from reex_learner.gguf_io import gguf_module

    Q = gguf_module().GGMLQuantizationType
    g = read_gguf(tiny_f32)
    for name, arr in g.tensors.items():
        if arr.ndim > 1:
            g.tensor_types[name] = Q.Q8_0
    q8 = tmp_path / "q8.gguf"
    write_gguf(q8, g)
    g8 = read_gguf(q8)
    assert {g8.tensor_types[n] for n in g8.tensors if g8.tensors[n].ndim > 1} == {Q.Q8_0}
    model = from_gguf(g8)
    again = tmp_path / "q8-again.gguf"
    write_gguf(again, g8, state_for_gguf(model))
    assert again.read_bytes() == q8.read_bytes()  # Q8_0 -> f32 -> Q8_0 is a fixed point


def test_export_writes_q8_0_matrices_within_about_half_a_quantisation_step(tiny_f32, tmp_path):
    from reex_learner.cli import main
    from reex_learner.gguf_io import gguf_module, quantized_matrices

    Q = gguf_module().GGMLQuantizationType
    out = tmp_path / "q8.gguf"
    assert main(["export", "--model", str(tiny_f32), "--out", str(out), "--out-type", "q8_0"]) == 0
    g, g8 = read_gguf(tiny_f32), read_gguf(out)
    matrices = [n for n, a in g.tensors.items() if a.ndim > 1]
    assert sorted(quantized_matrices(g8)) == sorted(matrices) and not quantized_matrices(g)
    assert all(g8.tensor_types[n] == Q.F32 for n, a in g8.tensors.items() if a.ndim == 1)
    fields = dict((f.name, f.value) for f in g8.fields)
    assert fields["general.file_type"] == 7 and fields["general.quantization_version"] == 2
    assert fields["general.name"] == dict((f.name, f.value) for f in g.fields)["general.name"]
    for n in matrices:
        w, dq = g.tensors[n].astype(np.float32), g8.tensors[n].astype(np.float32)
        step = np.abs(w.reshape(-1, 32)).max(axis=1, keepdims=True) / 127  # one scale per 32 weights
        err = np.abs((w - dq).reshape(-1, 32))
        assert (err <= step * (0.5 + 127 * 2**-11) + 1e-7).all(), n  # half a step, plus the scale's f16 rounding
    assert 0 < out.stat().st_size < tiny_f32.stat().st_size / 3


def test_interpolate_moves_each_weight_alpha_of_the_way_from_base_to_tuned(tiny_f32, tmp_path):
    from reex_learner.cli import main

    g = read_gguf(tiny_f32)
    rng = np.random.default_rng(3)
    tuned = tmp_path / "tuned.gguf"
    write_gguf(tuned, g, {n: a + rng.normal(0, 0.01, a.shape).astype(np.float32) for n, a in g.tensors.items()})
    gt = read_gguf(tuned)
    half = tmp_path / "half.gguf"
    assert main(["interpolate", "--base", str(tiny_f32), "--tuned", str(tuned), "--alpha", "0.5", "--out", str(half)]) == 0
    gh = read_gguf(half)
    assert _meta(gh) == _meta(g)
    for n, a in g.tensors.items():
        assert np.allclose(gh.tensors[n], (a + gt.tensors[n]) / 2, atol=1e-7), n
        assert not np.array_equal(gh.tensors[n], a) and not np.array_equal(gh.tensors[n], gt.tensors[n]), n
    none = tmp_path / "none.gguf"
    assert main(["interpolate", "--base", str(tiny_f32), "--tuned", str(tuned), "--alpha", "0", "--out", str(none)]) == 0
    assert none.read_bytes() == tiny_f32.read_bytes()


def test_interpolate_refuses_a_model_that_is_not_a_fine_tune_of_the_base_and_writes_nothing(tiny_f32, tiny_qwen2, tmp_path):
    from reex_learner.cli import main

    out = tmp_path / "mixed.gguf"
    assert main(["interpolate", "--base", str(tiny_f32), "--tuned", str(tiny_qwen2), "--alpha", "0.5", "--out", str(out)]) == 2
    assert main(["interpolate", "--base", str(tiny_f32), "--tuned", str(tiny_f32), "--alpha", "1.5", "--out", str(out)]) == 2
    assert not out.exists() and list(tmp_path.iterdir()) == []

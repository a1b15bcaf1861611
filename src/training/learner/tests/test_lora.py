"""LoRA on the learner's GGUF model (reex_learner/lora.py): a fresh adapter is the base model, training
moves only the adapter, the llama.cpp LoRA GGUF round-trips, and -- the point of it all -- llama.cpp
with the base GGUF plus the exported adapter computes the learner's logits (llama, qwen2, gemma3).
Also: the SFT trainer's packed rows compute llama.cpp's gemma3 (its sliding window included)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import ggml_gelu_f16_table, llama_cpp_logits, make_cfg, make_request, sample_tokens, write_request
from reex_learner.cli import main as cli_main
from reex_learner.gguf_io import gguf_module, read_gguf
from reex_learner.grpo import PackedBatch, Record, collate_packs, make_packs, packed_forward, packed_logprobs, parse_rollout
from reex_learner.lora import (
    BaseView,
    apply_lora,
    attach_lora,
    lora_modules,
    lora_parameters,
    parse_targets,
    read_lora_gguf,
    write_lora_gguf,
)
from reex_learner.model import load_model, state_for_gguf
from reex_learner.sft_run import packing_max_diff
from reex_learner.train import Backend, make_optimizer
from reex_learner.train import train as train_loop

ARCHS = ["tiny_f32", "tiny_qwen2", "tiny_gemma3"]
# llama.cpp (--exact: f32 weights, f32 KV cache, no flash attention) against the module: f32 summation
# order for llama/qwen2 (logits ~10); gemma3's CPU GeGLU reads gelu from an f16 table, emulated here,
# and its logits are ~80 (tied embeddings of std 1 times sqrt(n_embd))
TOL = {"llama": 1e-3, "qwen2": 1e-3, "gemma3": 5e-3}


@pytest.fixture(params=ARCHS)
def arch_model(request):
    return request.getfixturevalue(request.param)


def _load(path, ggml_gelu: bool = True):
    """The module for ``path``, with ggml's f16 gelu table on a gemma3 file (what llama.cpp's CPU computes)."""
    model, g = load_model(str(path))
    if g.arch == "gemma3" and ggml_gelu:
        for layer in model.layers:
            layer.ffn_act = ggml_gelu_f16_table
    model.eval()
    return model, g


def _randomise_b(model, std: float, seed: int = 2) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, m in lora_modules(model):
            m.lora_b.copy_(torch.randn(m.lora_b.shape, generator=gen) * std)


def _logits(model, tokens) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor(tokens))[0]


def test_fresh_adapter_is_the_base_model_and_freezes_it(arch_model):
    """B = 0: logits bit-identical; base frozen, adapters f32 and trainable, A as peft draws it."""
    model, g = _load(arch_model)
    tokens = sample_tokens(g.hparams.n_vocab, 32)
    before = _logits(model, tokens)
    names = attach_lora(model, rank=4, alpha=8.0, targets="all", seed=3)
    assert len(names) == g.hparams.n_layer * 7 and names[0] == "blk.0.attn_q.weight"
    assert torch.equal(_logits(model, tokens), before)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.rsplit(".", 1)[-1] in ("lora_a", "lora_b") for n in trainable)
    assert len(trainable) == 2 * len(names)
    for _, m in lora_modules(model):
        assert m.lora_a.dtype == torch.float32 and m.lora_b.dtype == torch.float32
        assert float(m.lora_b.abs().max()) == 0.0
        bound = 1.0 / m.in_features**0.5
        assert 0.5 * bound < float(m.lora_a.abs().max()) <= bound
        assert m.scale == 2.0
    # the model's GGUF tensors are still the base's (names and values)
    assert {n for n, _ in model.gguf_tensors()} == set(g.tensors) - {"rope_freqs.weight"}


def test_parse_targets():
    assert parse_targets("attn_v, attn_q") == ["attn_q", "attn_v"]
    assert len(parse_targets("all")) == 7
    for bad in ("q_proj", "output", "token_embd", ""):
        with pytest.raises(ValueError):
            parse_targets(bad)


def test_adapter_matches_llama_cpp(arch_model, tmp_path):
    """The learner's logits with a random adapter on all seven matrices against llama.cpp's with the
    base GGUF plus the exported adapter (node-llama-cpp's `lora` context option)."""
    model, g = _load(arch_model)
    tokens = sample_tokens(g.hparams.n_vocab, 48, seed=5)
    base = _logits(model, tokens)
    attach_lora(model, rank=4, alpha=8.0, targets="all", seed=1)
    _randomise_b(model, 0.1)
    ours = _logits(model, tokens)
    adapter = tmp_path / "adapter.gguf"
    write_lora_gguf(adapter, model)
    ref_base = llama_cpp_logits(arch_model, tokens, "--exact")
    ref = llama_cpp_logits(arch_model, tokens, "--exact", "--lora", str(adapter))
    diff = (ours - ref).abs().max().item()
    effect = (ours - base).abs().max().item()
    print(
        f"\n{g.arch} + LoRA (r 4, all targets): max |d logit| vs llama.cpp {diff:.2e}; adapter moves logits by up to {effect:.2f} "
        f"(llama.cpp: {(ref - ref_base).abs().max().item():.2f}); base vs base {(base - ref_base).abs().max().item():.2e}; logits up to {ref.abs().max().item():.1f}"
    )
    assert diff < TOL[g.arch]
    assert effect > 1.0  # the comparison is not vacuous
    assert (base - ref).abs().max().item() > 1.0  # negative control: llama.cpp did apply the adapter


def test_f16_adapter_and_default_targets_match_llama_cpp(tiny_f32, tmp_path):
    """An f16 adapter file on the default targets (attention only): ggml then rounds the activations
    to f16 for the adapter's matmuls, so a looser bound."""
    model, g = _load(tiny_f32)
    tokens = sample_tokens(g.hparams.n_vocab, 40, seed=6)
    attach_lora(model, rank=8, alpha=4.0, seed=4)
    _randomise_b(model, 0.2, seed=5)
    adapter = tmp_path / "adapter16.gguf"
    write_lora_gguf(adapter, model, out_type="f16")
    back = read_lora_gguf(adapter)
    fresh, _ = _load(tiny_f32)
    apply_lora(fresh, back)  # the f16-rounded adapter, as llama.cpp reads it
    ref = llama_cpp_logits(tiny_f32, tokens, "--exact", "--lora", str(adapter))
    diff = (_logits(fresh, tokens) - ref).abs().max().item()
    print(f"\nf16 adapter, attention targets, r 8: max |d logit| vs llama.cpp {diff:.2e}")
    assert back.targets == ["attn_q", "attn_k", "attn_v", "attn_output"] and back.ranks == [8]
    assert diff < 1e-2


def test_export_read_round_trip(tiny_f32, tmp_path):
    """What llama.cpp's convert_lora_to_gguf.py writes: the keys, `<base>.lora_a/.lora_b`, GGUF dims
    [in, r] and [r, out]; reading it back gives the same matrices and the same model."""
    model, g = _load(tiny_f32)
    attach_lora(model, rank=3, alpha=5.0, targets="attn_q,attn_v,ffn_down", seed=7)
    _randomise_b(model, 0.05)
    path = tmp_path / "a.gguf"
    write_lora_gguf(path, model, name="tiny LoRA")
    reader = gguf_module().GGUFReader(str(path))
    meta = {f.name: f.contents() for f in reader.fields.values()}
    assert meta["general.architecture"] == "llama" and meta["general.type"] == "adapter"
    assert meta["adapter.type"] == "lora" and meta["adapter.lora.alpha"] == 5.0
    shapes = {t.name: [int(x) for x in t.shape] for t in reader.tensors}
    E, FF = g.hparams.n_embd, g.hparams.n_ff
    assert shapes["blk.0.attn_q.weight.lora_a"] == [E, 3] and shapes["blk.0.attn_q.weight.lora_b"] == [3, E]
    assert shapes["blk.1.ffn_down.weight.lora_a"] == [FF, 3] and shapes["blk.1.ffn_down.weight.lora_b"] == [3, E]
    assert len(shapes) == 2 * 3 * g.hparams.n_layer
    back = read_lora_gguf(path)
    assert (back.arch, back.alpha, back.ranks, back.targets) == ("llama", 5.0, [3], ["attn_q", "attn_v", "ffn_down"])
    for name, m in lora_modules(model):
        a, b = back.pairs[name]
        assert np.array_equal(a, m.lora_a.detach().numpy()) and np.array_equal(b, m.lora_b.detach().numpy())
    fresh, _ = _load(tiny_f32)
    apply_lora(fresh, back)
    tokens = sample_tokens(g.hparams.n_vocab, 24)
    assert torch.equal(_logits(fresh, tokens), _logits(model, tokens))
    # the merged export computes the same model
    merged = state_for_gguf(model)
    plain, _ = _load(tiny_f32)
    with torch.no_grad():
        for name, p in plain.named_parameters():
            p.copy_(merged[name.replace("layers.", "blk.", 1)])
    assert (_logits(plain, tokens) - _logits(model, tokens)).abs().max().item() < 1e-4


def test_merge_writes_one_gguf_that_llama_cpp_runs_as_base_plus_adapter(arch_model, tmp_path, capsys):
    """`merge` folds the adapter into the weights: llama.cpp on the merged file against llama.cpp on the
    base with the adapter loaded, and at --scale 0 the base's logits."""
    model, g = _load(arch_model)
    tokens = sample_tokens(g.hparams.n_vocab, 32, seed=8)
    attach_lora(model, rank=4, alpha=8.0, targets="all", seed=3)
    _randomise_b(model, 0.1, seed=4)
    adapter = tmp_path / "adapter.gguf"
    write_lora_gguf(adapter, model)
    merged, unmerged = tmp_path / "merged.gguf", tmp_path / "zero.gguf"
    assert cli_main(["merge", "--model", str(arch_model), "--lora", str(adapter), "--out", str(merged), "--out-type", "f32"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["tensors_merged"] == 7 * g.hparams.n_layer
    assert cli_main(["merge", "--model", str(arch_model), "--lora", str(adapter), "--scale", "0", "--out", str(unmerged)]) == 0
    ref = llama_cpp_logits(arch_model, tokens, "--exact", "--lora", str(adapter))
    base = llama_cpp_logits(arch_model, tokens, "--exact")
    ours = llama_cpp_logits(merged, tokens, "--exact")
    diff = (ours - ref).abs().max().item()
    print(f"\n{g.arch}: merged vs base + adapter in llama.cpp: max |d logit| {diff:.2e}; the adapter moves logits by {(ref - base).abs().max().item():.2f}")
    assert diff < TOL[g.arch]
    assert (ref - base).abs().max().item() > 1.0
    assert torch.equal(llama_cpp_logits(unmerged, tokens, "--exact"), base)


def test_merge_refuses_an_adapter_of_another_model_and_writes_nothing(tiny_f32, tiny_qwen2, tmp_path):
    model, _ = _load(tiny_f32)
    attach_lora(model, rank=2, alpha=2.0)
    adapter = tmp_path / "a.gguf"
    write_lora_gguf(adapter, model)
    out = tmp_path / "out.gguf"
    assert cli_main(["merge", "--model", str(tiny_qwen2), "--lora", str(adapter), "--out", str(out)]) == 2
    assert cli_main(["merge", "--model", str(tiny_f32), "--lora", str(tiny_qwen2), "--out", str(out)]) == 2
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf"]


def test_adapter_mismatches_are_refused(tiny_f32, tiny_qwen2, tiny_gemma3, tmp_path):
    model, _ = _load(tiny_f32)
    attach_lora(model, rank=2, alpha=2.0)
    path = tmp_path / "a.gguf"
    write_lora_gguf(path, model)
    other, _ = _load(tiny_qwen2)
    with pytest.raises(ValueError, match="architecture"):
        apply_lora(other, read_lora_gguf(path))
    with pytest.raises(ValueError, match="not a LoRA adapter"):
        read_lora_gguf(tiny_gemma3)
    twice, _ = _load(tiny_f32)
    apply_lora(twice, read_lora_gguf(path))
    with pytest.raises(ValueError, match="already has"):
        apply_lora(twice, read_lora_gguf(path))


# --- training --------------------------------------------------------------------------------------


def _records(n_vocab: int, n: int = 6, prefix: int = 12, seed: int = 0) -> list[Record]:
    """``n`` records of one database and family: a shared prompt prefix, 2 own prompt tokens and a
    response of 8 (all loss tokens)."""
    gen = torch.Generator().manual_seed(seed)
    head = torch.randint(0, n_vocab, (prefix,), generator=gen).tolist()
    out = []
    for i in range(n):
        prompt = head + torch.randint(0, n_vocab, (2,), generator=gen).tolist()
        resp = torch.randint(0, n_vocab, (8,), generator=gen).tolist()
        out.append(Record(prompt, resp, [1] * len(resp), "db|fam", f"q{i}", "fam", "db"))
    return out


def _write_records(path, records) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(
                json.dumps({"prompt_tokens": r.prompt, "tokens": r.tokens, "mask": r.mask, "db_id": r.db, "family": r.family, "question_id": r.key}) + "\n"
            )


@pytest.mark.parametrize("fixture", ["tiny_f32", "tiny_gemma3"])
def test_sft_steps_move_only_the_adapter_and_lower_the_loss(fixture, request):
    model, g = _load(request.getfixturevalue(fixture), ggml_gelu=False)
    base = {n: p.detach().clone() for n, p in model.named_parameters()}
    attach_lora(model, rank=4, alpha=8.0, targets="all", seed=0)
    opt = make_optimizer(model, make_cfg(mode="sft", lr=1e-2))
    assert {id(p) for grp in opt.param_groups for p in grp["params"]} == {id(p) for p in lora_parameters(model)}
    b = collate_packs(make_packs(_records(g.hparams.n_vocab), 1024, True))
    model.train()
    losses = []
    for _ in range(5):
        opt.zero_grad(set_to_none=True)
        s, n = _sft_loss(model, b)
        (s / n).backward()
        opt.step()
        losses.append(float(s / n))
    print(f"\n{g.arch} SFT with LoRA: loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    assert losses[-1] < losses[0] - 0.1
    for n, p in model.named_parameters():
        if n in base:
            assert torch.equal(p, base[n]), n
    assert all(float(m.lora_b.abs().max()) > 0 for _, m in lora_modules(model))


def _sft_loss(model, b: PackedBatch) -> tuple[torch.Tensor, float]:
    """(sum of -log p over the loss tokens, their count) of packed rows."""
    lp, _ = packed_logprobs(model, b)
    return (-lp * b.mask).sum(), float(b.mask.sum())


def test_packed_logprobs_score_only_loss_tokens_as_the_whole_logit_matrix_would(tiny_gemma3):
    """packed_logprobs projects only the loss tokens onto the vocabulary; the loss and its gradient equal
    the cross-entropy over every position's logits, masked."""
    model, g = _load(tiny_gemma3, ggml_gelu=False)
    attach_lora(model, rank=4, alpha=8.0, targets="all", seed=0)
    _randomise_b(model, 0.1)
    b = collate_packs(make_packs(_records(g.hparams.n_vocab), 1024, True))
    s, n = _sft_loss(model, b)
    grads = torch.autograd.grad(s, lora_parameters(model))
    logits = packed_forward(model, b.ids, b.pos, b.seg)
    full = (torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), b.targets.view(-1), reduction="none").view(b.mask.shape) * b.mask).sum()
    ref = torch.autograd.grad(full, lora_parameters(model))
    assert n == float(b.mask.sum()) and n > 0
    assert abs(float(s) - float(full)) <= 1e-4 * abs(float(full))
    assert max(float((a - r).abs().max()) for a, r in zip(grads, ref, strict=True)) < 1e-4


def test_packed_rows_compute_llama_cpps_gemma3(tiny_gemma3, tmp_path):
    """The SFT trainer's packed rows (shared prefix, positions restarting after it) go through the
    model's own gemma3 blocks: each suffix gets llama.cpp's logits for prefix + suffix, across the
    sliding window (8 positions on layer 0, rows of 22 positions), with and without a LoRA."""
    model, g = _load(tiny_gemma3)
    assert g.hparams.swa_layers == (True, False) and g.hparams.n_swa == 8
    records = _records(g.hparams.n_vocab, n=2, seed=1)
    assert packing_max_diff(model, records) < 1e-4
    attach_lora(model, rank=4, alpha=8.0, targets="all", seed=1)
    _randomise_b(model, 0.1)
    assert packing_max_diff(model, records) < 1e-4
    pack = make_packs(records, 1024, True)[0]
    b = collate_packs([pack])
    with torch.no_grad():
        packed = packed_forward(model, b.ids, b.pos, b.seg)[0]
    adapter = tmp_path / "adapter.gguf"
    write_lora_gguf(adapter, model)
    P, at, worst = len(pack.prefix), len(pack.prefix), 0.0
    for toks, _ in pack.suffixes:
        ref = llama_cpp_logits(tiny_gemma3, pack.prefix + toks, "--exact", "--lora", str(adapter))[P:]
        worst = max(worst, (packed[at : at + len(toks)] - ref).abs().max().item())
        at += len(toks)
    print(f"\ngemma3 packed rows + LoRA vs llama.cpp: max |d logit| {worst:.2e}")
    assert worst < TOL["gemma3"]


def test_sft_run_trains_an_adapter_and_continues_from_it(tiny_gemma3, tmp_path, capsys):
    """A multi-step SFT run (a request with ``run``) of a fresh adapter, then one continuing from it."""
    data = tmp_path / "sft.jsonl"
    g = read_gguf(tiny_gemma3)
    _write_records(data, _records(g.hparams.n_vocab, n=8, seed=2))
    before = tiny_gemma3.read_bytes()

    def run(name, steps, lora, out=None):
        req = make_request(
            tiny_gemma3, data, metrics=tmp_path / f"{name}.json", optimizer_state=None, mode="sft", out=out, lora=lora, lr=1e-2, run={"steps": steps}
        )
        assert cli_main(["step", "--request", str(write_request(tmp_path / f"{name}.request.json", req))]) == 0
        return json.loads((tmp_path / f"{name}.json").read_text())

    a = tmp_path / "a.gguf"
    s1 = run("s1", 6, {"rank": 4, "targets": "all", "out": str(a)})
    assert s1["lora"]["rank"] == 4 and s1["lora"]["targets"] == parse_targets("all") and s1["out"] is None
    assert s1["last_loss"] < s1["first_loss"] - 0.1 and s1["steps"] == 6
    assert tiny_gemma3.read_bytes() == before
    assert read_lora_gguf(a).targets == parse_targets("all")
    b, merged = tmp_path / "b.gguf", tmp_path / "merged.gguf"
    s2 = run("s2", 2, {"in": str(a), "out": str(b)}, out=merged)
    assert s2["lora"]["in"] == str(a) and s2["first_loss"] < s1["first_loss"] - 0.1
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["event"] for e in events if e["event"] in ("start", "done")] == ["start", "done", "start", "done"]
    # the merged GGUF is the base plus adapter b
    tokens = sample_tokens(g.hparams.n_vocab, 20)
    with_lora, _ = _load(tiny_gemma3)
    apply_lora(with_lora, read_lora_gguf(b))
    plain, _ = _load(merged)
    assert (_logits(plain, tokens) - _logits(with_lora, tokens)).abs().max().item() < 1e-3
    bad = make_request(tiny_gemma3, data, metrics=tmp_path / "x.json", optimizer_state=None, mode="sft", run={"steps": 1})
    assert cli_main(["step", "--request", str(write_request(tmp_path / "x.request.json", bad))]) == 2
    assert "paths.out is required" in capsys.readouterr().err


def _experience(path, n_vocab: int) -> list[dict]:
    gen = torch.Generator().manual_seed(9)
    prompt = torch.randint(0, n_vocab, (10,), generator=gen).tolist()
    rows = []
    for adv in (1.0, -1.0, 0.5, -0.5):
        toks = torch.randint(0, n_vocab, (6,), generator=gen).tolist()
        rows.append({"prompt_tokens": prompt, "tokens": toks, "mask": [1] * 6, "advantage": adv, "reward": adv, "question_id": "q"})
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return rows


def _seq_logprob(model, row) -> float:
    ids = torch.tensor(row["prompt_tokens"] + row["tokens"])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids)[0], -1)
    P = len(row["prompt_tokens"])
    return float(sum(lp[P - 1 + j, t] for j, t in enumerate(row["tokens"])))


def test_grpo_step_cli_trains_an_adapter(tiny_f32, tmp_path, capsys):
    """`step` with a request's lora: only the adapter moves (the base file is not rewritten), in the advantage's
    direction; KL to the base (adapter off) is 0 on a fresh adapter and > 0 from a trained one."""
    exp = tmp_path / "e.jsonl"
    rows = _experience(exp, read_gguf(tiny_f32).hparams.n_vocab)
    a, b, opt = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "adam.pt"
    common = dict(metrics=tmp_path / "m.json", optimizer_state=opt, lr=1e-2, kl_beta=0.1)

    def step(name, **kw):
        return cli_main(["step", "--request", str(write_request(tmp_path / f"{name}.json", make_request(tiny_f32, exp, **{**common, **kw})))])

    assert step("a", lora={"out": str(a)}) == 0
    m1 = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert m1["kl"] == 0.0 and m1["lora"]["rank"] == 4 and m1["lora"]["alpha"] == 8.0 and not m1["optimizer_resumed"]
    base, _ = _load(tiny_f32)
    tuned, _ = _load(tiny_f32)
    apply_lora(tuned, read_lora_gguf(a))
    up = _seq_logprob(tuned, rows[0]) - _seq_logprob(base, rows[0])
    down = _seq_logprob(tuned, rows[1]) - _seq_logprob(base, rows[1])
    print(f"\nGRPO step with LoRA: log p of the A=+1 rollout {up:+.3f}, of the A=-1 one {down:+.3f}")
    assert up > 0 and down < 0
    assert step("b", lora={"in": str(a), "out": str(b)}, share_prefix=True) == 0
    m2 = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert m2["kl"] > 0 and m2["optimizer_resumed"] and m2["shared_prefix"] and m2["lora"]["in"] == str(a)
    # bad combinations: exit code 2
    assert step("c") == 2  # neither a whole model out nor an adapter
    assert step("d", lora={"out": str(b)}, master=tmp_path / "m.pt") == 2
    assert cli_main(["step", "--request", str(tmp_path / "missing.json")]) == 2


def test_train_step_with_adapter_packed_equals_unpacked_on_gemma3(tiny_gemma3):
    """GRPO through train.train on a gemma3 LoRA model: shared-prefix rows give the unpacked gradient
    of the adapter, and the adapter-off view is the base model."""
    g = read_gguf(tiny_gemma3)
    rows = _experience_rows(g.hparams.n_vocab)
    grads = []
    for share in (False, True):
        model, _ = _load(tiny_gemma3, ggml_gelu=False)
        attach_lora(model, rank=4, alpha=8.0, targets="all", seed=0)
        _randomise_b(model, 0.05)
        if share:
            base, _ = _load(tiny_gemma3, ggml_gelu=False)
            tokens = rows[0]["prompt_tokens"] + rows[0]["tokens"]
            assert torch.equal(_logits(BaseView(model), tokens), _logits(base, tokens))
        cfg = make_cfg(mode="grpo", lr=0.0, share_prefix=share, micro_batch=8, kl_beta=0.1)
        opt = torch.optim.SGD(lora_parameters(model), lr=0.0)
        train_loop(Backend(model, BaseView(model)), [parse_rollout(r) for r in rows], cfg, optimizer=opt)
        grads.append(torch.cat([p.grad.reshape(-1) for p in lora_parameters(model)]))
    rel = ((grads[0] - grads[1]).norm() / grads[0].norm()).item()
    print(f"\ngemma3 LoRA GRPO gradient, packed vs unpacked: relative difference {rel:.2e}")
    assert grads[0].norm() > 0 and rel < 1e-4


def _experience_rows(n_vocab: int) -> list[dict]:
    gen = torch.Generator().manual_seed(11)
    prompt = torch.randint(0, n_vocab, (12,), generator=gen).tolist()
    out = []
    for adv in (1.0, -0.5, 0.25):
        toks = torch.randint(0, n_vocab, (7,), generator=gen).tolist()
        out.append({"prompt_tokens": prompt, "tokens": toks, "mask": [1] * 7, "advantage": adv, "old_logprobs": None})
    return out

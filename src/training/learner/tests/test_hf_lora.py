"""Path (b), Hugging Face + LoRA (reex_learner/hf_lora.py): the HF backend of the one loop (train.py).

Without transformers/peft (Debian's /usr/bin/python3, `npm run test:learner`): the guarded import and
its message, the request's LoRA target names, record sharding by rank, the loss module, and the loop
driven through the HF backend by a toy causal LM with a LoRA-style adapter and a ``disable_adapter()``
context -- checked against the plain backend (same update, same metrics, warm-up, old-log-prob guard
and split-half included) and, under torch.distributed (gloo, 2 and 3 CPU processes), against the
single-process gradient.

With transformers + peft (the HF venv of scripts/install-hf-deps.sh, `npm run test:learner-hf`), the
tests at the end run `step` with hf requests (GRPO, SFT, the guard, GGUF export) on randomly
initialised tiny Llama and Gemma 3 checkpoints built from a config; without them they are SKIPPED with
the reason "transformers/peft not installed: real-model path (b) tests not run" (pytest -rs shows it).
scripts/gpu-check-hf-lora.sh is the same check for a GPU machine.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import ROOT, make_cfg, make_request, run_step, write_request
from reex_learner import hf_lora, loss, train
from reex_learner.cli import main as cli_main
from reex_learner.grpo import Rollout, collate, sequence_logprobs
from reex_learner.hf_lora import (
    AdapterDisabledView,
    HFBackend,
    LogitsView,
    MissingHFDependency,
    convert_lora_command,
    dist_from_env,
    find_convert_lora_script,
    parse_targets,
    require_hf,
)
from reex_learner.train import Backend, DistInfo, OldLogprobMismatch, shard_rollouts


def _hf_train(model, rollouts, cfg, *, ref_free=False, dist_info=None, ddp_model=None, optimizer=None):
    """The HF backend through the one loop, with the adapter-off base as reference unless ``ref_free``."""
    return train.train(HFBackend(model, not ref_free, dist_info, ddp_model), rollouts, cfg, optimizer=optimizer)


HF_SKIP_REASON = "transformers/peft not installed: real-model path (b) tests not run (bash scripts/install-hf-deps.sh; npm run test:learner-hf)"


# ------------------------------------------------------------------------------------------------
# A toy causal LM with a LoRA adapter: the interface hf_lora needs from a peft model
# ------------------------------------------------------------------------------------------------
class ToyLoraLM(torch.nn.Module):
    """Frozen embedding -> causal prefix mean -> frozen linear (+ LoRA B·A) -> tanh -> frozen head."""

    def __init__(self, vocab: int = 40, dim: int = 16, rank: int = 4, seed: int = 0, zero_b: bool = False):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Embedding(vocab, dim)
        self.w = torch.nn.Linear(dim, dim)
        self.head = torch.nn.Linear(dim, vocab)
        with torch.no_grad():
            for p in list(self.emb.parameters()) + list(self.w.parameters()) + list(self.head.parameters()):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
                p.requires_grad_(False)
        self.lora_A = torch.nn.Parameter(torch.randn(rank, dim, generator=g) * 0.3)
        self.lora_B = torch.nn.Parameter(torch.zeros(dim, rank) if zero_b else torch.randn(dim, rank, generator=g) * 0.3)
        self.adapter_on = True

    @contextlib.contextmanager
    def disable_adapter(self):
        prev, self.adapter_on = self.adapter_on, False
        try:
            yield
        finally:
            self.adapter_on = prev

    def forward(self, input_ids=None, use_cache=None):
        x = self.emb(input_ids)
        pos = torch.arange(1, x.shape[1] + 1, dtype=x.dtype).view(1, -1, 1)
        x = x.cumsum(1) / pos
        h = self.w(x)
        if self.adapter_on:
            h = h + (x @ self.lora_A.t()) @ self.lora_B.t()
        return SimpleNamespace(logits=self.head(torch.tanh(h)) * 2.0)


def _rollouts(n: int = 7, vocab: int = 40, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        P = 2 + int(torch.randint(0, 5, (1,), generator=g))
        T = 3 + int(torch.randint(0, 9, (1,), generator=g))
        prompt = torch.randint(0, vocab, (P,), generator=g).tolist()
        tokens = torch.randint(0, vocab, (T,), generator=g).tolist()
        mask = [0 if 1 <= j < 3 and T > 5 else 1 for j in range(T)]  # some injected tokens
        old = [(-1.0 - 2.0 * float(torch.rand((), generator=g))) if m else 0.0 for m in mask]
        adv = float(torch.randn((), generator=g))
        out.append(Rollout(prompt, tokens, mask, old, adv, reward=adv, question_id=i // 2))
    return out


def _params(m: torch.nn.Module):
    return {n: p.detach().clone() for n, p in m.named_parameters()}


# ------------------------------------------------------------------------------------------------
# Guarded import, argument parsing
# ------------------------------------------------------------------------------------------------
def test_missing_transformers_gives_the_install_hint(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import now raises ImportError
    with pytest.raises(MissingHFDependency) as err:
        require_hf()
    assert "path (b) needs transformers and peft: pip install" in str(err.value)
    req = _hf_request(tmp_path, "nowhere", tmp_path / "e.jsonl", tmp_path / "out")
    rc = cli_main(["step", "--request", str(write_request(tmp_path / "r.json", req))])
    assert rc == 3
    assert "path (b) needs transformers and peft: pip install" in capsys.readouterr().err


def test_missing_peft_gives_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)
    fake = SimpleNamespace(__version__="4.50.0")
    monkeypatch.setitem(sys.modules, "transformers", fake)
    with pytest.raises(MissingHFDependency, match="needs transformers and peft"):
        require_hf()


def test_hf_lora_targets_are_the_requests_llama_cpp_names():
    assert parse_targets("attn_q,attn_v,ffn_gate") == ("q_proj", "v_proj", "gate_proj")
    assert parse_targets(" q_proj, v_proj ,gate_proj") == ("q_proj", "v_proj", "gate_proj")
    assert len(parse_targets("all")) == 7
    with pytest.raises(ValueError, match="lora.targets"):
        parse_targets(" , ")


def test_dist_from_env():
    assert dist_from_env({}) == DistInfo(0, 1, 0) and not dist_from_env({}).enabled
    d = dist_from_env({"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1"})
    assert (d.rank, d.world_size, d.local_rank, d.enabled, d.is_main) == (5, 8, 1, True, False)
    with pytest.raises(ValueError):
        dist_from_env({"WORLD_SIZE": "2", "RANK": "2"})


# ------------------------------------------------------------------------------------------------
# Sharding by rank
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,world", [(7, 1), (7, 2), (7, 3), (2, 4), (16, 8), (0, 2)])
def test_shard_rollouts_partitions_and_balances(n, world):
    rs = _rollouts(n) if n else []
    shards = [shard_rollouts(rs, r, world) for r in range(world)]
    ids = sorted(id(x) for s in shards for x in s)
    assert ids == sorted(id(x) for x in rs)  # every rollout on exactly one rank
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    if n >= world:  # dealt by length: no rank gets all the long ones
        tok = [sum(x.length for x in s) for s in shards]
        assert max(tok) - min(tok) <= max(x.length for x in rs)
    if world == 1:  # the order of one process's micro-batches
        assert [id(x) for x in shards[0]] == [id(x) for x in sorted(rs, key=lambda r: r.length)]
    with pytest.raises(ValueError):
        shard_rollouts(rs, world, world)


# ------------------------------------------------------------------------------------------------
# The loss is grpo's, and the loop is train_step's
# ------------------------------------------------------------------------------------------------
def test_the_loss_is_the_loss_modules():
    assert train.micro_batch_loss is loss.micro_batch_loss
    rs = _rollouts(4)
    b = collate(rs)
    lp = -torch.rand(b.mask.shape) * 3
    ref = -torch.rand(b.mask.shape) * 3
    cfg = make_cfg(clip=0.2, clip_high=0.28, kl_beta=0.1)
    got, stats = loss.micro_batch_loss(cfg, lp, b, 17.0, ref)
    per_token, stats2 = loss.grpo_token_loss(lp, b.old_logprobs, b.advantages, b.mask, 0.2, 0.28, ref, 0.1)
    assert torch.equal(got, per_token.sum() / 17.0)
    assert all(torch.equal(stats[k], stats2[k]) for k in stats)
    sft_loss, _ = loss.micro_batch_loss(make_cfg(mode="sft", loss_agg="seq-mean-token-mean"), lp, b, 4.0)
    assert torch.allclose(sft_loss, loss.aggregate(-lp * b.mask, b.mask, "seq-mean-token-mean", 4.0))


@pytest.mark.parametrize(
    "kw",
    [
        dict(kl_beta=0.05, micro_batch=2),
        dict(kl_beta=0.0, micro_batch=3, mini_batch=4, epochs=2, loss_agg="seq-mean-token-mean", clip_high=0.3),
        dict(mode="sft", micro_batch=2),
        dict(kl_beta=0.02, micro_batch=1, mini_batch=3, shuffle=True, epochs=2, max_grad_norm=0.0),
        dict(kl_beta=0.05, micro_batch=2, mini_batch=2, warmup_steps=3, max_old_logprob_diff=5.0, split_half=2),
    ],
)
def test_hf_backend_equals_the_plain_backend(kw):
    """The HF backend (peft-like views) gives the same update and metrics as the plain backend given the
    adapter-disabled model as reference, warm-up, guard and split-half included."""
    cfg = make_cfg(lr=1e-2, **kw)
    a, b = ToyLoraLM(), ToyLoraLM()
    m_hf = _hf_train(a, _rollouts(), cfg)
    m_gg = train.train(Backend(LogitsView(b), AdapterDisabledView(b)), _rollouts(), cfg)
    pa, pb = _params(a), _params(b)
    for n in pa:
        assert torch.allclose(pa[n], pb[n], rtol=0, atol=1e-7), n
    assert not torch.equal(pa["lora_B"], ToyLoraLM().lora_B)  # it did move
    for k in (
        "loss",
        "pg_loss",
        "nll",
        "kl",
        "clip_frac",
        "ratio_mean",
        "ratio_min",
        "ratio_max",
        "entropy",
        "grad_norm",
        "old_logprob_abs_diff",
        "optimizer_steps",
        "loss_tokens_per_epoch",
        "advantage_mean",
    ):
        x, y = m_hf[k], m_gg[k]
        if kw.get("mode") == "sft" and k == "kl":
            assert x is None  # no reference forward in SFT
            continue
        assert (x is None and y is None) or x == pytest.approx(y, rel=1e-6, abs=1e-9), k
    assert m_hf["world_size"] == 1 and m_hf["trainable_params"] == a.lora_A.numel() + a.lora_B.numel()
    assert set(m_gg) <= set(m_hf), set(m_gg) - set(m_hf)  # the diagnostics of the GGUF path, all of them
    for k in ("shared_prefix", "computed_tokens", "optimizer_steps_total", "optimizer_resumed", "rollouts", "context_tokens"):
        assert m_hf[k] == m_gg[k], k
    assert m_hf["lr_applied"] == pytest.approx(m_gg["lr_applied"], rel=1e-12)
    if kw.get("warmup_steps"):
        assert m_hf["lr_applied"] == pytest.approx([1e-2 / 3, 2e-2 / 3, 1e-2, 1e-2])
    if kw.get("split_half"):
        for k in ("splits", "groups", "cosine_mean", "sign_agreement_mean"):
            assert m_hf["split_half"][k] == pytest.approx(m_gg["split_half"][k], rel=1e-5, abs=1e-7), k


def test_old_logprob_guard_fails_the_step_before_any_update():
    rs = _rollouts()
    diff = _hf_train(ToyLoraLM(), _rollouts(), make_cfg(lr=0.0))["old_logprob_abs_diff"]
    assert diff > 0.5  # the file's old log-probs are random: far from the toy's
    for cfg in (make_cfg(lr=1e-2, max_old_logprob_diff=diff * 0.9), make_cfg(lr=1e-2, max_old_logprob_diff=diff * 0.9, mini_batch=2)):
        a, b = ToyLoraLM(), ToyLoraLM()
        with pytest.raises(OldLogprobMismatch, match="above learner.maxOldLogprobDiff") as e_hf:
            _hf_train(a, copy.deepcopy(rs), cfg)
        with pytest.raises(OldLogprobMismatch) as e_gg:
            train.train(Backend(LogitsView(b)), copy.deepcopy(rs), cfg)
        assert str(e_hf.value) == str(e_gg.value)  # same tokens, same mean
        for n, p in _params(a).items():
            assert torch.equal(p, _params(ToyLoraLM())[n]), n  # no update
    met = _hf_train(ToyLoraLM(), copy.deepcopy(rs), make_cfg(lr=1e-2, max_old_logprob_diff=diff * 1.1))
    assert met["old_logprob_abs_diff"] == pytest.approx(diff) and met["optimizer_steps"] == 1
    with pytest.raises(ValueError, match="one process"):
        _hf_train(ToyLoraLM(), rs, make_cfg(split_half=2), dist_info=DistInfo(0, 2, 0), ddp_model=ToyLoraLM())


def test_reference_is_the_base_with_the_adapter_disabled():
    # fresh adapter (B = 0): policy == base, so k3 KL is exactly 0 and on-policy ratios are 1
    m = ToyLoraLM(zero_b=True)
    rs = _rollouts()
    for r in rs:
        r.old_logprobs = None
    base_before = {n: p.clone() for n, p in m.named_parameters() if not p.requires_grad}
    met = _hf_train(m, rs, make_cfg(lr=1e-2, kl_beta=0.5, micro_batch=2))
    assert met["kl"] == 0.0 and met["ratio_mean"] == pytest.approx(1.0) and met["old_logprob_abs_diff"] == 0.0
    for n, p in m.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, base_before[n]), n  # base frozen
    assert float(m.lora_B.abs().sum()) > 0  # adapter moved
    # next step from that adapter: KL > 0 against the base
    met2 = _hf_train(m, _rollouts(), make_cfg(lr=1e-2, kl_beta=0.5, micro_batch=2))
    assert met2["kl"] > 0
    # --ref-free: no reference forward at all, no kl metric; kl_beta must then be 0
    met3 = _hf_train(m, _rollouts(), make_cfg(lr=1e-2, kl_beta=0.0), ref_free=True)
    assert met3["kl"] is None and met3["ref"] is None
    with pytest.raises(ValueError, match="needs a reference"):
        _hf_train(m, _rollouts(), make_cfg(kl_beta=0.1), ref_free=True)


def test_views_call_the_model_like_transformers():
    m = ToyLoraLM()
    ids = torch.tensor([[1, 2, 3, 4]])
    assert torch.equal(LogitsView(m)(ids), m(input_ids=ids).logits)
    with m.disable_adapter():
        base = m(input_ids=ids).logits
    assert torch.equal(AdapterDisabledView(m)(ids), base)
    assert m.adapter_on and not torch.equal(base, m(input_ids=ids).logits)


# ------------------------------------------------------------------------------------------------
# DDP: W ranks (gloo, CPU) give the single-process gradient
# ------------------------------------------------------------------------------------------------
DDP_CASES = {
    # mini-batches of 3 and 2 over 2 ranks: shards of 2/1 and 1/1 -> rank 0 runs no_sync micro-batches
    "w2": dict(world=2, cfg=dict(micro_batch=1, mini_batch=3, kl_beta=0.1, warmup_steps=2)),
    # 3 ranks, mini-batches of 2,2,2,1: one or two ranks get nothing -> empty-batch backward
    "w3": dict(world=3, cfg=dict(micro_batch=1, mini_batch=2, kl_beta=0.1, loss_agg="seq-mean-token-mean", epochs=2, max_old_logprob_diff=50.0)),
    # the guard trips on every rank together (on the mean over all ranks), none hangs in a collective
    "w2-guard": dict(world=2, cfg=dict(micro_batch=1, mini_batch=3, max_old_logprob_diff=1e-3)),
}


def _ddp_worker(rank: int, world: int, init_file: str, out_dir: str, cfg_kw: dict) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        m = ToyLoraLM()  # same weights on all ranks
        if rank:
            with torch.no_grad():  # a different local init: DDP must broadcast rank 0's adapter
                m.lora_A.add_(1.0)
        ddp = hf_lora.wrap_ddp(m, "cpu")
        opt = torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=1.0)
        rs = _rollouts(7)
        rs[2].old_logprobs = None  # exercises the gathered on-policy scoring
        try:
            met = _hf_train(m, rs, make_cfg(lr=1.0, max_grad_norm=0.0, **cfg_kw), dist_info=DistInfo(rank, world, rank), ddp_model=ddp, optimizer=opt)
        except OldLogprobMismatch as err:
            met = {"error": str(err)}
        torch.save({"params": _params(m), "metrics": met}, os.path.join(out_dir, f"rank{rank}.pt"))
        del ddp  # a DDP object alive at exit can hang the process (torch 1.13 + gloo)
    finally:
        import gc

        gc.collect()
        dist.destroy_process_group()


@pytest.mark.parametrize("case", sorted(DDP_CASES))
def test_ddp_equals_single_process(case, tmp_path):
    import torch.multiprocessing as mp

    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    world, cfg_kw = DDP_CASES[case]["world"], DDP_CASES[case]["cfg"]
    ctx = mp.spawn(_ddp_worker, args=(world, str(tmp_path / "pg"), str(tmp_path), cfg_kw), nprocs=world, join=False)
    deadline = time.time() + 180
    while not ctx.join(timeout=5):  # raises if a worker failed
        if time.time() > deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            pytest.fail("DDP workers still running after 180 s (hang in a collective?)")

    single = ToyLoraLM()
    opt = torch.optim.SGD([p for p in single.parameters() if p.requires_grad], lr=1.0)
    rs = _rollouts(7)
    rs[2].old_logprobs = None
    start = _params(ToyLoraLM())
    if case.endswith("guard"):
        with pytest.raises(OldLogprobMismatch) as err:
            _hf_train(single, rs, make_cfg(lr=1.0, max_grad_norm=0.0, **cfg_kw), optimizer=opt)
        for r in range(world):
            got = torch.load(tmp_path / f"rank{r}.pt", weights_only=False)
            assert got["metrics"] == {"error": str(err.value)}, r  # the same mean, so the same message
            assert torch.equal(got["params"]["lora_B"], start["lora_B"]), r  # no update
        return
    ref_met = _hf_train(single, rs, make_cfg(lr=1.0, max_grad_norm=0.0, **cfg_kw), optimizer=opt)
    want = _params(single)
    for r in range(world):
        got = torch.load(tmp_path / f"rank{r}.pt", weights_only=False)
        for n in ("lora_A", "lora_B"):
            # SGD with lr 1: the change is the summed gradient of all steps; equal up to float order
            assert torch.allclose(got["params"][n], want[n], rtol=1e-5, atol=1e-6), (r, n)
            assert not torch.allclose(want[n], start[n])
        met = got["metrics"]
        assert met["world_size"] == world and met["optimizer_steps"] == ref_met["optimizer_steps"]
        assert met["lr_applied"] == ref_met["lr_applied"] and met["computed_tokens"] == ref_met["computed_tokens"]
        for k in (
            "loss",
            "pg_loss",
            "kl",
            "nll",
            "entropy",
            "ratio_mean",
            "ratio_min",
            "ratio_max",
            "grad_norm",
            "loss_tokens_per_epoch",
            "old_logprob_abs_diff",
        ):
            assert met[k] == pytest.approx(ref_met[k], rel=1e-5, abs=1e-7), (r, k)


# ------------------------------------------------------------------------------------------------
# GGUF conversion: llama.cpp's own script, not ours
# ------------------------------------------------------------------------------------------------
def test_convert_lora_command_and_script_lookup(tmp_path):
    script = tmp_path / "convert_lora_to_gguf.py"
    script.write_text("# stand-in\n")
    cmd = convert_lora_command(find_convert_lora_script(str(tmp_path)), "ad", "/hf/base", "o.gguf", "f16", python="py")
    assert cmd == ["py", str(script), "--base", "/hf/base", "--outfile", "o.gguf", "--outtype", "f16", "ad"]
    with pytest.raises(FileNotFoundError, match="convert_lora_to_gguf.py"):
        find_convert_lora_script(str(tmp_path / "nope.py"))
    bundled = ROOT / "node_modules" / "node-llama-cpp" / "llama" / "llama.cpp" / "convert_lora_to_gguf.py"
    if bundled.is_file():
        assert find_convert_lora_script() == bundled


def test_convert_failure_is_reported(tmp_path):
    script = tmp_path / "convert_lora_to_gguf.py"
    script.write_text("import sys\nprint('boom: no transformers', file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(ValueError, match="boom: no transformers"):
        hf_lora.convert_adapter_to_gguf(str(tmp_path), str(tmp_path), str(tmp_path / "x.gguf"), script=str(script))


# ------------------------------------------------------------------------------------------------
# Real transformers + peft (skipped here, with the reason named)
# ------------------------------------------------------------------------------------------------
def _need_hf():
    pytest.importorskip("transformers", reason=HF_SKIP_REASON)
    pytest.importorskip("peft", reason=HF_SKIP_REASON)


ARCHS = ("llama", "gemma3")


def _tiny_base(tmp_path: Path, arch: str = "llama", vocab: int = 96) -> Path:
    """A randomly initialised tiny checkpoint built from a config (no download), saved as safetensors.
    gemma3: Gemma3TextConfig (Gemma3ForCausalLM), with a sliding window shorter than the rollouts."""
    import transformers

    torch.manual_seed(0)
    shape = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    if arch == "gemma3":
        cfg = transformers.Gemma3TextConfig(**shape, head_dim=16, max_position_embeddings=128, sliding_window=8)
        model = transformers.Gemma3ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(**shape, max_position_embeddings=128, tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(cfg)
    out = tmp_path / f"base-{arch}"
    model.save_pretrained(out, safe_serialization=True)
    return out


def _write_experience(path: Path, vocab: int, n: int = 6, old_logprob: float | None = None) -> None:
    g = torch.Generator().manual_seed(1)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            prompt = torch.randint(0, vocab, (6,), generator=g).tolist()
            tokens = torch.randint(0, vocab, (10,), generator=g).tolist()
            mask = [0 if 4 <= j < 6 else 1 for j in range(10)]
            fh.write(
                json.dumps(
                    {
                        "prompt_tokens": prompt,
                        "tokens": tokens,
                        "mask": mask,
                        "advantage": 1.0 if i % 2 == 0 else -1.0,
                        "reward": float(i % 2 == 0),
                        "question_id": i // 2,
                        **({"old_logprobs": [old_logprob] * 10} if old_logprob is not None else {}),
                    }
                )
                + "\n"
            )


def _hf_request(tmp_path: Path, base, exp, adapter_out, *, adapter_in=None, gguf_out=None, convert_script=None, **train_kw) -> dict:
    """A request for the hf backend: a fresh rank-16 adapter on q/k/v/o (or ``adapter_in``), f32 on the CPU."""
    lora = {"in": None if adapter_in is None else str(adapter_in), "out": str(adapter_out), "rank": 16, "alpha": 32.0}
    hf = {
        "ggufOut": None if gguf_out is None else str(gguf_out),
        "ggufOutType": "f32",
        "convertScript": None if convert_script is None else str(convert_script),
        "trustRemoteCode": False,
    }
    kw = {"lr": 1e-2, "micro_batch": 2, **train_kw}
    return make_request(
        base,
        exp,
        metrics=tmp_path / f"{Path(adapter_out).name}.json",
        optimizer_state=tmp_path / "opt.pt",
        backend="hf",
        lora=lora,
        hf=hf,
        runtime={"attn": "sdpa"},
        **kw,
    )


def _run_hf(tmp_path: Path, *args, **kw):
    req = _hf_request(tmp_path, *args, **kw)
    return run_step(write_request(tmp_path / f"{Path(args[2]).name}.request.json", req), timeout=600)


@pytest.mark.parametrize("arch", ARCHS)
def test_real_hf_step_end_to_end(tmp_path, arch):
    _need_hf()
    from safetensors.torch import load_file

    base = _tiny_base(tmp_path, arch)
    exp = tmp_path / "step.jsonl"
    _write_experience(exp, 96)
    # warm-up counted across processes through the optimizer state; on-policy, so the guard passes (diff 0)
    warm = dict(warmup_steps=2, max_old_logprob_diff=1e-4)
    r = _run_hf(tmp_path, base, exp, tmp_path / "a1", kl_beta=0.1, **warm)
    assert r.returncode == 0, r.stderr
    m1 = json.loads(r.stdout.strip().splitlines()[-1])
    assert m1 == json.loads((tmp_path / "a1.json").read_text())
    assert m1["kl"] == 0.0  # fresh adapter: lora_B = 0, policy == base
    assert m1["ratio_mean"] == pytest.approx(1.0) and m1["grad_norm"] > 0 and m1["trainable_params"] > 0
    assert m1["lr_applied"] == pytest.approx([5e-3]) and m1["optimizer_steps_total"] == 1 and m1["old_logprob_abs_diff"] < 1e-4
    assert m1["computed_tokens"] == 6 * 16 and m1["shared_prefix"] is False
    a1 = load_file(str(tmp_path / "a1" / "adapter_model.safetensors"))
    assert any(".lora_B." in k and float(v.abs().sum()) > 0 for k, v in a1.items())
    assert json.loads((tmp_path / "a1" / "adapter_config.json").read_text())["r"] == 16

    r = _run_hf(tmp_path, base, exp, tmp_path / "a2", adapter_in=tmp_path / "a1", kl_beta=0.1, **warm)
    assert r.returncode == 0, r.stderr
    m2 = json.loads(r.stdout.strip().splitlines()[-1])
    assert m2["kl"] > 0 and m2["optimizer_resumed"] and m2["lr_applied"] == pytest.approx([1e-2]) and m2["optimizer_steps_total"] == 2
    a2 = load_file(str(tmp_path / "a2" / "adapter_model.safetensors"))
    assert any(not torch.equal(a1[k], a2[k]) for k in a1)

    # SFT from that adapter: cross-entropy on the mask-1 tokens, no reference forward
    (tmp_path / "opt.pt").unlink()
    r = _run_hf(tmp_path, base, exp, tmp_path / "s1", adapter_in=tmp_path / "a1", mode="sft")
    assert r.returncode == 0, r.stderr
    ms = json.loads(r.stdout.strip().splitlines()[-1])
    assert ms["mode"] == "sft" and ms["kl"] is None and ms["ref"] is None and ms["loss"] == pytest.approx(ms["nll"]) and 0 < ms["nll"] < 10
    s1 = load_file(str(tmp_path / "s1" / "adapter_model.safetensors"))
    assert any(not torch.equal(a1[k], s1[k]) for k in a1)

    # the old-log-prob guard: the file's old log-probs (-0.01) are not this model's -> exit 4, nothing written
    off = tmp_path / "off.jsonl"
    _write_experience(off, 96, old_logprob=-0.01)
    (tmp_path / "opt.pt").unlink()
    r = _run_hf(tmp_path, base, off, tmp_path / "g", max_old_logprob_diff=1.0)
    assert r.returncode == 4 and "above learner.maxOldLogprobDiff 1" in r.stderr and "no update was made" in r.stderr, r.stderr
    assert not (tmp_path / "g").exists()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt_tokens": [1, 2], "tokens": [500], "mask": [1], "advantage": 1.0}) + "\n")
    r = _run_hf(tmp_path, base, bad, tmp_path / "a3")
    assert r.returncode == 2 and "outside the model's vocabulary" in r.stderr


@pytest.mark.parametrize("arch", ARCHS)
def test_real_peft_views_and_update_direction(tmp_path, arch):
    _need_hf()
    import transformers

    base = _tiny_base(tmp_path, arch)
    model = hf_lora.load_policy(str(base), None, hf_lora.LoraSettings(r=8, alpha=16, targets=("q_proj", "k_proj", "v_proj", "o_proj")), torch.float32, "cpu")
    plain = transformers.AutoModelForCausalLM.from_pretrained(str(base))
    ids = torch.tensor([[3, 5, 7, 11, 13, 17]])
    with torch.no_grad():
        want = plain(input_ids=ids).logits
        assert torch.allclose(AdapterDisabledView(model)(ids), want, atol=1e-5)
        assert torch.allclose(LogitsView(model)(ids), want, atol=1e-5)  # B = 0
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    # right padding and no attention mask: each row scores as it does alone (gemma3: past its sliding window)
    rows = [Rollout(list(range(1, 12)), list(range(20, 32)), [1] * 12, None, 1.0), Rollout([1, 2], [30, 31], [1, 1], None, -1.0)]
    both = collate(rows)
    with torch.no_grad():
        lp_both, _ = sequence_logprobs(LogitsView(model), both)
        for i, r in enumerate(rows):
            alone, _ = sequence_logprobs(LogitsView(model), collate([r]))
            m = both.mask[i, : alone.shape[1]]
            assert torch.allclose(lp_both[i, : alone.shape[1]] * m, alone[0] * m, atol=1e-5), i

    rs = [Rollout([1, 2, 3, 4], [10, 11, 12, 13], [1, 1, 1, 1], None, 1.0), Rollout([1, 2, 3, 5], [20, 21, 22, 23], [1, 1, 1, 1], None, -1.0)]
    b = collate(rs)
    with torch.no_grad():
        before, _ = sequence_logprobs(LogitsView(model), b)
    _hf_train(model, copy.deepcopy(rs), make_cfg(lr=1e-2, kl_beta=0.0, micro_batch=1))
    with torch.no_grad():
        after, _ = sequence_logprobs(LogitsView(model), b)
    d = ((after - before) * b.mask).sum(-1)
    assert d[0] > 0 and d[1] < 0


@pytest.mark.parametrize("arch", ARCHS)
def test_real_gguf_conversion(tmp_path, arch):
    _need_hf()
    try:
        script = find_convert_lora_script()
    except FileNotFoundError:
        pytest.skip("llama.cpp's convert_lora_to_gguf.py not found")
    base = _tiny_base(tmp_path, arch)
    exp = tmp_path / "step.jsonl"
    _write_experience(exp, 96)
    out = tmp_path / "a.gguf"
    r = _run_hf(tmp_path, base, exp, tmp_path / "a", gguf_out=out, convert_script=script)
    assert r.returncode == 0, r.stderr
    from reex_learner.gguf_io import gguf_module

    reader = gguf_module().GGUFReader(str(out))
    names = {t.name for t in reader.tensors}
    assert "blk.0.attn_q.weight.lora_a" in names and "blk.1.attn_output.weight.lora_b" in names

"""f32 master weights across learner processes, lr warm-up, the old-log-prob guard, null old log-probs,
split-half gradient agreement."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import make_cfg, make_request, run_step, write_request
from reex_learner.grpo import read_experience
from reex_learner.model import load_model
from reex_learner.train import Backend, make_optimizer, train

LR = 1e-5


def _rollouts(seed: int, n_vocab: int, n: int = 8):
    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(n // 4):
        prompt = torch.randint(0, n_vocab - 3, (10,), generator=g).tolist()
        for i in range(4):
            tokens = torch.randint(0, n_vocab - 3, (12,), generator=g).tolist()
            mask = [0 if 4 <= j < 7 else 1 for j in range(12)]
            out.append(
                {
                    "prompt_tokens": prompt,
                    "tokens": tokens,
                    "mask": mask,
                    "old_logprobs": None,
                    "advantage": [1.5, -0.5, 0.5, -1.5][i],
                    "reward": float(i),
                    "question_id": f"{seed}-{q}",
                }
            )
    return out


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _step(model, exp, out, tmp_path, check=True, **train_kw):
    req = make_request(model, exp, out=out, metrics=tmp_path / "m.json", optimizer_state=tmp_path / "adam.pt", **{"lr": LR, **train_kw})
    r = run_step(write_request(tmp_path / "req.json", req), timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout.strip().splitlines()[-1])
    return r


def _flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_two_steps_at_lr_1e5_move_the_weights_by_what_the_optimizer_computed(tiny_f16, tmp_path):
    """f16 GGUF, two learner processes at lr 1e-5: with --master the weights after step 2 are the ones
    AdamW computed in one process (to float rounding), and the GGUF is their f16 export. Reloading the
    f16 export instead (no masters) loses a large share of the update."""
    ref, g = load_model(str(tiny_f16))
    V = g.hparams.n_vocab
    w0 = _flat(ref).clone()
    exps = [_write(tmp_path / f"s{k}.jsonl", _rollouts(100 + k, V)) for k in (1, 2)]

    cfg = make_cfg(lr=LR, micro_batch=4)
    opt = make_optimizer(ref, cfg)
    for exp in exps:
        train(Backend(ref), read_experience(str(exp)), cfg, optimizer=opt)
    intended = _flat(ref) - w0
    assert float(intended.abs().max()) > 0

    # with masters
    master = tmp_path / "master.pt"
    m1 = _step(tiny_f16, exps[0], tmp_path / "a1.gguf", tmp_path, master=master)
    m2 = _step(tmp_path / "a1.gguf", exps[1], tmp_path / "a2.gguf", tmp_path, master=master)
    assert (m1["master_loaded"], m2["master_loaded"]) == (False, True)
    got = torch.cat([t.reshape(-1) for t in torch.load(master)["state"].values()]) - w0
    assert torch.allclose(got, intended, rtol=1e-4, atol=1e-9), float((got - intended).abs().max())
    exported, _ = load_model(str(tmp_path / "a2.gguf"))
    for (name, p), t in zip(exported.named_parameters(), torch.load(master)["state"].values(), strict=True):
        stored = t.half().float() if p.dim() > 1 else t
        assert torch.equal(p.detach(), stored), name

    # without masters: each step reloads the rounded f16 export
    (tmp_path / "adam.pt").unlink()
    _step(tiny_f16, exps[0], tmp_path / "b1.gguf", tmp_path)
    _step(tmp_path / "b1.gguf", exps[1], tmp_path / "b2.gguf", tmp_path)
    lossy, _ = load_model(str(tmp_path / "b2.gguf"))
    realised = _flat(lossy) - w0
    two_d = torch.cat([torch.ones(p.numel()) * (p.dim() > 1) for p in ref.parameters()]).bool()
    rel_err = float((realised - intended)[two_d].norm() / intended[two_d].norm())
    assert rel_err > 0.1, rel_err


def test_masters_of_other_weights_are_refused(tiny_f16, tiny_f32, tmp_path):
    V = load_model(str(tiny_f16))[1].hparams.n_vocab
    exp = _write(tmp_path / "s.jsonl", _rollouts(7, V))
    master = tmp_path / "master.pt"
    _step(tiny_f16, exp, tmp_path / "a1.gguf", tmp_path, master=master)
    before = master.read_bytes()
    r = _step(tiny_f16, exp, tmp_path / "a2.gguf", tmp_path, check=False, master=master)
    assert r.returncode == 2 and "not the export of these master weights" in r.stderr
    assert master.read_bytes() == before and not (tmp_path / "a2.gguf").exists()


def test_warmup_ramps_the_lr_over_optimizer_steps_counted_across_processes(tiny_f32, tmp_path):
    V = load_model(str(tiny_f32))[1].hparams.n_vocab
    exp = _write(tmp_path / "s.jsonl", _rollouts(9, V))
    a = _step(tiny_f32, exp, tmp_path / "a1.gguf", tmp_path, warmup_steps=4, mini_batch=4)
    b = _step(tmp_path / "a1.gguf", exp, tmp_path / "a2.gguf", tmp_path, warmup_steps=4, mini_batch=4)
    assert a["lr_applied"] == [LR * 0.25, LR * 0.5] and b["lr_applied"] == [LR * 0.75, LR]
    assert b["optimizer_steps_total"] == 4


def test_a_steps_progress_places_it_on_the_lr_schedule(tiny_f32, tmp_path):
    """A `reex train` step is one process: the request's progress ((step - 1) / steps) decides its lr after warm-up."""
    V = load_model(str(tiny_f32))[1].hparams.n_vocab
    exp = _write(tmp_path / "s.jsonl", _rollouts(9, V))
    a = _step(tiny_f32, exp, tmp_path / "a1.gguf", tmp_path, schedule="linear", min_lr_ratio=0.2, progress=0.5)
    b = _step(tiny_f32, exp, tmp_path / "a2.gguf", tmp_path, schedule="cosine", min_lr_ratio=0.0, progress=1.0)
    assert a["lr_applied"] == pytest.approx([LR * (0.2 + 0.8 * 0.5)]) and b["lr_applied"] == pytest.approx([0.0], abs=1e-15)


def test_old_logprob_disagreement_fails_before_any_update(tiny_f32, tmp_path):
    model, g = load_model(str(tiny_f32))
    recs = _rollouts(11, g.hparams.n_vocab)
    for r in recs:
        r["old_logprobs"] = [-0.01 if m else 0.0 for m in r["mask"]]  # not what this model gives
    exp = _write(tmp_path / "s.jsonl", recs)
    r = _step(tiny_f32, exp, tmp_path / "o.gguf", tmp_path, check=False, max_old_logprob_diff=0.05)
    assert r.returncode == 4 and "old-logprob disagreement" in r.stderr
    assert not (tmp_path / "o.gguf").exists() and not (tmp_path / "adam.pt").exists()
    # the same file scored by the model itself passes the guard
    for x in recs:
        x["old_logprobs"] = None
    ok = _step(tiny_f32, _write(tmp_path / "t.jsonl", recs), tmp_path / "o.gguf", tmp_path, max_old_logprob_diff=0.05)
    assert ok["old_logprob_abs_diff"] < 1e-5


def test_null_old_logprob_entries_are_scored_by_the_learner(tiny_f32):
    """An end-of-turn token appended after sampling has no sampling log-prob: its null entry is filled
    with the learner's own score (ratio 1 before the update); the sampled ones are kept."""
    model, g = load_model(str(tiny_f32))
    rec = _rollouts(13, g.hparams.n_vocab, n=4)[0]
    rec["tokens"].append(g.hparams.n_vocab - 1)
    rec["mask"].append(1)
    rec["old_logprobs"] = [-0.7 if m else 0.0 for m in rec["mask"][:-1]] + [None]
    from reex_learner.grpo import parse_rollout
    from reex_learner.train import fill_old_logprobs, needs_old_logprobs

    r = parse_rollout(rec)
    assert needs_old_logprobs(r) and math.isnan(r.old_logprobs[-1])
    fill_old_logprobs(model, [r], make_cfg(), "cpu")
    assert not needs_old_logprobs(r) and r.old_logprobs[0] == -0.7 and r.old_logprobs[4] == 0.0
    assert r.old_logprobs[-1] < 0 and r.old_logprobs[-1] != -0.7


def test_split_half_agreement_is_reported(tiny_f32):
    model, g = load_model(str(tiny_f32))
    recs = [r for k in range(4) for r in _rollouts(20 + k, g.hparams.n_vocab, n=4)]
    from reex_learner.grpo import parse_rollout

    m = train(Backend(model), [parse_rollout(r) for r in recs], make_cfg(lr=LR, split_half=3))
    sh = m["split_half"]
    assert sh["splits"] == 3 and sh["groups"] == 4 and len(sh["cosine"]) == 3
    assert all(-1.0 <= c <= 1.0 for c in sh["cosine"]) and 0.0 <= sh["sign_agreement_mean"] <= 1.0


def test_a_step_from_a_q8_0_model_writes_f16_so_small_updates_reach_the_rollouts(tiny_f32, tmp_path):
    """Re-quantising to Q8_0 would round away an lr-1e-5 update (a Q8_0 step is about 1/254 of a
    block's largest weight); the step writes the update as f16 instead, and the next step's masters
    accept that export."""
    from reex_learner.cli import main
    from reex_learner.gguf_io import quantized_matrices, read_gguf

    q8 = tmp_path / "q8.gguf"
    assert main(["export", "--model", str(tiny_f32), "--out", str(q8), "--out-type", "q8_0"]) == 0
    V = read_gguf(q8).hparams.n_vocab
    master = str(tmp_path / "master.pt")
    out1, out2 = tmp_path / "s1.gguf", tmp_path / "s2.gguf"
    _step(q8, _write(tmp_path / "e1.jsonl", _rollouts(1, V)), out1, tmp_path, master=master)
    g1 = read_gguf(out1)
    assert not quantized_matrices(g1)
    assert {g1.tensor_types[n].name for n, a in g1.tensors.items() if a.ndim > 1} == {"F16"}
    m2 = _step(out1, _write(tmp_path / "e2.jsonl", _rollouts(2, V)), out2, tmp_path, master=master)
    assert m2["master_loaded"] is True

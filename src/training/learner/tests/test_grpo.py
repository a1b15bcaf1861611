"""GRPO / SFT loss: masking (b), direction of one update (c), KL k3 (e), accumulation, the CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import make_cfg, make_request, run_step, write_request
from reex_learner.grpo import Rollout, collate, pack_rollouts, parse_rollout, read_experience, sequence_logprobs
from reex_learner.loss import agg_denominator, aggregate, grpo_token_loss, kl_k3
from reex_learner.model import load_model
from reex_learner.train import Backend, train


def _rollout(seed: int, adv: float, n_vocab: int, prompt_len: int = 8, resp_len: int = 14, inject=(5, 9)) -> Rollout:
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, n_vocab - 3, (prompt_len,), generator=g).tolist()
    tokens = torch.randint(0, n_vocab - 3, (resp_len,), generator=g).tolist()
    mask = [0 if inject[0] <= j < inject[1] else 1 for j in range(resp_len)]  # tokens 5..8: injected <result>
    return Rollout(prompt, tokens, mask, None, adv, reward=adv, question_id=seed // 2)


def _with_old_logprobs(model, rollouts):
    b = collate(rollouts)
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, b)
    for i, r in enumerate(rollouts):
        P = len(r.prompt_tokens)
        r.old_logprobs = [lp[i, P - 1 + j].item() if m else 0.0 for j, m in enumerate(r.mask)]
    return rollouts


def _grads(model, batch, **kw):
    model.zero_grad(set_to_none=True)
    lp, _ = sequence_logprobs(model, batch)
    per_token, _ = grpo_token_loss(lp, batch.old_logprobs, batch.advantages, batch.mask, **kw)
    loss = aggregate(per_token, batch.mask, "token-mean", agg_denominator([batch.mask], "token-mean"))
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.fixture()
def tiny(tiny_f32):
    model, g = load_model(str(tiny_f32))
    return model, g.hparams.n_vocab


# ---- (b) mask-0 tokens -------------------------------------------------------------------------
def test_mask0_tokens_get_exactly_zero_gradient(tiny):
    model, V = tiny
    rs = _with_old_logprobs(model, [_rollout(1, 1.0, V), _rollout(2, -0.5, V, resp_len=10, inject=(2, 4))])
    # nudge the stored old log-probs of sampled tokens so the ratios are not all 1
    for r in rs:
        r.old_logprobs = [x - 0.05 * (j % 3) if m else 0.0 for j, (x, m) in enumerate(zip(r.old_logprobs, r.mask, strict=True))]
    batch = collate(rs)

    # 1. the gradient w.r.t. the logits that predict a mask-0 token is exactly zero
    logits = model(batch.input_ids)
    logits.retain_grad()
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
    per_token, _ = grpo_token_loss(lp, batch.old_logprobs, batch.advantages, batch.mask)
    per_token.sum().backward()
    g = logits.grad[:, :-1]
    zero_pos = batch.mask == 0
    assert torch.count_nonzero(g[zero_pos]) == 0
    assert torch.count_nonzero(g[~zero_pos]) > 0

    # 2. garbage old log-probs at mask-0 positions (even ones that would overflow exp) change nothing
    base = _grads(model, batch)
    noisy = collate(rs)
    noisy.old_logprobs = torch.where(noisy.mask > 0, noisy.old_logprobs, torch.full_like(noisy.old_logprobs, -1000.0))
    noisy.old_logprobs[0, 0] = 1000.0  # prompt position
    other = _grads(model, noisy)
    for n in base:
        assert torch.isfinite(other[n]).all()
        assert torch.equal(base[n], other[n]), n

    # 3. a rollout whose tokens are all mask-0 contributes nothing, whatever its advantage
    silent = _rollout(3, 1.0, V, resp_len=10, inject=(0, 10))
    silent.old_logprobs = [0.0] * 10
    a = _grads(model, collate(rs + [silent]))
    silent.advantage = -123.0
    b = _grads(model, collate(rs + [silent]))
    for n in a:
        assert torch.equal(a[n], b[n]), n


def test_collate_aligns_targets_and_masks(tiny):
    _, V = tiny
    r = _rollout(4, 1.0, V, prompt_len=3, resp_len=5, inject=(1, 3))
    r.old_logprobs = [-1.0, 9.0, 9.0, -2.0, -3.0]  # 9.0 at mask-0 entries must be dropped
    b = collate([r, _rollout(5, 1.0, V, prompt_len=6, resp_len=6)])
    seq = r.prompt_tokens + r.tokens
    assert b.targets[0, :7].tolist() == seq[1:]
    assert b.mask[0, :7].tolist() == [0, 0, 1, 0, 0, 1, 1]
    assert b.old_logprobs[0, :7].tolist() == [0, 0, -1.0, 0, 0, -2.0, -3.0]
    assert b.mask[0, 7:].sum() == 0  # padding


# ---- (c) direction of one update ---------------------------------------------------------------
def _seq_logprob(model, r):
    b = collate([r])
    with torch.no_grad():
        lp, _ = sequence_logprobs(model, b)
    return float((lp * b.mask).sum())


def test_one_grpo_step_raises_positive_and_lowers_negative(tiny):
    model, V = tiny
    pos, neg = _rollout(10, +1.0, V), _rollout(11, -1.0, V)
    _with_old_logprobs(model, [pos, neg])
    before = _seq_logprob(model, pos), _seq_logprob(model, neg)
    m = train(Backend(model), [pos, neg], make_cfg(lr=1e-3, micro_batch=1))
    after = _seq_logprob(model, pos), _seq_logprob(model, neg)
    print(f"pos {before[0]:.3f} -> {after[0]:.3f}; neg {before[1]:.3f} -> {after[1]:.3f}; metrics {m}")
    assert after[0] > before[0] + 0.1
    assert after[1] < before[1] - 0.1
    assert m["optimizer_steps"] == 1 and m["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert m["clip_frac"] == 0.0 and m["grad_norm"] > 0 and m["old_logprob_abs_diff"] < 1e-5


def test_clipping_stops_the_gradient(tiny):
    model, V = tiny
    r = _with_old_logprobs(model, [_rollout(12, +1.0, V)])[0]
    r.old_logprobs = [x - 1.0 if m else 0.0 for x, m in zip(r.old_logprobs, r.mask, strict=True)]  # ratio e > 1.2
    batch = collate([r])
    lp, _ = sequence_logprobs(model, batch)
    per_token, stats = grpo_token_loss(lp, batch.old_logprobs, batch.advantages, batch.mask, clip_low=0.2)
    assert float(stats["clipped"].sum()) == float(batch.mask.sum())
    per_token.sum().backward()
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in model.parameters())


def test_sft_step_lowers_nll_of_mask1_tokens_only(tiny):
    model, V = tiny
    r = _rollout(13, 0.0, V)
    before = _seq_logprob(model, r)
    m = train(Backend(model), [r], make_cfg(mode="sft", lr=1e-3))
    assert _seq_logprob(model, r) > before + 0.1
    assert m["nll"] == pytest.approx(-before / sum(r.mask), rel=1e-4)
    assert m["pg_loss"] is None and m["loss"] == pytest.approx(m["nll"], rel=1e-5)


def test_gradient_accumulation_equals_full_batch(tiny_f32):
    grads = []
    for micro in (1, 3):
        model, g = load_model(str(tiny_f32))
        rs = _with_old_logprobs(model, [_rollout(20 + i, (-1) ** i * (i + 1) / 3, g.hparams.n_vocab, resp_len=8 + i) for i in range(3)])
        cfg = make_cfg(lr=0.0, micro_batch=micro, max_grad_norm=0.0)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        train(Backend(model), rs, cfg, optimizer=opt)
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
    for n in grads[0]:
        torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=2e-6)


# ---- (e) KL --------------------------------------------------------------------------------------
def test_kl_k3_is_zero_when_policy_equals_reference(tiny_f32):
    lp = torch.log_softmax(torch.randn(3, 7, 11), -1)[..., 0]
    assert torch.count_nonzero(kl_k3(lp, lp)) == 0
    assert (kl_k3(lp, lp + 0.3) > 0).all() and (kl_k3(lp, lp - 0.3) > 0).all()

    policy, g = load_model(str(tiny_f32))
    ref, _ = load_model(str(tiny_f32))
    rs = _with_old_logprobs(policy, [_rollout(30, 1.0, g.hparams.n_vocab), _rollout(31, -1.0, g.hparams.n_vocab)])
    batch = collate(rs)
    with torch.no_grad():
        ref_lp, _ = sequence_logprobs(ref, batch)
    g0 = _grads(policy, batch)
    g1 = _grads(policy, batch, ref_logp=ref_lp, kl_beta=0.5)
    for n in g0:  # d k3 / d logp = 1 - exp(ref - logp) = 0 at equality: the KL term adds no gradient
        assert torch.equal(g0[n], g1[n]), n
    # the loss's own KL: k3 on the loss tokens only (0 where mask = 0), added as beta x k3, reported as is
    lp, _ = sequence_logprobs(policy, batch)
    other = ref_lp + 0.3 * torch.randn(ref_lp.shape, generator=torch.Generator().manual_seed(0))
    with_kl, stats = grpo_token_loss(lp, batch.old_logprobs, batch.advantages, batch.mask, ref_logp=other, kl_beta=0.5)
    without, stats0 = grpo_token_loss(lp, batch.old_logprobs, batch.advantages, batch.mask, ref_logp=other, kl_beta=0.0)
    k3 = kl_k3(lp, other) * batch.mask
    torch.testing.assert_close(stats["kl"], k3.detach())
    torch.testing.assert_close(stats0["kl"], k3.detach())  # a metric when beta is 0
    torch.testing.assert_close(with_kl - without, 0.5 * k3)
    assert float(stats["kl"][batch.mask == 0].abs().sum()) == 0.0 and bool((stats["kl"][batch.mask > 0] > 0).all())
    m = train(Backend(policy, ref), rs, make_cfg(lr=1e-3, kl_beta=0.5))
    assert m["kl"] == 0.0
    # after the update the policy differs: a second step sees a positive KL
    m2 = train(Backend(policy, ref), rs, make_cfg(lr=1e-3, kl_beta=0.5))
    assert m2["kl"] > 0.0


# ---- experience format, advantages, CLI --------------------------------------------------------
def test_experience_validation():
    ok = {"prompt_tokens": [1, 2], "tokens": [3, 4], "mask": [1, 0], "old_logprobs": [-0.5, 0.0], "advantage": 1.0}
    assert parse_rollout(ok).mask == [1, 0]
    for bad, msg in [
        ({**ok, "mask": [1]}, "mask has"),
        ({**ok, "mask": [1, 2]}, "0 or 1"),
        ({**ok, "old_logprobs": [0.5, 0.0]}, "<= 0"),
        ({**ok, "old_logprobs": [-0.5]}, "old_logprobs has"),
        ({k: v for k, v in ok.items() if k != "tokens"}, "missing field"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_rollout(bad)


def test_cli_step_end_to_end(tiny_f32, tmp_path):
    model, g = load_model(str(tiny_f32))
    rs = _with_old_logprobs(model, [_rollout(40 + i, [1.0, -1.0, 0.5, -0.5][i], g.hparams.n_vocab) for i in range(4)])
    exp = tmp_path / "step-0001.jsonl"
    with open(exp, "w") as fh:
        for i, r in enumerate(rs):
            fh.write(
                json.dumps(
                    {
                        "prompt_tokens": r.prompt_tokens,
                        "tokens": r.tokens,
                        "mask": r.mask,
                        "old_logprobs": r.old_logprobs,
                        "advantage": r.advantage,
                        "reward": r.reward,
                        "components": {"format": 1, "em": 0, "exec": 1, "entity": 0.5, "exploration": 0.2},
                        "truncated": i == 3,
                        "interactions": 2,
                        "question_id": f"q{i // 2}",
                    }
                )
                + "\n"
            )
    assert len(read_experience(str(exp))) == 4
    out, metrics, opt_state = tmp_path / "out.gguf", tmp_path / "m.json", tmp_path / "adam.pt"
    common = dict(metrics=metrics, optimizer_state=opt_state, out=out, ref=tiny_f32, lr=1e-3, kl_beta=0.01, micro_batch=2, epochs=2, mask_truncated=True)
    r = run_step(write_request(tmp_path / "req.json", make_request(tiny_f32, exp, **common)))
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout.strip().splitlines()[-1])
    saved = json.loads(metrics.read_text())
    assert printed == saved
    for key in ("loss", "kl", "clip_frac", "grad_norm", "ratio_mean", "entropy", "optimizer_steps"):
        assert saved[key] is not None, key
    assert saved["optimizer_steps"] == 2 and saved["truncated"] == 1 and opt_state.exists()
    new, g2 = load_model(str(out))
    assert [f.value for f in g2.fields] == [f.value for f in g.fields]
    diff = max((a - b).abs().max().item() for a, b in zip(new.parameters(), model.parameters(), strict=True))
    assert diff > 0
    # a second invocation resumes the AdamW moments
    r = run_step(write_request(tmp_path / "req2.json", make_request(out, exp, **common)))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["optimizer_resumed"] is True
    # bad input: a clear error, exit code 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt_tokens": [1], "tokens": [99999], "mask": [1], "advantage": 1}) + "\n")
    r = run_step(write_request(tmp_path / "req3.json", make_request(tiny_f32, bad, **common)))
    assert r.returncode != 0 and "vocabulary" in (r.stderr + r.stdout)
    # a request that misses a field, or has one the schema does not know, is refused before anything runs
    req = make_request(tiny_f32, exp, **common)
    del req["train"]["klBeta"]
    r = run_step(write_request(tmp_path / "req4.json", req))
    assert r.returncode == 2 and "klBeta" in r.stderr
    req = make_request(tiny_f32, exp, **common)
    req["train"]["advantage"] = "group"
    r = run_step(write_request(tmp_path / "req5.json", req))
    assert r.returncode == 2 and "advantage" in r.stderr


def test_bf16_autocast_keeps_float32_master_weights(tiny):
    """--dtype bf16: the forward runs under autocast, weights and AdamW stay float32, so a
    2e-6 learning rate still moves them (a bf16 weight would swallow such an update)."""
    model, V = tiny
    pos, neg = _rollout(50, +1.0, V), _rollout(51, -1.0, V)
    before = [p.detach().clone() for p in model.parameters()]
    m = train(Backend(model), [pos, neg], make_cfg(lr=2e-6, compute_dtype=torch.bfloat16))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    moved = sum(int(torch.count_nonzero(p.detach() != b)) for p, b in zip(model.parameters(), before, strict=True))
    assert moved > 0 and math.isfinite(m["loss"]) and m["grad_norm"] > 0


# ---- prefix-shared rows --------------------------------------------------------------------------
def _group(seed: int, n: int, n_vocab: int, prompt_len: int = 9):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, n_vocab - 3, (prompt_len,), generator=g).tolist()
    out = []
    for i in range(n):
        tokens = torch.randint(0, n_vocab - 3, (6 + 3 * i,), generator=g).tolist()
        mask = [0 if 2 <= j < 4 else 1 for j in range(len(tokens))]
        out.append(Rollout(list(prompt), tokens, mask, None, (-1) ** i * (i + 1) / 2, reward=float(i), question_id=seed))
    return out


def test_shared_prefix_rows_give_the_same_gradient_and_metrics_as_one_row_per_rollout(tiny_f32):
    results = []
    for share in (False, True):
        model, g = load_model(str(tiny_f32))
        ref, _ = load_model(str(tiny_f32))
        rs = _group(40, 3, g.hparams.n_vocab) + _group(41, 2, g.hparams.n_vocab, prompt_len=5)
        rs = _with_old_logprobs(model, rs)
        cfg = make_cfg(lr=0.0, micro_batch=2, max_grad_norm=0.0, kl_beta=0.1, share_prefix=share, pack_tokens=40)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        m = train(Backend(model, ref), rs, cfg, optimizer=opt)
        results.append((m, {n: p.grad.clone() for n, p in model.named_parameters()}))
    (m0, g0), (m1, g1) = results
    assert not m0["shared_prefix"] and m1["shared_prefix"]
    assert m1["computed_tokens"] < m0["computed_tokens"]  # the prompt is computed once per row
    for n in g0:
        torch.testing.assert_close(g0[n], g1[n], rtol=1e-4, atol=2e-6)
    for k in ("loss", "pg_loss", "nll", "kl", "entropy", "ratio_mean", "old_logprob_abs_diff"):
        assert m1[k] == pytest.approx(m0[k], rel=1e-4, abs=1e-6), k


def test_pack_rollouts_places_each_response_token_where_it_is_predicted():
    rs = _group(50, 2, 50, prompt_len=4)
    rs[0].old_logprobs = [-(k + 1) / 10 for k in range(len(rs[0].tokens))]
    (b,) = pack_rollouts(rs, pack_tokens=1000)
    assert int(b.seg.max()) == 2 and b.real_tokens == 3 + (1 + 6) + (1 + 9)
    assert b.seg[0, :3].tolist() == [0, 0, 0] and b.seg[0, 3:10].tolist() == [1] * 7
    # response token k of rollout 0 is predicted at its segment start + k (the last prompt token is at the start)
    assert b.targets[0, 3:9].tolist() == rs[0].tokens
    assert b.mask[0, 3:9].tolist() == [float(m) for m in rs[0].mask]
    assert b.old_logprobs[0, 3:9].tolist() == pytest.approx([x if m else 0.0 for x, m in zip(rs[0].old_logprobs, rs[0].mask, strict=True)])
    assert b.advantages[0, 3:9].tolist() == [rs[0].advantage] * 6
    assert b.pos[0, 10:].tolist() == list(range(3, 3 + 10))
    # a row limit splits the group; each row keeps its own copy of the prefix
    assert len(pack_rollouts(rs, pack_tokens=12)) == 2

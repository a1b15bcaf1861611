"""TRL as the reference: reex's GRPO loss and gradient equal TRL 0.16.1's ``GRPOTrainer.compute_loss``.

One fixed batch -- prompt ids, completion ids, completion mask (1s then padding, TRL's layout: its
completion mask is also the attention mask, so it cannot express reex's mask-0 executor tokens in the
middle of a response), advantages, old per-token log-probs and reference log-probs -- scored by one
tiny random Llama with a LoRA adapter (peft). Settings matched on both sides: clip epsilon low/high
(TRL ``epsilon``/``epsilon_high``; reex ``clip``/``clip_high``), the k3 KL weight (``beta``/``kl_beta``),
the temperature, and the aggregation: TRL 0.16.1 divides the masked sum of per-token losses by the
batch's loss-token count, which is reex's ``loss_agg="token-mean"``. TRL uses the given old log-probs
only when ``num_iterations > 1`` (else the detached current ones), so it is set to 2.

Compared with TRL: ``loss.micro_batch_loss`` on one batch (the function the loop calls), and the
gradient the one loop (``train.train``) accumulates over micro-batches before its optimizer step,
through the plain backend and the HF one. Perturbing one side's clip, beta, temperature or
aggregation must break the equality. Runs with the HF venv (scripts/install-hf-deps.sh; `npm run
test:learner-hf`); skipped where trl, transformers or peft is not importable.
"""

from __future__ import annotations

import os

import pytest
import torch

SKIP = "trl/transformers/peft not importable: TRL reference check not run (bash scripts/install-hf-deps.sh; npm run test:learner-hf)"
for _mod in ("transformers", "peft", "datasets", "trl"):
    pytest.importorskip(_mod, reason=SKIP)

from conftest import make_cfg  # noqa: E402
from reex_learner.grpo import Rollout, collate, sequence_logprobs  # noqa: E402
from reex_learner.hf_lora import AdapterDisabledView, HFBackend, LogitsView  # noqa: E402
from reex_learner.loss import agg_denominator, micro_batch_loss  # noqa: E402
from reex_learner.train import Backend, train  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CLIP, CLIP_HIGH, BETA, TEMP = 0.2, 0.28, 0.04, 0.7
P, C, VOCAB = 5, 7, 64
LENGTHS = [7, 5, 3, 6]  # completion tokens per row (then padding)
ADV = [1.0, -0.5, 0.8, -1.2]
RTOL = 1e-5


def _policy():
    import peft
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    base = transformers.LlamaForCausalLM(cfg)
    model = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0, task_type="CAUSAL_LM"))
    with torch.no_grad():  # a non-zero B: the adapter changes the model and A gets a gradient too
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape) * 0.2)
    return model


def _trainer(model, tmp_path):
    from datasets import Dataset
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    tok = Tokenizer(WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t1"))
    tok.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="t0", eos_token="t2", unk_token="t1", padding_side="left")
    args = GRPOConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        per_device_train_batch_size=len(LENGTHS),
        num_generations=2,
        num_iterations=2,
        max_completion_length=C,
        epsilon=CLIP,
        epsilon_high=CLIP_HIGH,
        beta=BETA,
        temperature=TEMP,
    )
    data = Dataset.from_dict({"prompt": ["t3 t4 t5", "t6 t7 t8"]})
    return GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=args, train_dataset=data, processing_class=tokenizer)


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


class GradRecorder(torch.optim.Optimizer):
    """An optimizer whose step records the accumulated gradients and changes nothing."""

    def __init__(self, named):
        self.names = {id(p): n for n, p in named}
        super().__init__([p for _, p in named], {"lr": 0.0})
        self.grads: dict[str, torch.Tensor] = {}

    def step(self, closure=None):
        self.grads = {self.names[id(p)]: p.grad.detach().clone() for g in self.param_groups for p in g["params"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model = _policy()
    g = torch.Generator().manual_seed(7)
    prompt = torch.randint(3, VOCAB, (len(LENGTHS), P), generator=g)
    comp = torch.zeros(len(LENGTHS), C, dtype=torch.long)  # pad id 0 after each completion
    cmask = torch.zeros(len(LENGTHS), C)
    for i, n in enumerate(LENGTHS):
        comp[i, :n] = torch.randint(3, VOCAB, (n,), generator=g)
        cmask[i, :n] = 1.0
    # current log-probs (through reex's scoring), then old ones off by up to +-0.6: ratios in ~[0.55, 1.8]
    probe = collate([Rollout(prompt[i].tolist(), comp[i, :n].tolist(), [1] * n, [0.0] * n, ADV[i]) for i, n in enumerate(LENGTHS)])
    with torch.no_grad():
        now, _ = sequence_logprobs(LogitsView(model), probe, TEMP)
        ref, _ = sequence_logprobs(AdapterDisabledView(model), probe, TEMP)
    cols = slice(P - 1, P - 1 + C)  # reex's target columns of the completion tokens
    old = ((now[:, cols] + (torch.rand(len(LENGTHS), C, generator=g) - 0.5) * 1.2).clamp(max=-1e-3)) * cmask
    rollouts = [Rollout(prompt[i].tolist(), comp[i, :n].tolist(), [1] * n, old[i, :n].tolist(), ADV[i]) for i, n in enumerate(LENGTHS)]
    inputs = {  # the layout of TRL 0.16.1's _generate_and_score_completions
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": comp,
        "completion_mask": cmask.long(),
        "old_per_token_logps": old,
        "ref_per_token_logps": ref[:, cols] * cmask,
        "advantages": torch.tensor(ADV),
    }
    trainer = _trainer(model, tmp_path_factory.mktemp("trl"))
    return model, trainer, inputs, rollouts


def _trl_loss_and_grads(setup, **override):
    model, trainer, inputs, _ = setup
    saved = {k: getattr(trainer, k) for k in override}
    try:
        for k, v in override.items():
            setattr(trainer, k, v)
        model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        return float(loss), _grads(model)
    finally:
        for k, v in saved.items():
            setattr(trainer, k, v)


def _reex_loss_and_grads(setup, cfg):
    model, _, _, rollouts = setup
    b = collate(rollouts)
    model.zero_grad(set_to_none=True)
    lp, _ = sequence_logprobs(LogitsView(model), b, cfg.temperature)
    with torch.no_grad():
        ref_lp, _ = sequence_logprobs(AdapterDisabledView(model), b, cfg.temperature)
    loss, stats = micro_batch_loss(cfg, lp, b, agg_denominator([b.mask], cfg.loss_agg), ref_lp)
    loss.backward()
    return float(loss), _grads(model), stats


def _cfg(**kw):
    base = dict(clip=CLIP, clip_high=CLIP_HIGH, kl_beta=BETA, temperature=TEMP, loss_agg="token-mean", max_grad_norm=0.0, micro_batch=len(LENGTHS))
    return make_cfg(**{**base, **kw})


def _max_rel(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    scale = max(float(v.abs().max()) for v in b.values())
    return max(float((a[k] - b[k]).abs().max()) for k in b) / scale


def test_the_loss_and_gradient_equal_trls(setup):
    trl_loss, trl_grads = _trl_loss_and_grads(setup)
    loss, grads, stats = _reex_loss_and_grads(setup, _cfg())
    ratio, adv = stats["ratio"], collate(setup[3]).advantages.unsqueeze(-1)
    assert int(((adv > 0) & (ratio > 1 + CLIP_HIGH)).sum()) >= 2 and int(((adv < 0) & (ratio > 0) & (ratio < 1 - CLIP)).sum()) >= 2  # both clips bind
    assert 0 < float(stats["clipped"].sum()) < sum(LENGTHS)
    assert float(stats["kl"].sum()) > 0  # and the KL term
    assert loss == pytest.approx(trl_loss, rel=RTOL)
    assert set(grads) == set(trl_grads) and any("lora_A" in k for k in grads)
    err = _max_rel(grads, trl_grads)
    print(f"TRL reference: loss {loss:.9g} vs {trl_loss:.9g} (rel {abs(loss - trl_loss) / abs(trl_loss):.2e}); grad max rel diff {err:.2e}")
    assert err < RTOL


@pytest.mark.parametrize("loop", ["plain", "hf"])
def test_the_loops_accumulate_trls_gradient(setup, loop):
    """Micro-batches of 1 and 3 rows, accumulated up to the optimizer step: still TRL's full-batch gradient."""
    model = setup[0]
    _, trl_grads = _trl_loss_and_grads(setup)
    for micro in (1, 3):
        opt = GradRecorder([(n, p) for n, p in model.named_parameters() if p.requires_grad])
        rollouts = [Rollout(r.prompt_tokens, r.tokens, r.mask, list(r.old_logprobs), r.advantage) for r in setup[3]]
        backend = Backend(LogitsView(model), AdapterDisabledView(model)) if loop == "plain" else HFBackend(model, with_ref=True)
        train(backend, rollouts, _cfg(micro_batch=micro), optimizer=opt)
        err = _max_rel(opt.grads, trl_grads)
        print(f"TRL reference: {loop} micro-batch {micro}: grad max rel diff {err:.2e}")
        assert err < RTOL, micro


@pytest.mark.parametrize(
    "side,change",
    [
        ("trl", dict(epsilon_high=0.35)),
        ("trl", dict(epsilon_low=0.3)),
        ("trl", dict(beta=0.08)),
        ("trl", dict(temperature=1.0)),
        ("reex", dict(clip_high=0.35)),
        ("reex", dict(clip=0.3)),
        ("reex", dict(kl_beta=0.08)),
        ("reex", dict(temperature=1.0)),
        ("reex", dict(loss_agg="seq-mean-token-mean")),
    ],
)
def test_a_formula_change_on_one_side_breaks_the_equality(setup, side, change):
    if side == "trl":
        trl_loss, trl_grads = _trl_loss_and_grads(setup, **change)
        loss, grads, _ = _reex_loss_and_grads(setup, _cfg())
    else:
        trl_loss, trl_grads = _trl_loss_and_grads(setup)
        loss, grads, _ = _reex_loss_and_grads(setup, _cfg(**change))
    print(f"TRL reference: {side} {change}: loss rel diff {abs(loss - trl_loss) / abs(trl_loss):.2e}, grad max rel diff {_max_rel(grads, trl_grads):.2e}")
    # at least 100x the tolerance the equality test allows
    assert abs(loss - trl_loss) > 100 * RTOL * abs(trl_loss) or _max_rel(grads, trl_grads) > 100 * RTOL


def test_trl_version_is_the_pinned_one():
    import trl

    assert trl.__version__ == "0.16.1", "the compute_loss layout and token-mean aggregation checked here are TRL 0.16.1's"

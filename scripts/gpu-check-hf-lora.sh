#!/usr/bin/env bash
# GPU check of the learner's path (b): `python3 -m reex_learner step --request FILE` with an hf request
# (transformers + peft LoRA; docs/learner.md).
#
# For a machine with PyTorch (CUDA), transformers and peft, and no network and no Node. Builds a
# RANDOMLY INITIALISED tiny Llama (2 layers, hidden 128, 512 token ids, no tokenizer: token ids
# only), writes a synthetic experience JSONL, and runs:
#   1. a step on the GPU (bf16) with a fresh adapter        -> loss / KL / grad-norm; KL must be 0
#   2. a step from that adapter (lora.in)                   -> adapter changed again; KL > 0
#   3. an f32 re-scoring: the advantage-weighted log-prob went up, the adapter-disabled model is the base
#   4. DDP: torch.distributed.run with 2 CPU ranks (gloo) vs one process -> same metrics and adapter
#      (and 2 GPU ranks with NCCL when the machine has 2+ GPUs)
#   5. with --convert-script PATH (llama.cpp's convert_lora_to_gguf.py): hf.ggufOut, and the GGUF's
#      LoRA tensors are compared with the adapter's
#
# usage: scripts/gpu-check-hf-lora.sh [--convert-script PATH] [--device cuda|cpu] [--work DIR] [--no-ddp]
#        PYTHON=/path/to/python3 overrides the interpreter.
# Exit code 0 = every check passed; the last line says PASS or FAIL.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
DEVICE=cuda
CONVERT=""
WORK=""
DDP=1
while [ $# -gt 0 ]; do
  case "$1" in
    --convert-script) CONVERT="$2"; shift 2 ;;
    --device) DEVICE="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --no-ddp) DDP=0; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
WORK="${WORK:-$(mktemp -d /tmp/reex-hf-lora-check.XXXXXX)}"
mkdir -p "$WORK"
export PYTHONPATH="$ROOT/src/training/learner${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
DTYPE=bf16
[ "$DEVICE" = cpu ] && DTYPE=f32
echo "== work dir: $WORK"

fail() { echo "FAIL: $*"; exit 1; }

"$PY" - <<'PY' || fail "python environment"
import sys, torch
try:
    import transformers, peft
except ImportError as e:
    sys.exit(f"transformers/peft not importable: {e}")
print(f"python {sys.version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}  peft {peft.__version__}")
print(f"cuda available: {torch.cuda.is_available()}  devices: {torch.cuda.device_count()}"
      + (f"  ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else ""))
PY

echo "== 0. random tiny Llama + synthetic experience"
"$PY" - "$WORK" <<'PY'
import json, os, sys, torch, transformers
work = sys.argv[1]
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                               rms_norm_eps=1e-5, tie_word_embeddings=False)
transformers.LlamaForCausalLM(cfg).save_pretrained(os.path.join(work, "base"), safe_serialization=True)
g = torch.Generator().manual_seed(1)
with open(os.path.join(work, "step.jsonl"), "w") as fh:
    for q in range(6):                       # 6 questions x 4 rollouts, group advantages of rewards 0/1/0/1: -1/+1/-1/+1
        prompt = torch.randint(0, 512, (24,), generator=g).tolist()
        for k in range(4):
            T = int(torch.randint(12, 40, (1,), generator=g))
            tokens = torch.randint(0, 512, (T,), generator=g).tolist()
            mask = [0 if 5 <= j < 9 else 1 for j in range(T)]    # tokens 5..8: an injected <result>
            fh.write(json.dumps({"prompt_tokens": prompt, "tokens": tokens, "mask": mask, "advantage": 2.0 * (k % 2) - 1.0,
                                 "reward": float(k % 2), "question_id": f"q{q}", "interactions": 1}) + "\n")
print("base:", os.path.join(work, "base"), " experience: 24 rollouts")
PY

# request NAME JSON: writes $WORK/NAME.request.json, this check's hf request (every field: the learner has no
# defaults) with JSON's keys merged in (one level deep: {"train": {"miniBatch": 12}} keeps the other train fields)
request() {
  "$PY" - "$WORK" "$1" "$2" "$DEVICE" "$DTYPE" <<'PY'
import json, os, sys
work, name, over, device, dtype = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
req = {"version": 1, "backend": "hf", "mode": "grpo",
       "paths": {"model": os.path.join(work, "base"), "experience": os.path.join(work, "step.jsonl"), "out": None, "ref": None,
                 "master": None, "metrics": os.path.join(work, f"{name}.json"), "optimizerState": os.path.join(work, f"{name}.adam.pt")},
       "lora": {"in": None, "out": os.path.join(work, name), "rank": 8, "alpha": 16.0, "targets": "all", "outType": "f32"},
       "runtime": {"device": device, "dtype": dtype, "threads": 0, "gradCheckpoint": False, "attn": "sdpa", "outType": "keep"},
       "train": {"lr": 5e-3, "clip": 0.2, "clipHigh": None, "klBeta": 0.1, "temperature": 1.0, "lossAgg": "token-mean", "epochs": 1,
                 "microBatch": 4, "miniBatch": 0, "maxGradNorm": 1.0, "weightDecay": 0.0, "warmupSteps": 0, "maxOldLogprobDiff": 0.0,
                 "splitHalf": 0, "maskTruncated": False, "sharePrefix": False, "packTokens": 2048, "shuffle": False, "seed": 0,
                 "adamBeta2": 0.999, "decayNorms": True, "schedule": "constant", "minLrRatio": 1.0},
       "hf": {"ggufOut": None, "ggufOutType": "f32", "convertScript": None, "trustRemoteCode": False}, "run": None}
for k, v in over.items():
    req[k] = {**req[k], **v} if isinstance(v, dict) and isinstance(req.get(k), dict) else v
path = os.path.join(work, f"{name}.request.json")
json.dump(req, open(path, "w"), indent=1)
print(path)
PY
}
step() { "$PY" -m reex_learner step --request "$(request "$1" "$2")" >/dev/null; }

echo "== 1. a step on $DEVICE ($DTYPE), fresh adapter, one optimizer step"
step m1 '{"lora": {"out": "'"$WORK/a1"'"}, "paths": {"optimizerState": "'"$WORK/adam.pt"'"}}' || fail "step 1"
echo "== 2. a step from that adapter (lora.in, AdamW state resumed), two optimizer steps"
step m2 '{"lora": {"in": "'"$WORK/a1"'", "out": "'"$WORK/a2"'"}, "paths": {"optimizerState": "'"$WORK/adam.pt"'"}, "train": {"miniBatch": 12}}' \
  || fail "step 2"

echo "== 3. checks"
"$PY" - "$WORK" "$DEVICE" <<'PY' || fail "single-device checks"
import json, math, os, sys, torch
from safetensors.torch import load_file
from reex_learner import hf_lora
from reex_learner.grpo import collate, read_experience, sequence_logprobs
work, device = sys.argv[1], sys.argv[2]
m1, m2 = (json.load(open(os.path.join(work, f"m{i}.json"))) for i in (1, 2))
for name, m in (("step 1", m1), ("step 2", m2)):
    print(f"{name}: loss {m['loss']:+.5f}  pg_loss {m['pg_loss']:+.5f}  kl {m['kl']:.3e}  grad_norm {m['grad_norm']:.4f}  "
          f"clip_frac {m['clip_frac']:.3f}  ratio [{m['ratio_min']:.4f}, {m['ratio_max']:.4f}]  entropy {m['entropy']:.3f}  "
          f"steps {m['optimizer_steps']}  trainable {m['trainable_params']}  {m['device']} {m['dtype']}  {m['seconds']:.2f}s")
    assert all(math.isfinite(m[k]) for k in ("loss", "kl", "grad_norm", "entropy")), f"{name}: non-finite metric"
    assert m["grad_norm"] > 0, f"{name}: zero gradient"
# a fresh adapter has lora_B = 0: the policy is the base, so KL ~ 0 and the on-policy ratio ~ 1 (exactly
# on CPU f32; a different attention kernel with/without grad may leave bf16 rounding on the GPU)
assert m1["kl"] < 1e-4, f"step 1 starts from a fresh adapter: KL must be ~0, got {m1['kl']}"
assert abs(m1["ratio_mean"] - 1) < 1e-2, m1["ratio_mean"]
assert m2["kl"] > m1["kl"] and m2["kl"] > 0, "step 2: KL to the base must be > 0"
assert m2["optimizer_steps"] == 2 and m2["optimizer_resumed"], "AdamW state not resumed"
a1, a2 = (load_file(os.path.join(work, d, "adapter_model.safetensors")) for d in ("a1", "a2"))
nb = sum(1 for k, v in a1.items() if ".lora_B." in k and float(v.abs().max()) > 0)
nchg = sum(1 for k in a1 if not torch.equal(a1[k], a2[k]))
print(f"adapter: {len(a1)} tensors; after step 1, {nb} lora_B tensors non-zero; step 2 changed {nchg}")
assert nb > 0 and nchg > 0, "the adapter did not change"
assert os.path.exists(os.path.join(work, "adam.pt"))

# f32 re-scoring on the same device: base (adapter disabled) vs adapter a2
rs = read_experience(os.path.join(work, "step.jsonl"))
b = collate(rs, device=device)
adv = b.advantages.unsqueeze(-1)
def objective(view):
    with torch.no_grad():
        lp, _ = sequence_logprobs(view, b)
    return float((adv * lp * b.mask).sum() / b.mask.sum())
pol = hf_lora.load_policy(os.path.join(work, "base"), os.path.join(work, "a2"), hf_lora.LoraSettings(8, 16.0, ()), torch.float32, device)
pol.eval()
o_base, o_pol = objective(hf_lora.AdapterDisabledView(pol)), objective(hf_lora.LogitsView(pol))
import transformers
plain = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, "base"), **{hf_lora._dtype_kwarg(transformers): torch.float32}).to(device)
o_plain = objective(hf_lora.LogitsView(plain))
print(f"advantage-weighted mean log-prob: base {o_base:+.6f} -> after 2 steps {o_pol:+.6f} (plain base model {o_plain:+.6f})")
assert abs(o_base - o_plain) < 1e-5, "disable_adapter() is not the base model"
assert o_pol > o_base, "the GRPO steps did not raise the advantage-weighted log-probability"
print("single-device checks OK")
PY

if [ "$DDP" = 1 ]; then
  echo "== 4. DDP: 2 CPU ranks (gloo) vs 1 process, f32"
  CPU='"runtime": {"device": "cpu", "dtype": "f32", "threads": 2}, "train": {"microBatch": 2, "miniBatch": 12}'
  step single '{'"$CPU"', "lora": {"out": "'"$WORK/single"'"}}' || fail "single-process CPU run"
  "$PY" -m torch.distributed.run --standalone --nproc_per_node 2 -m reex_learner step \
    --request "$(request ddp '{'"$CPU"', "lora": {"out": "'"$WORK/ddp"'"}}')" >/dev/null || fail "torch.distributed.run (gloo)"
  "$PY" - "$WORK" <<'PY' || fail "DDP (gloo) differs from the single process"
import json, os, sys, torch
from safetensors.torch import load_file
work = sys.argv[1]
s, d = (json.load(open(os.path.join(work, f))) for f in ("single.json", "ddp.json"))
assert d["world_size"] == 2 and s["world_size"] == 1
for k in ("loss", "pg_loss", "kl", "grad_norm", "nll", "entropy", "loss_tokens_per_epoch", "optimizer_steps"):
    print(f"  {k:22s} single {s[k]:+.8e}   ddp {d[k]:+.8e}")
    assert abs(s[k] - d[k]) <= 1e-4 * max(1.0, abs(s[k])), k
a, b = (load_file(os.path.join(work, x, "adapter_model.safetensors")) for x in ("single", "ddp"))
lr = 5e-3
worst, bad, n = 0.0, 0, 0
for k in a:
    diff = (a[k] - b[k]).abs()
    worst, bad, n = max(worst, float(diff.max())), bad + int((diff > 1e-2 * lr).sum()), n + diff.numel()
print(f"  adapter max |diff| {worst:.2e} (lr {lr}); elements off by > 1% of lr: {bad}/{n}")
assert bad <= max(1, n // 1000), "adapters differ"   # Adam's first step ~ lr*sign(g): a g within rounding of 0 may flip
print("DDP (gloo) OK")
PY
  if [ "$DEVICE" != cpu ] && [ "$("$PY" -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
    echo "== 4b. DDP: 2 GPU ranks (NCCL)"
    "$PY" -m torch.distributed.run --standalone --nproc_per_node 2 -m reex_learner step \
      --request "$(request ddp-gpu '{"train": {"microBatch": 2, "miniBatch": 12}, "lora": {"out": "'"$WORK/ddp-gpu"'"}}')" >/dev/null \
      || fail "torch.distributed.run (NCCL)"
    "$PY" -c "import json; m = json.load(open('$WORK/ddp-gpu.json')); print('  NCCL: world', m['world_size'], 'loss', m['loss'], 'kl', m['kl'], 'grad_norm', m['grad_norm']); assert m['world_size'] == 2" \
      || fail "DDP (NCCL)"
  else
    echo "   (fewer than 2 GPUs: NCCL run skipped)"
  fi
fi

if [ -n "$CONVERT" ]; then
  echo "== 5. GGUF LoRA via $CONVERT"
  step m3 '{"lora": {"out": "'"$WORK/a3"'"}, "hf": {"ggufOut": "'"$WORK/a3.gguf"'", "convertScript": "'"$CONVERT"'"}}' \
    || fail "step with hf.ggufOut"
  "$PY" - "$WORK" "$CONVERT" <<'PY' || fail "GGUF LoRA contents"
import os, sys, numpy as np
from safetensors.torch import load_file
work, script = sys.argv[1], sys.argv[2]
llama_dir = os.path.dirname(os.path.abspath(script)) if not os.path.isdir(script) else script
sys.path.insert(0, os.path.join(llama_dir, "gguf-py"))
import gguf
r = gguf.GGUFReader(os.path.join(work, "a3.gguf"))
def field(name):
    f = r.fields[name]
    v = f.parts[f.data[0]]
    return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0]
t = {x.name: x for x in r.tensors}
print(f"  general.type {field('general.type')}  adapter.type {field('adapter.type')}  alpha {field('adapter.lora.alpha')}  tensors {len(t)}")
assert field("general.type") == "adapter" and field("adapter.type") == "lora" and float(field("adapter.lora.alpha")) == 16.0
ad = load_file(os.path.join(work, "a3", "adapter_model.safetensors"))
for layer in (0, 1):
    for hf, gg in (("self_attn.v_proj", "attn_v"), ("mlp.down_proj", "ffn_down")):
        for ab in ("A", "B"):
            want = ad[f"base_model.model.model.layers.{layer}.{hf}.lora_{ab}.weight"].float().numpy()
            got = np.asarray(t[f"blk.{layer}.{gg}.weight.lora_{ab.lower()}"].data, dtype=np.float32).reshape(want.shape)
            assert np.array_equal(got, want), (layer, hf, ab)
assert "blk.0.attn_q.weight.lora_b" in t and "blk.1.attn_k.weight.lora_a" in t
print("  GGUF LoRA tensors match the adapter (v/down exact; q/k permuted by llama.cpp's converter)")
PY
else
  echo "== 5. GGUF conversion skipped (pass --convert-script .../llama.cpp/convert_lora_to_gguf.py)"
fi

echo "PASS (work dir $WORK)"

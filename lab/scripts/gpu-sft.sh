#!/usr/bin/env bash
# One SFT stage of the starter pipeline on a CUDA machine with PyTorch and no Node (the pipeline's
# --prepare-only leaves <work>/sft.gguf and <work>/sft_tokens.jsonl; bring the result back with
# make-starter-model's --import-sft/--import-sft-log, docs in models/MODEL_CARD.md).
#
# usage: lab/scripts/gpu-sft.sh pack WORK DEST       (here: DEST/start-zero.gguf.xz, DEST/sft_tokens.jsonl.gz, DEST/sft.request.json)
#        lab/scripts/gpu-sft.sh --model M.gguf[.xz] --data TOKENS.jsonl[.gz|.xz] --out DIR [--request R.json] [--minutes 8] [--part-size 15M] [-- JSON]
#
# Runs an SFT run of the learner (`python3 -m reex_learner step --request FILE`) from the request `pack` wrote (Node's
# lab/starter/train.ts sftRequest: runtime cuda, attention auto, bf16, the starter's defaults; default R.json: the
# sft.request.json beside M) with its paths set here and JSON's keys merged in one level deep
# ('{"train": {"lr": 8e-4}, "run": {"reinit": 0.02}}'), writes DIR/sft-gpu.gguf and DIR/sft_gpu_loss.jsonl (its log),
# and splits the GGUF into DIR/sft-gpu.gguf.part-aa, -ab, … of at most --part-size (for transfers
# that cap a file's size), with DIR/sft-gpu.gguf.sha256 to check the reassembled file:
#   cat DIR/sft-gpu.gguf.part-* > sft-gpu.gguf && sha256sum -c DIR/sft-gpu.gguf.sha256
# PYTHON=/path/to/python3 overrides the interpreter; DEVICE=cpu runs it without a GPU (a smoke test).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3}"
if [ "${1:-}" = pack ]; then
  # pack WORK DEST: what travels to the GPU machine, small: the initial model with its weights zeroed (shape,
  # tokenizer and metadata kept; train it with `-- '{"run": {"reinit": 0.02}}'`), xz-compressed, and the records gzipped.
  WORK="${2:?usage: lab/scripts/gpu-sft.sh pack WORK DEST}" DEST="${3:?usage: lab/scripts/gpu-sft.sh pack WORK DEST}"
  mkdir -p "$DEST"
  PYTHONPATH="$ROOT/src/training/learner" "$PY" - "$WORK/sft.gguf" "$DEST/start-zero.gguf" <<'PYEOF'
import sys
from reex_learner.gguf_io import write_gguf
from reex_learner.model import load_model, state_for_gguf
m, g = load_model(sys.argv[1])
for p in m.parameters():
    p.data.zero_()
write_gguf(sys.argv[2], g, state_for_gguf(m), out_type="f16")
PYEOF
  xz -f -T2 "$DEST/start-zero.gguf"
  (cd "$ROOT" && npx tsx -e 'import("./lab/starter/train.ts").then(({ sftRequest }) => {
    const r = sftRequest({ model: "MODEL", data: "DATA", out: "OUT", minutes: 8, device: "cuda", attention: "auto", amp: "bf16", outType: "f16", log: "LOG" });
    process.stdout.write(JSON.stringify(r, null, 2) + "\n");
  })' > "$DEST/sft.request.json")
  gzip -6 -c "$WORK/sft_tokens.jsonl" > "$DEST/sft_tokens.jsonl.gz"
  ls -la "$DEST"
  exit 0
fi
MODEL="" DATA="" OUTDIR="" REQUEST="" MINUTES=8 PART=15M
while [ $# -gt 0 ]; do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --data) DATA="$2"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    --request) REQUEST="$2"; shift 2 ;;
    --minutes) MINUTES="$2"; shift 2 ;;
    --part-size) PART="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "gpu-sft: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$MODEL" ] && [ -n "$DATA" ] && [ -n "$OUTDIR" ] || { echo "gpu-sft: --model, --data and --out are required" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "gpu-sft: $MODEL: no such file" >&2; exit 2; }
[ -f "$DATA" ] || { echo "gpu-sft: $DATA: no such file" >&2; exit 2; }
mkdir -p "$OUTDIR"
REQUEST="${REQUEST:-$(dirname "$MODEL")/sft.request.json}"
[ -f "$REQUEST" ] || { echo "gpu-sft: $REQUEST: no such file (gpu-sft.sh pack writes it)" >&2; exit 2; }
MODEL="$(realpath "$MODEL")" DATA="$(realpath "$DATA")" OUTDIR="$(realpath "$OUTDIR")" REQUEST="$(realpath "$REQUEST")"
if [[ "$MODEL" == *.xz ]]; then
  "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$MODEL" "$OUTDIR/start.gguf"
  MODEL="$OUTDIR/start.gguf"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
cd "$ROOT/src/training/learner"
OVER="${1:-}"
[ -n "$OVER" ] || OVER='{}'
"$PY" - "$REQUEST" "$OUTDIR/sft.request.json" "$MODEL" "$DATA" "$OUTDIR" "$MINUTES" "${DEVICE:-cuda}" "$OVER" <<'PYEOF'
import json, os, sys
src, dst, model, data, out, minutes, device, over = sys.argv[1:]
req = json.load(open(src))
req["paths"].update(model=model, experience=data, out=os.path.join(out, "sft-gpu.gguf"), metrics=os.path.join(out, "sft-gpu.summary.json"))
req["run"].update(minutes=float(minutes), log=os.path.join(out, "sft_gpu_loss.jsonl"))
req["runtime"]["device"] = device
for k, v in json.loads(over).items():
    req[k] = {**req[k], **v} if isinstance(v, dict) and isinstance(req.get(k), dict) else v
json.dump(req, open(dst, "w"), indent=1)
PYEOF
PYTHONUNBUFFERED=1 "$PY" -m reex_learner step --request "$OUTDIR/sft.request.json"
rm -f "$OUTDIR/start.gguf"
cd "$OUTDIR"
sha256sum sft-gpu.gguf > sft-gpu.gguf.sha256
split -b "$PART" sft-gpu.gguf sft-gpu.gguf.part-
rm sft-gpu.gguf
ls -la

#!/usr/bin/env bash
# Extracts llama.cpp's Python tools (gguf-py, convert_lora_to_gguf.py, convert_hf_to_gguf.py) from
# the llama.cpp source bundle that node-llama-cpp ships, into node_modules/.cache/reex-llama.cpp.
# The learner reads and writes GGUF through gguf-py and exports LoRA adapters with the converter.
# Offline; idempotent (skips when already extracted). Run by `npm install` (the prepare script).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
dest=node_modules/.cache/reex-llama.cpp
[ -f "$dest/gguf-py/gguf/__init__.py" ] && exit 0
if [ ! -f "$bundle" ]; then
  echo "extract-llama-py: $bundle not found (is node-llama-cpp installed?); the learner will not find gguf-py" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout "$bundle" "$tmp/repo"
git -C "$tmp/repo" checkout -q HEAD -- gguf-py convert_lora_to_gguf.py convert_hf_to_gguf.py
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.partial" && mkdir "$dest.partial"
mv "$tmp/repo/gguf-py" "$tmp/repo/convert_lora_to_gguf.py" "$tmp/repo/convert_hf_to_gguf.py" "$dest.partial/"
rm -rf "$dest" && mv "$dest.partial" "$dest"
echo "extract-llama-py: gguf-py and the LoRA converter are in $dest"

#!/usr/bin/env bash
# Extracts llama.cpp's Python tools (gguf-py, convert_lora_to_gguf.py, convert_hf_to_gguf.py and, in
# llama.cpp versions that split the converter, the conversion/ package it imports) from
# the llama.cpp source bundle that node-llama-cpp ships, into node_modules/.cache/reex-llama.cpp.
# The learner reads and writes GGUF through gguf-py and exports LoRA adapters with the converter.
# Offline; idempotent (skips when already extracted). Run by `npm install` (the prepare script).
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
dest=node_modules/.cache/reex-llama.cpp
# done when gguf-py is there and so is conversion/ if the converter imports it (extractions made
# before conversion/ was copied lack it)
if [ -f "$dest/gguf-py/gguf/__init__.py" ] && { [ -d "$dest/conversion" ] || ! grep -q '^from conversion' "$dest/convert_lora_to_gguf.py" 2>/dev/null; }; then
  exit 0
fi
if [ ! -f "$bundle" ]; then
  echo "extract-llama-py: $bundle not found (is node-llama-cpp installed?); the learner will not find gguf-py" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout "$bundle" "$tmp/repo"
paths=(gguf-py convert_lora_to_gguf.py convert_hf_to_gguf.py)
[ -n "$(git -C "$tmp/repo" ls-tree --name-only HEAD conversion)" ] && paths+=(conversion)
git -C "$tmp/repo" checkout -q HEAD -- "${paths[@]}"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.partial" && mkdir "$dest.partial"
for p in "${paths[@]}"; do mv "$tmp/repo/$p" "$dest.partial/"; done
rm -rf "$dest" && mv "$dest.partial" "$dest"
echo "extract-llama-py: gguf-py and the LoRA converter are in $dest"

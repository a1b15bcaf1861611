#!/usr/bin/env bash
# Installs the Hugging Face learner path's Python stack (`python3 -m reex_learner hf-step`, the TRL
# reference test) into a virtual environment OUTSIDE the clone, pinned:
#   ${REEX_HF_VENV:-$HOME/.cache/reex/hf-venv}: torch 2.5.1, transformers 4.50.3, peft 0.14.0,
#   trl 0.16.1 (+ their dependencies) and pytest, from the Python package index.
# torch 2.5.1 from PyPI is the CUDA 12 build and pulls ~3 GB of nvidia-* libraries: PyPI has no
# CPU-only torch wheel for Linux (docs/learner.md, "The Hugging Face venv"). pip honours
# PIP_FIND_LINKS (a folder of already-downloaded wheels) and the other PIP_* variables.
# Idempotent: a stamp file in the venv records the pins; when it matches this exits at once.
# Needs a Python 3.11 with a working venv + ensurepip (pyenv's or python.org's; Debian's
# /usr/bin/python3.11 needs the python3.11-venv package): REEX_HF_PYTHON picks it, else the first
# such of python3.11, python3, /usr/bin/python3.11. Exits non-zero with one line on failure.
set -euo pipefail
PINS="torch==2.5.1 transformers==4.50.3 peft==0.14.0 trl==0.16.1 pytest==8.3.5"
VENV=${REEX_HF_VENV:-$HOME/.cache/reex/hf-venv}
STAMP=$VENV/.reex-hf-pins
fail() { echo "install-hf-deps: FAILED: $*" >&2; exit 1; }

if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$PINS" ]; then
  echo "install-hf-deps: present ($PINS): $VENV/bin/python"
  exit 0
fi
t0=$(date +%s)
if ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  made=""
  for py in ${REEX_HF_PYTHON:-} python3.11 python3 /usr/bin/python3.11; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || continue
    if "$py" -m venv "$VENV" >/dev/null 2>&1 && "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
      made=$py
      break
    fi
    rm -rf "$VENV"  # e.g. Debian's python3.11 without python3.11-venv: no ensurepip wheels
  done
  [ -n "$made" ] || fail "no Python 3.11 with a working venv/ensurepip (tried ${REEX_HF_PYTHON:-} python3.11 python3 /usr/bin/python3.11); set REEX_HF_PYTHON"
  echo "install-hf-deps: created $VENV with $made ($("$VENV/bin/python" --version 2>&1))"
fi
echo "install-hf-deps: pip install $PINS${PIP_FIND_LINKS:+ (find-links: $PIP_FIND_LINKS)}"
# shellcheck disable=SC2086 # PINS is a word list
if ! log=$(PIP_ROOT_USER_ACTION=ignore "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet $PINS 2>&1); then
  fail "pip could not install into $VENV (package index unreachable? ~6 GB of disk?): $(echo "$log" | grep -v '^\s*$' | tail -n 1)"
fi
"$VENV/bin/python" -c 'import torch, transformers, peft, trl, pytest' 2>/dev/null || fail "the venv at $VENV does not import torch/transformers/peft/trl/pytest after pip install"
echo "$PINS" >"$STAMP"
echo "install-hf-deps: installed in $(($(date +%s) - t0)) s, $(du -sh "$VENV" 2>/dev/null | cut -f1): $VENV/bin/python"

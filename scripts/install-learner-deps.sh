#!/usr/bin/env bash
# Installs what the Python learner (src/training/learner) and its tests need, when missing:
# Debian's PyTorch (1.13, CPU), numpy, pytest and OpenBLAS (14x faster than the reference BLAS that
# python3-torch pulls in). Idempotent: exits quickly when everything is there. Needs root (or sudo)
# only when something has to be installed. Uses /usr/bin/python3 (Debian's), never pip.
set -euo pipefail
PY=/usr/bin/python3
need=()
"$PY" -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
"$PY" -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy)
"$PY" -c 'import pytest' >/dev/null 2>&1 || need+=(python3-pytest)
dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q "install ok installed" || need+=(libopenblas0-pthread)
if [ ${#need[@]} -eq 0 ]; then
  echo "install-learner-deps: all present ($("$PY" -c 'import torch; print("torch", torch.__version__)'))"
  exit 0
fi
SUDO=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    echo "install-learner-deps: missing ${need[*]}; run as root or: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-learner-deps: installing ${need[*]}"
if ! "${SUDO[@]}" apt-get install -y -qq "${need[@]}" >/dev/null 2>&1; then
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi
"$PY" -c 'import torch, numpy, pytest; print("install-learner-deps: torch", torch.__version__, "numpy", numpy.__version__)'

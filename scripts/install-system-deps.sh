#!/usr/bin/env bash
# Installs the Debian packages reex's test suite uses, when missing (needs root, as in CI):
# chromium (playground browser test), curl (CI smoke), cmake and g++ (llama-server for the remote
# backend's end-to-end test), postgresql (the Postgres source's tests start a real server), bzip2
# (reading data/text2sql/wikisql.json.bz2), and the learner's PyTorch stack. Then the Hugging Face
# path's venv (scripts/install-hf-deps.sh: torch 2.5.1 + transformers/peft/trl from the Python package
# index, ~3 GB download, outside the clone; REEX_HF=0 skips it). Its failure does not fail this
# script: it prints why, and `npm test` then reports the HF path tests as not run.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
command -v bzip2 >/dev/null 2>&1 || need+=(bzip2)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-system-deps: missing ${need[*]}; run as root or install them yourself" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash "$(dirname "$0")/install-learner-deps.sh"
if [ "${REEX_HF:-1}" = 0 ]; then
  echo "install-system-deps: REEX_HF=0: HF venv not installed (bash scripts/install-hf-deps.sh installs it)"
elif ! bash "$(dirname "$0")/install-hf-deps.sh"; then
  echo "install-system-deps: the HF venv was not installed (reason above); the other dependencies are; npm test reports the HF path tests as not run" >&2
fi

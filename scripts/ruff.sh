#!/usr/bin/env bash
# Runs ruff, the Python linter and formatter, pinned, on the Python learner and scripts:
#   bash scripts/ruff.sh check | format [ruff's own arguments]
# The first call installs ruff from the Python package index with `pip install --target` into
# .reex/tools/ruff-<version> (inside the clone, never the system's Python); later calls reuse it.
# REEX_PYTHON picks the interpreter whose pip installs it (default: the first of python3 and
# /usr/bin/python3 that has pip). Settings: ruff.toml.
set -euo pipefail
VERSION=0.17.6
cd "$(dirname "$0")/.."
dir=.reex/tools/ruff-$VERSION
if [ ! -x "$dir/bin/ruff" ]; then
  py=""
  for candidate in ${REEX_PYTHON:-} python3 /usr/bin/python3; do
    if "$candidate" -m pip --version >/dev/null 2>&1; then py=$candidate; break; fi
  done
  if [ -z "$py" ]; then
    echo "ruff.sh: no Python with pip (tried ${REEX_PYTHON:-} python3 /usr/bin/python3); install pip or set REEX_PYTHON" >&2
    exit 1
  fi
  staging=$dir.$$.tmp
  rm -rf "$staging"
  mkdir -p "$(dirname "$dir")"
  echo "ruff.sh: installing ruff==$VERSION with $py -m pip into $dir" >&2
  if ! PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --no-deps --disable-pip-version-check --no-input --quiet --target "$staging" "ruff==$VERSION" >&2; then
    rm -rf "$staging"
    echo "ruff.sh: pip could not install ruff==$VERSION; is the package index reachable?" >&2
    exit 1
  fi
  rm -rf "$dir"
  mv "$staging" "$dir"
fi
case "${1:-}" in
  check | format) ;;
  *) echo "usage: bash scripts/ruff.sh check|format [ruff arguments]" >&2; exit 2 ;;
esac
cmd=$1
shift
exec "$dir/bin/ruff" "$cmd" "$@" src/training/learner scripts

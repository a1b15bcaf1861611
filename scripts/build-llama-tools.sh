#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-batched-bench from the source node-llama-cpp ships
# (node_modules/node-llama-cpp/llama/gitRelease.bundle), once per llama.cpp release, into a cache
# outside the clone: ${REEX_LLAMA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reex/llama-tools-<tag>}.
# Idempotent (a finished build is reused) and safe for concurrent callers (flock); progress goes to
# stderr, and stdout gets the tools directory, whose bin/ holds both executables. No network needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
llama="$root/node_modules/node-llama-cpp/llama"
bundle="$llama/gitRelease.bundle"
info="$llama/llama.cpp.info.json"
[ -f "$bundle" ] && [ -f "$info" ] || { echo "build-llama-tools: $bundle missing; run npm install first" >&2; exit 1; }
tag="$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).tag))' "$info")"
dir="${REEX_LLAMA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reex/llama-tools-$tag}"
targets=(llama-server llama-batched-bench)

done_already() {
  [ -f "$dir/.complete" ] || return 1
  for t in "${targets[@]}"; do [ -x "$dir/bin/$t" ] || return 1; done
}

mkdir -p "$dir"
if done_already; then echo "$dir"; exit 0; fi

exec 9>"$dir/.lock"
if ! flock -n 9; then
  echo "build-llama-tools: another build of $dir is running; waiting for it" >&2
  flock 9
fi
if done_already; then echo "$dir"; exit 0; fi

log() { echo "build-llama-tools: $*" >&2; }
start=$(date +%s)
if [ ! -d "$dir/src/.git" ]; then
  log "cloning llama.cpp $tag from the bundle"
  rm -rf "$dir/src" "$dir/src.partial"
  git -c advice.detachedHead=false clone -q "$bundle" "$dir/src.partial" >&2
  mv "$dir/src.partial" "$dir/src"
fi
# LLAMA_BUILD_TOOLS (on by default for a standalone tree) is what adds tools/batched-bench;
# the UI is neither built (needs npm) nor fetched (needs network), static so bin/ stands alone.
log "configuring (cmake, Release, static, no curl/openssl/UI/tests/examples)"
cmake -S "$dir/src" -B "$dir/build" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
jobs="$(nproc 2>/dev/null || echo 2)"
log "building ${targets[*]} with -j$jobs at nice 10, so tests running alongside keep the CPU (several minutes)"
nice -n 10 cmake --build "$dir/build" --target "${targets[@]}" -j"$jobs" >&2
mkdir -p "$dir/bin"
for t in "${targets[@]}"; do install -m 755 "$dir/build/bin/$t" "$dir/bin/$t"; done
echo "$tag" >"$dir/.complete"
log "done in $(( $(date +%s) - start )) s: $dir/bin"
echo "$dir"

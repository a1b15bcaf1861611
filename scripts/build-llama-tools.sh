#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-batched-bench from the source node-llama-cpp ships
# (node_modules/node-llama-cpp/llama/gitRelease.bundle), once per llama.cpp release and CPU flag
# set, into a cache outside the clone:
#   ${REEX_LLAMA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reex/llama-tools-<tag>-<flags hash>}.
# The build is portable: GGML_NATIVE=OFF with the instruction sets this CPU reports switched on
# explicitly (AVX, AVX2, FMA, F16C, BMI2, AVX-512 F/CD/VL/DQ/BW when all five are there; never AMX),
# because a native build dies with a general protection fault on quantised models on CPUs that
# report AVX-512 and AMX (docs/scale-out.md). The flags are part of the cache key and are written
# to .complete; a cached build whose flags differ, or whose llama-batched-bench fails a smoke run on
# a quantised model (REEX_LLAMA_SMOKE_MODEL, default models/reex-starter.gguf, Q8_0), is rebuilt.
# Idempotent and safe for concurrent callers (flock); progress goes to stderr, and stdout gets the
# tools directory, whose bin/ holds both executables. No network needed.
# REEX_LLAMA_CPU_FLAGS (e.g. "avx avx2 fma f16c") replaces what /proc/cpuinfo reports.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
llama="$root/node_modules/node-llama-cpp/llama"
bundle="$llama/gitRelease.bundle"
info="$llama/llama.cpp.info.json"
[ -f "$bundle" ] && [ -f "$info" ] || { echo "build-llama-tools: $bundle missing; run npm install first" >&2; exit 1; }
tag="$(node -e 'process.stdout.write(String(JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).tag))' "$info")"
targets=(llama-server llama-batched-bench)
smoke_model="${REEX_LLAMA_SMOKE_MODEL:-$root/models/reex-starter.gguf}"

log() { echo "build-llama-tools: $*" >&2; }

# The CPU's instruction sets, as /proc/cpuinfo's first "flags" line lists them.
cpu_flags="${REEX_LLAMA_CPU_FLAGS:-$(grep -m1 -E '^flags\s*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2 || true)}"
has() { [[ " $cpu_flags " == *" $1 "* ]]; }
cmake_flags=(-DGGML_NATIVE=OFF)
for f in avx avx2 fma f16c bmi2; do
  if has "$f"; then cmake_flags+=("-DGGML_${f^^}=ON"); else cmake_flags+=("-DGGML_${f^^}=OFF"); fi
done
if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then
  cmake_flags+=(-DGGML_AVX512=ON)
else
  cmake_flags+=(-DGGML_AVX512=OFF)
fi
cmake_flags+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
key="${cmake_flags[*]}"
hash="$(printf '%s' "$key" | sha256sum | cut -c1-10)"
dir="${REEX_LLAMA_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reex/llama-tools-$tag-$hash}"

built() {
  [ -f "$dir/.complete" ] || return 1
  [ "$(cat "$dir/.complete")" = "$tag $key" ] || return 1
  for t in "${targets[@]}"; do [ -x "$dir/bin/$t" ] || return 1; done
}

# A few tokens of llama-batched-bench on the quantised model: a build that crashes on it is stale.
smoke() {
  [ -f "$smoke_model" ] || { log "no smoke model at $smoke_model; skipping the smoke run"; return 0; }
  local out
  if out="$(timeout 120 "$dir/bin/llama-batched-bench" -m "$smoke_model" -c 256 -b 64 -ub 64 -npp 8 -ntg 4 -npl 1 -t 1 2>&1)"; then
    return 0
  else
    local rc=$?
    log "smoke run of $dir/bin/llama-batched-bench on $smoke_model failed (exit $rc): $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"
    return 1
  fi
}

ready() { built && smoke; }

mkdir -p "$dir"
if ready; then echo "$dir"; exit 0; fi

exec 9>"$dir/.lock"
if ! flock -n 9; then
  log "another build of $dir is running; waiting for it"
  flock 9
fi
if ready; then echo "$dir"; exit 0; fi
if [ -f "$dir/.complete" ]; then
  log "the cached build in $dir is stale or fails its smoke run; rebuilding"
  rm -f "$dir/.complete"
  rm -rf "$dir/build" "$dir/bin"
fi

start=$(date +%s)
if [ ! -d "$dir/src/.git" ]; then
  log "cloning llama.cpp $tag from the bundle"
  rm -rf "$dir/src" "$dir/src.partial"
  git -c advice.detachedHead=false clone -q "$bundle" "$dir/src.partial" >&2
  mv "$dir/src.partial" "$dir/src"
fi
# LLAMA_BUILD_TOOLS (on by default for a standalone tree) is what adds tools/batched-bench;
# the UI is neither built (needs npm) nor fetched (needs network), static so bin/ stands alone.
log "configuring (cmake, Release, static, no curl/openssl/UI/tests/examples; CPU: ${cmake_flags[*]})"
cmake -S "$dir/src" -B "$dir/build" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${cmake_flags[@]}" >&2
jobs="$(nproc 2>/dev/null || echo 2)"
log "building ${targets[*]} with -j$jobs at nice 10, so tests running alongside keep the CPU (several minutes)"
nice -n 10 cmake --build "$dir/build" --target "${targets[@]}" -j"$jobs" >&2
mkdir -p "$dir/bin"
for t in "${targets[@]}"; do install -m 755 "$dir/build/bin/$t" "$dir/bin/$t"; done
if ! smoke; then
  log "the fresh build fails its smoke run too; leaving it unmarked"
  exit 1
fi
echo "$tag $key" >"$dir/.complete"
log "done in $(( $(date +%s) - start )) s: $dir/bin"
echo "$dir"

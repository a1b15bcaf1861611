#!/usr/bin/env bash
# bench/peer.ts on the lent GPU machine, which has CUDA's compiler, CMake and ninja but no Node, no
# npm and no network, and takes at most 64 MiB of files beyond the tracked tree.
#
#   bash scripts/device-bench.sh pack             (here, after npm install: writes .device/, ~40 MB)
#   bash scripts/device-bench.sh run [--cpu] [--bench peer|decoding|verify-sampling] [--log NAME] [-- ARGS]
#       (there, from the repository root; ARGS go to the bench; --cpu: anywhere, the same unpacking, no
#       CUDA build, CPU rows; where node-llama-cpp's CPU prebuilt was unpacked beside, as on a test here;
#       --log: the output's file name, $OUT/NAME.log, default the bench's name, so one call can run several)
#
# pack puts in .device/ (git-ignored): this machine's Node executable (xz), the node_modules that
# bench/peer.ts loads (node-llama-cpp and its dependencies, better-sqlite3, zod, the CUDA prebuilt of
# node-llama-cpp without its 159 MB libggml-cuda.so, the SQLite extension reex builds), the
# llama.cpp source node-llama-cpp ships (its tag, without models, docs and other backends), and
# src/ and bench/ transpiled to JavaScript by esbuild (no tsx there). It prints the size that would
# travel and the device call to make: `run` with carry [".device"].
#
# run unpacks Node into .device-build/node and node_modules into the root (only where absent),
# builds libggml-cuda.so and llama-batched-bench for the GPU's own architecture from that source
# (BUILD_SHARED_LIBS, GGML_BACKEND_DL: the CUDA backend node-llama-cpp's prebuilt loads from its
# bins folder; GGML_NATIVE must be off with it), puts the library in place of the one left out, and runs
# `node .device/js/bench/peer.js --gpu cuda ARGS` with LLAMA_BATCHED_BENCH set (or bench/decoding.js,
# whose policy takes the GPU by itself), writing its output to $OUT/<bench>.log where $OUT is set.
# Build outputs stay in .device-build/ (git-ignored), so a second run skips the build: one device call
# can measure both, `bash scripts/device-bench.sh run && bash scripts/device-bench.sh run --bench decoding`.
# Default ARGS: peer --speculative --temperature 0 --prompt-tokens 1200 --repeat 3 (a prompt inside the
# starter's 2,048-token training context); decoding --model models/reex-starter.gguf --questions 3 --speculative.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
pack=.device
work=.device-build
bins=node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda
log() { echo "device-bench: $*" >&2; }

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Every package the benches reach at run time, as node_modules paths: the packages their code (and the
# SQL children reex forks) imports, found by esbuild, with their dependencies (nested copies too), and
# node-llama-cpp's CUDA prebuilt (its other prebuilts are not loaded with --gpu cuda).
closure() {
  local meta
  meta="$(mktemp)"
  npx --no-install esbuild bench/peer.ts bench/decoding.ts src/sql/executor-child.ts src/sql/offload-child.ts \
    --bundle --platform=node --format=esm --packages=external --metafile="$meta" --outdir="$(mktemp -d)" --log-level=warning
  node -e '
    const fs = require("fs"), path = require("path");
    const root = process.cwd();
    const meta = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
    const roots = new Set(["@node-llama-cpp/linux-x64-cuda"]);
    for (const input of Object.values(meta.inputs))
      for (const i of input.imports ?? [])
        if (i.external && !i.path.startsWith("node:")) roots.add(i.path.split("/").slice(0, i.path.startsWith("@") ? 2 : 1).join("/"));
    const seen = new Set();
    const find = (name, from) => {
      for (let d = from; ; d = path.dirname(d)) {
        const p = path.join(d, "node_modules", name);
        if (fs.existsSync(path.join(p, "package.json"))) return p;
        if (path.dirname(d) === d) return null;
      }
    };
    const stack = [...roots].map((n) => [n, root]);
    while (stack.length) {
      const [name, from] = stack.pop();
      const p = find(name, from);
      if (!p || seen.has(p)) continue;
      seen.add(p);
      const pj = JSON.parse(fs.readFileSync(path.join(p, "package.json"), "utf8"));
      for (const d of Object.keys(pj.dependencies ?? {})) stack.push([d, p]);
      for (const d of Object.keys(pj.optionalDependencies ?? {})) if (!d.startsWith("@node-llama-cpp/")) stack.push([d, p]);
    }
    console.log([...seen].map((p) => path.relative(root, p)).sort().join("\n"));
  ' "$meta"
  rm -f "$meta"
}

do_pack() {
  [ -d node_modules/node-llama-cpp ] || { log "node_modules is missing: run npm install first"; exit 1; }
  [ -f "$bins/llama-addon.node" ] || { log "$bins is missing (node-llama-cpp's CUDA prebuilt is an optional dependency for linux-x64)"; exit 1; }
  [ -f node_modules/.cache/reex-sqlite/reex_dqs.so ] || { log "node_modules/.cache/reex-sqlite/reex_dqs.so is missing: run npm install first"; exit 1; }
  rm -rf "$pack"
  mkdir -p "$pack"
  local start=$SECONDS
  log "Node $(node -v) executable ($(readlink -f "$(command -v node)"))"
  xz -T0 -9 -c "$(readlink -f "$(command -v node)")" >"$pack/node.xz"

  log "node_modules for bench/peer.ts"
  # shellcheck disable=SC2046
  tar -c \
    --exclude='node_modules/node-llama-cpp/llama/gitRelease.bundle' \
    --exclude="$bins/libggml-cuda.so" \
    --exclude='node_modules/better-sqlite3/deps' --exclude='node_modules/better-sqlite3/src' \
    --exclude='node_modules/better-sqlite3/build/Release/obj*' --exclude='node_modules/better-sqlite3/build/Release/.deps' \
    --exclude='node_modules/better-sqlite3/build/Release/*.a' --exclude='node_modules/better-sqlite3/build/deps' \
    --exclude='*.map' --exclude='*.d.ts' --exclude='*.md' \
    $(closure) node_modules/.cache/reex-sqlite | xz -T0 -9 >"$pack/node_modules.tar.xz"

  log "llama.cpp source from node-llama-cpp's bundle"
  local llama=node_modules/node-llama-cpp/llama tmp
  tmp="$(mktemp -d)"
  git -c advice.detachedHead=false clone -q "$llama/gitRelease.bundle" "$tmp/src"
  tar -C "$tmp/src" -c --exclude=.git --exclude=./models --exclude=./docs --exclude=./examples --exclude=./gguf-py --exclude=./tests \
    --exclude=./ggml/src/ggml-vulkan --exclude=./ggml/src/ggml-sycl --exclude=./ggml/src/ggml-metal --exclude=./ggml/src/ggml-cann \
    --exclude=./ggml/src/ggml-opencl --exclude=./ggml/src/ggml-webgpu --exclude='./tools/server/public*' --exclude=./tools/server/webui \
    . | xz -T0 -9 >"$pack/llama-src.tar.xz"
  rm -rf "$tmp"
  cp "$llama/llama.cpp.info.json" "$pack/"

  log "src/ and bench/ as JavaScript"
  # shellcheck disable=SC2046
  npx --no-install esbuild $(git ls-files 'src/*.ts' 'bench/*.ts') --outdir="$pack/js" --outbase=. --platform=node --format=esm --log-level=warning

  local tracked packed
  tracked=$(git ls-files -z | xargs -0 cat | wc -c)
  packed=$(du -sb "$pack" | cut -f1)
  log "packed in $((SECONDS - start)) s: .device $((packed / 1048576)) MiB + tracked files $((tracked / 1048576)) MiB = $(((packed + tracked) / 1048576)) MiB of the 64 MiB a device call carries"
  if ((packed + tracked > 64 * 1048576)); then log "over 64 MiB: the device would refuse it"; exit 1; fi
  echo "device call: run with carry [\".device\"], timeout_s 600, command: bash scripts/device-bench.sh run"
}

do_run() {
  local cpu=0 bench=peer name=""
  while (($#)); do
    case "$1" in
      --cpu) cpu=1 ;;
      --bench)
        bench="${2:-}"
        shift
        ;;
      --log)
        name="${2:-}"
        [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || usage
        shift
        ;;
      --)
        shift
        break
        ;;
      *) usage ;;
    esac
    shift
  done
  local args=("$@")
  case "$bench" in
    peer) ((${#args[@]})) || args=(--speculative --temperature 0 --prompt-tokens 1200 --repeat 3) ;;
    decoding) ((${#args[@]})) || args=(--model models/reex-starter.gguf --questions 3 --speculative) ;;
    verify-sampling) ;;
    *) usage ;;
  esac
  [ -f "$pack/node.xz" ] || { log "$pack/ is missing: run 'bash scripts/device-bench.sh pack' first, and carry .device"; exit 1; }
  mkdir -p "$work/node/bin"
  if [ ! -x "$work/node/bin/node" ]; then
    xz -dc "$pack/node.xz" >"$work/node/bin/node.partial"
    chmod +x "$work/node/bin/node.partial"
    mv "$work/node/bin/node.partial" "$work/node/bin/node"
  fi
  export PATH="$root/$work/node/bin:$PATH"
  log "Node $(node -v) at $(command -v node)"
  if [ ! -d node_modules/node-llama-cpp ]; then
    log "unpacking node_modules"
    tar -xJf "$pack/node_modules.tar.xz"
  fi
  local gpu=cpu
  if ((cpu == 0)); then
    command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { log "no nvcc: use run --cpu on a machine without CUDA"; exit 1; }
    export PATH="$PATH:/usr/local/cuda/bin"
    local cudalib arch src="$work/llama-src" build="$work/llama-build"
    cudalib="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")/lib64"
    export LD_LIBRARY_PATH="$cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')"
    log "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), compute capability $arch; CUDA libraries from $cudalib"
    if [ ! -f "$build/.complete" ]; then
      rm -rf "$src" "$build"
      mkdir -p "$src"
      tar -C "$src" -xJf "$pack/llama-src.tar.xz"
      local t0=$SECONDS
      cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON \
        -DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF -DCMAKE_CUDA_ARCHITECTURES="${arch}-real" -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
      cmake --build "$build" --target ggml-cuda ggml-cpu llama-batched-bench -j"$(nproc)" >&2
      touch "$build/.complete"
      log "built libggml-cuda.so and llama-batched-bench in $((SECONDS - t0)) s"
    fi
    cp "$build/bin/libggml-cuda.so" "$bins/libggml-cuda.so"
    export LLAMA_BATCHED_BENCH="$root/$build/bin/llama-batched-bench"
    gpu=cuda
  fi
  local out="${OUT:-$work}"
  mkdir -p "$out"
  case "$bench" in peer | verify-sampling) args=(--gpu "$gpu" "${args[@]}") ;; esac
  name="${name:-$bench}"
  log "node .device/js/bench/$bench.js ${args[*]} (output also in $out/$name.log)"
  set -o pipefail
  node "$pack/js/bench/$bench.js" "${args[@]}" 2>&1 | tee "$out/$name.log"
}

case "${1:-}" in
  pack) do_pack ;;
  run)
    shift
    do_run "$@"
    ;;
  *) usage ;;
esac

# syntax=docker/dockerfile:1
#
# reex API server: the embedded llama.cpp policy on an NVIDIA GPU (CPU fallback), or any number of
# stateless replicas with `policy.backend=remote` in front of vLLM / llama-server (docs/scale-out.md).
#
# NOTE: this file has never been built: `docker build` cannot run where it was written. It is kept
# minimal so that it is easy to check by eye; build it once before relying on it.
#
# CUDA: node-llama-cpp 3.22.1's prebuilt `@node-llama-cpp/linux-x64-cuda` links libcudart.so.13 and
# libcublas.so.13 (CUDA 13: host driver >= 580; built on Ubuntu 22.04, needs glibc >= 2.34), and
# `@node-llama-cpp/linux-x64-cuda-ext` carries a CUDA 12 fallback (libcudart.so.12) that node-llama-cpp
# loads when the CUDA 13 one cannot load. On hosts with an older driver build with
#   --build-arg CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04
# Remote-backend-only replicas need no GPU; the image runs fine without one (llama.cpp is never loaded).
#
#   docker build -t reex .
#   docker run --gpus all -p 8080:8080 -v "$PWD/models:/models" reex
#   docker run -p 8080:8080 -e REEX_POLICY_BACKEND=remote -e REEX_POLICY_REMOTE_URL=http://vllm:8000/v1 reex

ARG NODE_IMAGE=node:20-bookworm-slim
ARG CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

# --- build: all dependencies (typescript is a devDependency) → dist/ -------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: no native builds are needed to compile TypeScript, and `prepare` (npm run build)
# would run before the sources are here.
# npm install, not npm ci: the lock cannot list every platform build (see README)
RUN npm install --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
RUN npm run build

# --- deps: production dependencies only, native modules built for this Node ---------------------
FROM ${NODE_IMAGE} AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts skips `prepare` (needs typescript, absent here) and node-llama-cpp's postinstall
# (reex loads its prebuilt binaries with build: "never"; they come as optional dependencies).
# better-sqlite3 then gets its native addon: a prebuilt download, else a compile with the tools above.
RUN npm install --no-audit --no-fund --omit=dev --ignore-scripts \
 && npm rebuild better-sqlite3 \
 && npm cache clean --force
# The SQLite extension that gives queries stock double-quoted strings (README), built against this
# better-sqlite3; it lands in node_modules/.cache/reex-sqlite, copied to the runtime with node_modules.
COPY scripts/build-sqlite-dqs.sh ./scripts/
COPY scripts/sqlite-dqs ./scripts/sqlite-dqs
RUN bash scripts/build-sqlite-dqs.sh

# --- node: the official Node 20 binary, copied into the CUDA image ------------------------------
FROM ${NODE_IMAGE} AS node

# --- runtime ------------------------------------------------------------------------------------
FROM ${CUDA_IMAGE} AS runtime
COPY --from=node /usr/local/bin/node /usr/local/bin/node
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin reex \
 && mkdir -p /models /data /app \
 && chown reex:reex /models /data /app
WORKDIR /app
COPY --chown=reex:reex package.json package-lock.json ./
COPY --chown=reex:reex bin ./bin
COPY --chown=reex:reex examples ./examples
COPY --from=deps --chown=reex:reex /app/node_modules ./node_modules
COPY --from=build --chown=reex:reex /app/dist ./dist

ENV NODE_ENV=production \
    REEX_SERVER_HOST=0.0.0.0 \
    REEX_SERVER_PORT=8080 \
    REEX_POLICY_MODELS_DIR=/models \
    REEX_SQL_DATA_DIR=/data
# GGUF models (a placeholder is written here when none is configured) and uploads/registry/indexes.
VOLUME ["/models", "/data"]
USER reex
EXPOSE 8080
# No curl in the CUDA runtime image: Node's fetch does the liveness check.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.REEX_SERVER_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "bin/reex.js", "serve"]

/**
 * scripts/build-llama-tools.sh's cache, with stand-ins for cmake and the built tools (a real build
 * takes minutes; test/e2e/llama-server.test.ts runs one): the CPU flags it builds with follow what
 * the CPU reports and are part of the cache key, a cached build whose llama-batched-bench crashes on
 * the quantised smoke model is rebuilt, and a finished build that passes is reused untouched.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const SCRIPT = fileURLToPath(new URL("../../scripts/build-llama-tools.sh", import.meta.url));
const AVX2 = "fpu sse sse2 avx avx2 fma f16c bmi2";
const AVX512 = `${AVX2} avx512f avx512cd avx512vl avx512dq avx512bw amx_tile amx_int8`;

let dir: string;
let fakeBin: string;
let cmakeLog: string;

/** A cmake that records its arguments and "builds" shell scripts that succeed. */
const FAKE_CMAKE = `#!/usr/bin/env bash
echo "$*" >> "$REEX_FAKE_CMAKE_LOG"
if [ "$1" = "--build" ]; then
  mkdir -p "$2/bin"
  for t in llama-server llama-batched-bench; do printf '#!/bin/sh\\nexit 0\\n' > "$2/bin/$t"; chmod +x "$2/bin/$t"; done
fi
`;

function build(env: Record<string, string>): { code: number | null; out: string; err: string } {
  const r = spawnSync("bash", [SCRIPT], {
    env: { ...(process.env as Record<string, string>), PATH: `${fakeBin}:${process.env.PATH}`, REEX_FAKE_CMAKE_LOG: cmakeLog, ...env },
    encoding: "utf8",
  });
  return { code: r.status, out: r.stdout.trim(), err: r.stderr };
}

const builds = (): string[] => (existsSync(cmakeLog) ? readFileSync(cmakeLog, "utf8").trim().split("\n") : []).filter((l) => l.startsWith("--build"));
const configures = (): string[] => (existsSync(cmakeLog) ? readFileSync(cmakeLog, "utf8").trim().split("\n") : []).filter((l) => l.startsWith("-S"));

/** A tools folder whose llama.cpp source is already cloned, so the script goes straight to cmake. */
function toolsDir(name: string): string {
  const d = join(dir, name);
  mkdirSync(join(d, "src", ".git"), { recursive: true });
  return d;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-llama-cache-"));
  fakeBin = join(dir, "fake-bin");
  mkdirSync(fakeBin);
  writeFileSync(join(fakeBin, "cmake"), FAKE_CMAKE);
  chmodSync(join(fakeBin, "cmake"), 0o755);
  cmakeLog = join(dir, "cmake.log");
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("scripts/build-llama-tools.sh", () => {
  it("builds with GGML_NATIVE off and the instruction sets the CPU reports on, never AMX, and reuses a build that passes", () => {
    const tools = toolsDir("a");
    const first = build({ REEX_LLAMA_TOOLS_DIR: tools, REEX_LLAMA_CPU_FLAGS: AVX512 });
    expect(first.code, first.err).toBe(0);
    expect(first.out).toBe(tools);
    const flags = configures().at(-1)!;
    for (const f of ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_AVX512=ON", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF"])
      expect(flags).toContain(f);
    expect(readFileSync(join(tools, ".complete"), "utf8")).toContain("-DGGML_AVX512=ON");
    const again = build({ REEX_LLAMA_TOOLS_DIR: tools, REEX_LLAMA_CPU_FLAGS: AVX512 });
    expect(again.code, again.err).toBe(0);
    expect(builds()).toHaveLength(1);
  });

  it("rebuilds a cached tool that crashes on its smoke run on the quantised starter", () => {
    const tools = toolsDir("b");
    expect(build({ REEX_LLAMA_TOOLS_DIR: tools, REEX_LLAMA_CPU_FLAGS: AVX2 }).code).toBe(0);
    const before = builds().length;
    writeFileSync(join(tools, "bin", "llama-batched-bench"), "#!/bin/sh\nkill -SEGV $$\n");
    const r = build({ REEX_LLAMA_TOOLS_DIR: tools, REEX_LLAMA_CPU_FLAGS: AVX2 });
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/smoke run of .*llama-batched-bench on .*reex-starter\.gguf failed \(exit 139\)/);
    expect(r.err).toMatch(/stale or fails its smoke run; rebuilding/);
    expect(builds()).toHaveLength(before + 1);
    expect(readFileSync(join(tools, "bin", "llama-batched-bench"), "utf8")).toContain("exit 0");
  });

  it("keys the cache by the CPU flags: other flags build elsewhere, or rebuild a pinned folder", () => {
    const cache = join(dir, "xdg");
    const avx2 = build({ XDG_CACHE_HOME: cache, REEX_LLAMA_CPU_FLAGS: AVX2 });
    const avx512 = build({ XDG_CACHE_HOME: cache, REEX_LLAMA_CPU_FLAGS: AVX512 });
    expect(avx2.code, avx2.err).toBe(0);
    expect(avx512.code, avx512.err).toBe(0);
    expect(avx2.out).not.toBe(avx512.out);
    expect(avx2.out).toMatch(/llama-tools-.+-[0-9a-f]{10}$/);
    const pinned = toolsDir("c");
    build({ REEX_LLAMA_TOOLS_DIR: pinned, REEX_LLAMA_CPU_FLAGS: AVX2 });
    const before = builds().length;
    const other = build({ REEX_LLAMA_TOOLS_DIR: pinned, REEX_LLAMA_CPU_FLAGS: AVX512 });
    expect(other.code, other.err).toBe(0);
    expect(builds()).toHaveLength(before + 1);
    expect(configures().at(-1)).toContain("-DGGML_AVX512=ON");
  });
});

/**
 * llama.cpp's llama-server and llama-batched-bench, built from the source node-llama-cpp ships by
 * scripts/build-llama-tools.sh into a cache outside the clone (REEX_LLAMA_TOOLS_DIR, else
 * $XDG_CACHE_HOME or ~/.cache/reex/llama-tools-<release>). The first call on a machine builds them
 * (several minutes, progress on stderr); later calls, and other processes, reuse the build.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** Where the built tools are. */
export interface LlamaTools {
  /** The cache directory the script built into. */
  dir: string;
  /** The llama-server executable. */
  server: string;
  /** The llama-batched-bench executable. */
  batchedBench: string;
}

const SCRIPT = fileURLToPath(new URL("../../scripts/build-llama-tools.sh", import.meta.url));

let pending: Promise<LlamaTools> | undefined;

function runScript(): Promise<LlamaTools> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [SCRIPT], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      const dir = out.trim().split("\n").at(-1) ?? "";
      const tools = { dir, server: join(dir, "bin", "llama-server"), batchedBench: join(dir, "bin", "llama-batched-bench") };
      if (code !== 0) reject(new Error(`scripts/build-llama-tools.sh failed with exit code ${code} (its output is above)`));
      else if (!existsSync(tools.server) || !existsSync(tools.batchedBench))
        reject(new Error(`scripts/build-llama-tools.sh finished but ${dir}/bin lacks the tools`));
      else resolve(tools);
    });
  });
}

/** The built tools, building them first when this machine has no build yet; rejects if the build fails. */
export function ensureLlamaTools(): Promise<LlamaTools> {
  pending ??= runScript();
  pending.catch(() => (pending = undefined));
  return pending;
}

/** A llama-server child process serving one GGUF on 127.0.0.1. */
export interface LlamaServer {
  /** Server root, `http://127.0.0.1:PORT` (the OpenAI API is under `/v1`). */
  url: string;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  /** Stops it (SIGTERM, then SIGKILL after 5 s). */
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts llama-server on `model` (a free port, `args` appended to `-m model --host --port`) and
 * waits until `/health` answers 200; rejects with its output when it exits or is not healthy in 60 s.
 */
export async function startLlamaServer(binary: string, model: string, args: readonly string[] = []): Promise<LlamaServer> {
  const port = await freePort();
  const child = spawn(binary, ["-m", model, "--host", "127.0.0.1", "--port", String(port), ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const server: LlamaServer = {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}:\n${output.slice(-3000)}`);
    const ok = await fetch(`${server.url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return server;
    if (Date.now() > deadline) {
      await server.close();
      throw new Error(`llama-server did not become healthy in 60 s:\n${output.slice(-3000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

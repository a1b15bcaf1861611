/**
 * Server overhead: POST /v1/sql on loopback with autocannon at 1, 4 and 16 connections against a
 * fixed-latency fake decoder, compared with calling the same decoder in-process. The server runs
 * in a child process so the load generator does not share its event loop. Prints p50/p99 latency,
 * throughput, and the p50 overhead (target < 5 ms); a sequential keep-alive client adds a
 * sub-millisecond p50 (autocannon reports whole milliseconds), and the MCP SDK's Streamable HTTP
 * client calls the `ask` tool at /mcp the same way, with and without progress notifications, over
 * the same node:http keep-alive client, and once over Node's built-in fetch (undici), the SDK's
 * default. Run with
 * `npx tsx bench/server.ts [seconds-per-run] [decoder-latency-ms]` (defaults 4 and 20).
 */
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Database from "better-sqlite3";
import { parseConfig } from "../src/config/index.js";
import type { Answer, AnswerRequest, DecodeContext } from "../src/decoding/types.js";
import { startServer } from "../src/server/index.js";
import { DatabaseRegistry } from "../src/sql/index.js";

interface CannonResult {
  latency: { p50: number; p99: number; average: number };
  requests: { average: number; total: number };
  non2xx: number;
  errors: number;
  timeouts: number;
}
type Cannon = (options: Record<string, unknown>) => Promise<CannonResult>;
const autocannon = createRequire(import.meta.url)("autocannon") as Cannon;

const SECONDS = Number(process.argv[2]) || 4;
const LATENCY_MS = Number(process.argv[3]) || 20;
const CONNECTIONS = [1, 4, 16];

/** A decode that waits a fixed time and emits a realistic number of events (a probe, 40 tokens). */
function fixedLatencyDecode(latencyMs: number) {
  return async (_req: AnswerRequest, ctx: DecodeContext): Promise<Answer> => {
    const t0 = performance.now();
    ctx.sink?.({ type: "branch", path: "0", parent: null, depth: 0 });
    await new Promise((resolve) => setTimeout(resolve, latencyMs));
    for (let i = 0; i < 40; i++) ctx.sink?.({ type: "token", path: "0", text: "tok " });
    ctx.sink?.({ type: "probe", path: "0", step: 1, sql: "SELECT count(*) FROM singer" });
    ctx.sink?.({ type: "final", sql: "SELECT count(*) FROM singer", answerable: true });
    const result = { ok: true as const, columns: ["count(*)"], rows: [[4]], rowCount: 1, truncated: false, empty: false, elapsedMs: 0.1 };
    return {
      sql: "SELECT count(*) FROM singer",
      answerable: true,
      result,
      candidates: [{ index: 0, path: "0", sql: "SELECT count(*) FROM singer", answerable: true, result, group: 0, votes: 1, interactions: 1, meanLogprob: -0.1, text: "" }],
      winner: 0,
      decidedBy: "majority",
      usage: { promptTokens: 300, evaluatedTokens: 340, generatedTokens: 40 },
      timings: { totalMs: performance.now() - t0 },
    };
  };
}

const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function inProcess(decode: ReturnType<typeof fixedLatencyDecode>, dbPath: string, seconds: number): Promise<{ p50: number; p99: number; rps: number }> {
  const samples: number[] = [];
  const end = performance.now() + seconds * 1000;
  const req: AnswerRequest = { dbPath, question: "How many singers are there?", strategy: "greedy" };
  while (performance.now() < end) {
    const t0 = performance.now();
    await decode(req, { sink: () => undefined, signal: new AbortController().signal });
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return { p50: quantile(samples, 0.5), p99: quantile(samples, 0.99), rps: samples.length / seconds };
}

/** Child mode: serve on a free loopback port and report it to the parent. */
async function serve(dir: string): Promise<void> {
  const config = parseConfig({
    server: { host: "127.0.0.1", port: 0, rateLimitPerMinute: 0, maxConcurrent: 64, maxQueued: 64, logLevel: "info" },
    sql: { dataDir: join(dir, "data") },
  });
  const registry = new DatabaseRegistry({ dataDir: config.sql.dataDir });
  const entry = await registry.registerPath(join(dir, "singers.sqlite"));
  const discard = new Writable({ write: (_c, _e, done) => done() });
  const server = await startServer(config, { registry, decode: fixedLatencyDecode(LATENCY_MS), logStream: discard });
  process.send!({ url: server.url, id: entry.id });
  process.once("message", () => {
    void server.close().then(() => process.exit(0));
  });
}

/**
 * `n` sequential POSTs over one keep-alive connection: client-side p50 (performance.now()) and the
 * p50 of the server's own share (its `timings.totalMs` minus the decoder's `decodeMs`).
 */
async function sequential(url: string, body: string, n: number): Promise<{ p50: number; serverP50: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const target = new URL(`${url}/v1/sql`);
  const samples: number[] = [];
  const server: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const text = await new Promise<string>((resolve, reject) => {
      const req = http.request({ host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
        let data = "";
        res.on("data", (c: Buffer) => (data += c.toString()));
        res.on("end", () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`status ${res.statusCode}`))));
      });
      req.on("error", reject);
      req.end(body);
    });
    samples.push(performance.now() - t0);
    const { timings } = JSON.parse(text) as { timings: { totalMs: number; decodeMs: number } };
    server.push(timings.totalMs - timings.decodeMs);
  }
  agent.destroy();
  samples.sort((a, b) => a - b);
  server.sort((a, b) => a - b);
  return { p50: quantile(samples, 0.5), serverP50: quantile(server, 0.5) };
}

/**
 * A `fetch` over node:http with one keep-alive agent: the client stack the REST rows use, so the
 * MCP rows can be timed with it as well as with Node's built-in fetch (undici).
 */
function nodeHttpFetch(agent: http.Agent): typeof fetch {
  return ((input: string | URL | Request, init: RequestInit = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
      const headers: Record<string, string> = {};
      new Headers(init.headers).forEach((v, k) => (headers[k] = v));
      const req = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: init.method ?? "GET", headers, agent }, (res) => {
        const body = new ReadableStream<Uint8Array>({
          start(ctrl) {
            res.on("data", (c: Buffer) => ctrl.enqueue(new Uint8Array(c)));
            res.on("end", () => ctrl.close());
            res.on("error", (e) => ctrl.error(e));
          },
          cancel: () => void res.destroy(),
        });
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : v);
        resolve(new Response(res.statusCode === 204 || res.statusCode === 202 ? null : body, { status: res.statusCode ?? 500, headers: out }));
      });
      req.on("error", reject);
      init.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")));
      req.end(typeof init.body === "string" ? init.body : undefined);
    })) as typeof fetch;
}

/** `n` sequential `ask` tool calls through one MCP session at /mcp: client-side p50, with or without a progress token, over fetch or node:http. */
async function sequentialMcp(url: string, database: string, n: number, progress: boolean, via: "fetch" | "node:http"): Promise<{ p50: number; notifications: number }> {
  const agent = new http.Agent({ keepAlive: true });
  const client = new Client({ name: "reex-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), via === "node:http" ? { fetch: nodeHttpFetch(agent) } : {}));
  const samples: number[] = [];
  let notifications = 0;
  const args = { database, question: "How many singers are there?" };
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const r = await client.callTool({ name: "ask", arguments: args }, undefined, progress ? { onprogress: () => void notifications++ } : undefined);
      samples.push(performance.now() - t0);
      if (r.isError) throw new Error(`ask failed: ${JSON.stringify(r.content)}`);
    }
  } finally {
    await client.close();
    agent.destroy();
  }
  samples.sort((a, b) => a - b);
  return { p50: quantile(samples, 0.5), notifications: notifications / n };
}

async function main(): Promise<void> {
  if (process.argv[4] === "--serve") return serve(process.argv[5]!);
  const dir = mkdtempSync(join(tmpdir(), "reex-bench-server-"));
  const dbPath = join(dir, "singers.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT, age INTEGER); INSERT INTO singer VALUES (1,'a',30),(2,'b',40),(3,'c',50),(4,'d',60);");
  db.close();
  const child = fork(process.argv[1]!, [String(SECONDS), String(LATENCY_MS), "--serve", dir], { stdio: "inherit" });
  try {
    const { url, id } = await new Promise<{ url: string; id: string }>((resolve, reject) => {
      child.once("message", (m) => resolve(m as { url: string; id: string }));
      child.once("exit", (code) => reject(new Error(`server exited with ${code}`)));
    });
    const body = JSON.stringify({ database: id, question: "How many singers are there?" });
    const post = { url: `${url}/v1/sql`, method: "POST", headers: { "content-type": "application/json" }, body };

    console.log(`server overhead bench: loopback, server in a child process, fake decoder with ${LATENCY_MS} ms latency, ${SECONDS} s per run, logging at info to a null stream`);
    const baseline = await inProcess(fixedLatencyDecode(LATENCY_MS), dbPath, SECONDS);
    await autocannon({ ...post, connections: 4, duration: 1 });
    const seq = await sequential(url, body, Math.max(50, Math.round((SECONDS * 1000) / (LATENCY_MS + 2))));
    const seqP50 = seq.p50;
    const calls = Math.max(50, Math.round((SECONDS * 1000) / (LATENCY_MS + 2)));
    await sequentialMcp(url, id, 10, false, "node:http");
    const mcp = await sequentialMcp(url, id, calls, false, "node:http");
    const mcpProgress = await sequentialMcp(url, id, calls, true, "node:http");
    const mcpFetch = await sequentialMcp(url, id, calls, false, "fetch");

    const rows: string[][] = [["variant", "connections", "p50 ms", "p99 ms", "req/s", "non-2xx", "p50 overhead ms"]];
    rows.push(["in-process decode", "1", baseline.p50.toFixed(2), baseline.p99.toFixed(2), baseline.rps.toFixed(1), "0", "-"]);
    rows.push(["sequential client", "1", seqP50.toFixed(2), "-", "-", "0", (seqP50 - baseline.p50).toFixed(2)]);
    rows.push(["MCP ask, SDK client", "1", mcp.p50.toFixed(2), "-", "-", "0", (mcp.p50 - baseline.p50).toFixed(2)]);
    rows.push([`MCP ask + progress (${mcpProgress.notifications.toFixed(0)}/call)`, "1", mcpProgress.p50.toFixed(2), "-", "-", "0", (mcpProgress.p50 - baseline.p50).toFixed(2)]);
    rows.push(["MCP ask, SDK over fetch", "1", mcpFetch.p50.toFixed(2), "-", "-", "0", (mcpFetch.p50 - baseline.p50).toFixed(2)]);
    for (const connections of CONNECTIONS) {
      const r = await autocannon({ ...post, connections, duration: SECONDS });
      rows.push(["autocannon", String(connections), r.latency.p50.toFixed(2), r.latency.p99.toFixed(2), r.requests.average.toFixed(1), String(r.non2xx + r.errors + r.timeouts), (r.latency.p50 - baseline.p50).toFixed(2)]);
    }
    const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
    for (const r of rows) console.log(r.map((c, j) => (j < 1 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join("  "));
    const overhead = seqP50 - baseline.p50;
    console.log(`p50 overhead of the server over the in-process decoder: ${overhead.toFixed(2)} ms (target < 5 ms): ${overhead < 5 ? "OK" : "OVER TARGET"}`);
    for (const [name, r] of [["MCP ask", mcp], ["MCP ask with progress", mcpProgress], ["MCP ask over fetch", mcpFetch]] as const) {
      const o = r.p50 - baseline.p50;
      console.log(`p50 overhead of ${name} at /mcp over the in-process decoder: ${o.toFixed(2)} ms (target < 5 ms): ${o < 5 ? "OK" : "OVER TARGET"}`);
    }
    console.log(`p50 of the server's own share inside the handler (totalMs - decodeMs): ${seq.serverP50.toFixed(2)} ms; machine load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`);
  } finally {
    child.send("stop");
    await new Promise((resolve) => child.once("exit", resolve));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});

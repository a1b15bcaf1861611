/**
 * Server overhead: POST /v1/sql on loopback with autocannon at 1, 4 and 16 connections against a
 * fixed-latency fake decoder, compared with calling the same decoder in-process. The server runs
 * in a child process so the load generator does not share its event loop. Prints p50/p99 latency,
 * throughput, and the p50 overhead (target < 5 ms); a sequential keep-alive client times the
 * same POST to a fraction of a millisecond (autocannon reports whole milliseconds), and the MCP SDK's Streamable HTTP
 * client calls the `ask` tool at /mcp the same way, with and without progress notifications, over
 * the same node:http keep-alive client, and once over Node's built-in fetch (undici), the SDK's
 * default. The sequential variants (in-process, REST, the three MCP ones) run interleaved, one call
 * of each per round, so that load on this shared machine falls on all of them alike. Run with
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
      candidates: [
        { index: 0, path: "0", sql: "SELECT count(*) FROM singer", answerable: true, result, group: 0, votes: 1, interactions: 1, meanLogprob: -0.1, text: "" },
      ],
      winner: 0,
      decidedBy: "majority",
      usage: { promptTokens: 300, evaluatedTokens: 340, generatedTokens: 40 },
      timings: { totalMs: performance.now() - t0 },
    };
  };
}

const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** One timed call of a variant; `server` is the server's own share when the answer reports it. */
type Call = () => Promise<{ server?: number } | undefined>;

/** The in-process decoder, one call. */
function inProcessCall(decode: ReturnType<typeof fixedLatencyDecode>, dbPath: string): Call {
  const req: AnswerRequest = { dbPath, question: "How many singers are there?", strategy: "greedy" };
  return async () => void (await decode(req, { sink: () => undefined, signal: new AbortController().signal }));
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
 * POST /v1/sql over one keep-alive connection, one call: the client sees the whole round trip, and
 * the answer reports the server's own share (its `timings.totalMs` minus the decoder's `decodeMs`).
 */
function restCall(url: string, body: string, agent: http.Agent): Call {
  const target = new URL(`${url}/v1/sql`);
  return async () => {
    const text = await new Promise<string>((resolve, reject) => {
      const req = http.request(
        { host: target.hostname, port: target.port, path: target.pathname, method: "POST", agent, headers: { "content-type": "application/json" } },
        (res) => {
          let data = "";
          res.on("data", (c: Buffer) => (data += c.toString()));
          res.on("end", () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`status ${res.statusCode}`))));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    const { timings } = JSON.parse(text) as { timings: { totalMs: number; decodeMs: number } };
    return { server: timings.totalMs - timings.decodeMs };
  };
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
      const abort = (): void => void req.destroy(new Error("aborted"));
      init.signal?.addEventListener("abort", abort, { once: true });
      req.on("close", () => init.signal?.removeEventListener("abort", abort));
      req.end(typeof init.body === "string" ? init.body : undefined);
    })) as typeof fetch;
}

/** An MCP session at /mcp and its `ask` tool call, with or without a progress token, over fetch or node:http; `progress` counts notifications received. */
async function mcpCall(
  url: string,
  database: string,
  progress: boolean,
  via: "fetch" | "node:http",
): Promise<{ call: Call; close: () => Promise<void>; progress: { calls: number; notifications: number } }> {
  const agent = new http.Agent({ keepAlive: true });
  const client = new Client({ name: "reex-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), via === "node:http" ? { fetch: nodeHttpFetch(agent) } : {}));
  const counts = { calls: 0, notifications: 0 };
  const args = { database, question: "How many singers are there?" };
  return {
    progress: counts,
    call: async () => {
      counts.calls++;
      const r = await client.callTool({ name: "ask", arguments: args }, undefined, progress ? { onprogress: () => void counts.notifications++ } : undefined);
      if (r.isError) throw new Error(`ask failed: ${JSON.stringify(r.content)}`);
      return undefined;
    },
    close: async () => {
      await client.close();
      agent.destroy();
    },
  };
}

/**
 * `rounds` rounds, each calling every variant once in turn, so that a change in the machine's load
 * during the run falls on every variant alike. Returns each variant's sorted client-side times and
 * sorted server shares.
 */
async function interleaved(variants: Record<string, Call>, rounds: number): Promise<Record<string, { times: number[]; server: number[] }>> {
  const out: Record<string, { times: number[]; server: number[] }> = {};
  for (const name of Object.keys(variants)) out[name] = { times: [], server: [] };
  for (let i = 0; i < rounds; i++) {
    for (const [name, call] of Object.entries(variants)) {
      const t0 = performance.now();
      const r = await call();
      out[name]!.times.push(performance.now() - t0);
      if (r?.server !== undefined) out[name]!.server.push(r.server);
    }
  }
  for (const v of Object.values(out)) {
    v.times.sort((a, b) => a - b);
    v.server.sort((a, b) => a - b);
  }
  return out;
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

    console.log(
      `server overhead bench: loopback, server in a child process, fake decoder with ${LATENCY_MS} ms latency, ${SECONDS} s per run, logging at info to a null stream`,
    );
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const mcp = await mcpCall(url, id, false, "node:http");
    const mcpProgress = await mcpCall(url, id, true, "node:http");
    const mcpFetch = await mcpCall(url, id, false, "fetch");
    const variants: Record<string, Call> = {
      "in-process decode": inProcessCall(fixedLatencyDecode(LATENCY_MS), dbPath),
      "sequential client": restCall(url, body, agent),
      "MCP ask, SDK client": mcp.call,
      "MCP ask + progress": mcpProgress.call,
      "MCP ask, SDK over fetch": mcpFetch.call,
    };
    await autocannon({ ...post, connections: 4, duration: 1 });
    await interleaved(variants, 10);
    const rounds = Math.max(50, Math.round((4 * SECONDS * 1000) / (Object.keys(variants).length * (LATENCY_MS + 3))));
    const seq = await interleaved(variants, rounds);
    const notifications = mcpProgress.progress.notifications / mcpProgress.progress.calls;
    agent.destroy();
    for (const m of [mcp, mcpProgress, mcpFetch]) await m.close();
    const baseline = seq["in-process decode"]!.times;
    const p50Base = quantile(baseline, 0.5);

    const rows: string[][] = [["variant", "connections", "p50 ms", "p99 ms", "req/s", "non-2xx", "p50 overhead ms"]];
    for (const [name, r] of Object.entries(seq)) {
      const label = name === "MCP ask + progress" ? `${name} (${notifications.toFixed(0)}/call)` : name;
      const p50 = quantile(r.times, 0.5);
      rows.push([label, "1", p50.toFixed(2), quantile(r.times, 0.99).toFixed(2), "-", "0", r.times === baseline ? "-" : (p50 - p50Base).toFixed(2)]);
    }
    for (const connections of CONNECTIONS) {
      const r = await autocannon({ ...post, connections, duration: SECONDS });
      rows.push([
        "autocannon",
        String(connections),
        r.latency.p50.toFixed(2),
        r.latency.p99.toFixed(2),
        r.requests.average.toFixed(1),
        String(r.non2xx + r.errors + r.timeouts),
        (r.latency.p50 - p50Base).toFixed(2),
      ]);
    }
    const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
    for (const r of rows) console.log(r.map((c, j) => (j < 1 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join("  "));
    console.log(`(${rounds} interleaved rounds: each round calls every sequential variant once, so load changes fall on all alike)`);
    const overhead = (name: string): number => quantile(seq[name]!.times, 0.5) - p50Base;
    console.log(
      `p50 overhead of the server over the in-process decoder: ${overhead("sequential client").toFixed(2)} ms (target < 5 ms): ${overhead("sequential client") < 5 ? "OK" : "OVER TARGET"}`,
    );
    for (const [label, name] of [
      ["MCP ask", "MCP ask, SDK client"],
      ["MCP ask with progress", "MCP ask + progress"],
      ["MCP ask over fetch", "MCP ask, SDK over fetch"],
    ] as const) {
      const o = overhead(name);
      console.log(`p50 overhead of ${label} at /mcp over the in-process decoder: ${o.toFixed(2)} ms (target < 5 ms): ${o < 5 ? "OK" : "OVER TARGET"}`);
    }
    console.log(
      `p50 of the server's own share inside the handler (totalMs - decodeMs): ${quantile(seq["sequential client"]!.server, 0.5).toFixed(2)} ms; machine load average ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`,
    );
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

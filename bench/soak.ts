/**
 * Soak: N clients for T seconds against a real server (`reex serve` as a child process with the
 * tiny test GGUF), asking questions and running SQL on the example databases, while executor
 * children are killed with SIGKILL every few seconds; then a SIGTERM. Prints answers, errors by
 * kind (planned: SHUTTING_DOWN after the SIGTERM, QUEUE_FULL), p50/p99 latency and the server's
 * RSS start → max → end.
 *   npx tsx bench/soak.ts [--clients 16] [--seconds 180] [--kill-every-ms 5000]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureTestModel } from "../test/helpers/model.js";

const { values } = parseArgs({
  options: { clients: { type: "string", default: "16" }, seconds: { type: "string", default: "180" }, "kill-every-ms": { type: "string", default: "5000" } },
});
const clients = Number(values.clients);
const seconds = Number(values.seconds);
const killEvery = Number(values["kill-every-ms"]);

const rssMiB = (pid: number): number => {
  try {
    return (Number(readFileSync(`/proc/${pid}/statm`, "latin1").split(" ")[1]) * 4096) / 1048576;
  } catch {
    return 0;
  }
};
/** Child pids of `pid`, from every process's parent in /proc (the executor children of the server). */
const children = (pid: number): number[] => {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return out;
};

const dir = mkdtempSync(join(tmpdir(), "reex-soak-"));
const model = await ensureTestModel();
const server = spawn(
  process.execPath,
  [
    "--import",
    "tsx",
    "src/cli.ts",
    "serve",
    "--server.port",
    "0",
    "--server.rateLimitPerMinute",
    "0",
    "--server.maxQueued",
    "64",
    "--policy.model",
    model,
    "--policy.gpu",
    "cpu",
    "--agent.maxTokens",
    "128",
  ],
  {
    env: { ...process.env, REEX_SQL_DATA_DIR: join(dir, "data") },
    stdio: ["ignore", "pipe", "pipe"],
  },
);
let log = "";
server.stdout.on("data", (c: Buffer) => (log += c));
server.stderr.on("data", (c: Buffer) => (log += c));
const exited = new Promise<number | null>((r) => server.on("exit", (code) => r(code)));
let base = "";
while (!base) {
  const line = log.split("\n").find((l) => l.includes('"reex is listening"'));
  if (line) base = (JSON.parse(line) as { url: string }).url;
  else await new Promise((r) => setTimeout(r, 100));
}
const dbs = ((await (await fetch(`${base}/v1/databases`)).json()) as { databases: { id: string; name: string }[] }).databases;
const QUESTIONS = [
  "How many customers are there?",
  "Which product is the most expensive?",
  "List the cities of customers.",
  "What is the total of all orders?",
];

const startRss = rssMiB(server.pid!);
let maxRss = startRss;
let lastRss = startRss;
const rssTimer = setInterval(() => {
  const now = rssMiB(server.pid!);
  if (now > 0) lastRss = now;
  maxRss = Math.max(maxRss, now);
}, 200);
let kills = 0;
const killTimer = setInterval(() => {
  const execs = children(server.pid!);
  if (process.env.SOAK_DEBUG) console.error("children", execs);
  const victim = execs[Math.floor(Math.random() * execs.length)];
  if (victim !== undefined) {
    try {
      process.kill(victim, "SIGKILL");
      kills++;
    } catch {
      /* already gone */
    }
  }
}, killEvery);

const latencies: number[] = [];
const errors = new Map<string, number>();
let answers = 0;
let stopping = false;
const deadline = Date.now() + seconds * 1000;
const MCP_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" };
const SQL = ["SELECT count(*) FROM sqlite_schema", "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c LIMIT 20000) SELECT sum(i) FROM c"];
/** Every other call runs SQL through MCP run_sql (so executor children work and get killed); the rest ask a question. */
const client = async (n: number): Promise<void> => {
  const init = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: MCP_HEADERS,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: `soak-${n}`, version: "1" } },
    }),
  });
  await init.text();
  const session = init.headers.get("mcp-session-id")!;
  for (let i = 0; Date.now() < deadline; i++) {
    const db = dbs[(n + i) % dbs.length]!;
    const t0 = performance.now();
    try {
      if (i % 2 === 1) {
        const res = await fetch(`${base}/mcp`, {
          method: "POST",
          headers: { ...MCP_HEADERS, "mcp-session-id": session },
          body: JSON.stringify({
            jsonrpc: "2.0",
            id: i,
            method: "tools/call",
            params: { name: "run_sql", arguments: { database: db.id, sql: SQL[i % 4 === 1 ? 0 : 1] } },
          }),
        });
        const text = await res.text();
        const failed = !res.ok || text.includes('"isError":true');
        if (!failed) answers++;
        else {
          const kind = text.includes("crashed while running")
            ? "planned: run_sql on a child this bench SIGKILLed"
            : `run_sql ${/(SQL_[A-Z_]+|EXECUTOR_[A-Z_]+)/.exec(text)?.[1] ?? res.status}`;
          errors.set(kind, (errors.get(kind) ?? 0) + 1);
        }
        latencies.push(performance.now() - t0);
        continue;
      }
      const res = await fetch(`${base}/v1/sql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ database: db.id, question: QUESTIONS[(n + i) % QUESTIONS.length] }),
      });
      const body = (await res.json()) as { code?: string };
      if (res.ok) answers++;
      else errors.set(body.code ?? String(res.status), (errors.get(body.code ?? String(res.status)) ?? 0) + 1);
    } catch (err) {
      const kind = stopping ? "connection closed after SIGTERM" : `network ${(err as Error).message}`;
      errors.set(kind, (errors.get(kind) ?? 0) + 1);
    }
    latencies.push(performance.now() - t0);
  }
};
const running = Promise.all(Array.from({ length: clients }, (_, n) => client(n)));
await new Promise((r) => setTimeout(r, seconds * 1000));
clearInterval(killTimer);
stopping = true;
const sigterm = performance.now();
server.kill("SIGTERM");
await running;
const code = await exited;
const stopMs = performance.now() - sigterm;
clearInterval(rssTimer);
const endRss = lastRss;
latencies.sort((a, b) => a - b);
const q = (p: number): number => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
const errorLines = log.split("\n").filter((l) => l.startsWith("{") && (JSON.parse(l) as { level: number }).level >= 50);
console.log(`soak: ${clients} clients, ${seconds} s, executor SIGKILLs ${kills}`);
console.log(`answers ${answers}; errors by kind ${JSON.stringify(Object.fromEntries(errors))}`);
console.log(`latency p50 ${q(0.5).toFixed(0)} ms, p99 ${q(0.99).toFixed(0)} ms`);
console.log(`server RSS ${startRss.toFixed(0)} → max ${maxRss.toFixed(0)} MiB → end ${endRss.toFixed(0)} MiB (last sample before exit)`);
console.log(`SIGTERM → exit code ${code} in ${stopMs.toFixed(0)} ms; error-level log lines ${errorLines.length}`);
rmSync(dir, { recursive: true, force: true });

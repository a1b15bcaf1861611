/**
 * Soak: N clients for T seconds against a real server (`reex serve` as a child process with the
 * tiny test GGUF), asking questions and running SQL on the example databases, while executor
 * children are killed with SIGKILL every few seconds; then a SIGTERM. Prints answers, errors by
 * kind (planned: SHUTTING_DOWN after the SIGTERM, QUEUE_FULL), p50/p99 latency and the server's
 * RSS start → max → end.
 *   npx tsx bench/soak.ts [--clients 16] [--seconds 180] [--kill-every-ms 5000]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ensureTestModel } from "../test/helpers/model.js";

const { values } = parseArgs({ options: { clients: { type: "string", default: "16" }, seconds: { type: "string", default: "180" }, "kill-every-ms": { type: "string", default: "5000" } } });
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
const children = (pid: number): number[] => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "latin1").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};

const dir = mkdtempSync(join(tmpdir(), "reex-soak-"));
const model = await ensureTestModel();
const server = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "serve", "--server.port", "0", "--server.rateLimitPerMinute", "0", "--server.maxQueued", "64", "--policy.model", model, "--policy.gpu", "cpu", "--agent.maxTokens", "128"], {
  env: { ...process.env, REEX_SQL_DATA_DIR: join(dir, "data") },
  stdio: ["ignore", "pipe", "pipe"],
});
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
const QUESTIONS = ["How many customers are there?", "Which product is the most expensive?", "List the cities of customers.", "What is the total of all orders?"];

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
const client = async (n: number): Promise<void> => {
  for (let i = 0; Date.now() < deadline; i++) {
    const db = dbs[(n + i) % dbs.length]!;
    const t0 = performance.now();
    try {
      const res = await fetch(`${base}/v1/sql`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ database: db.id, question: QUESTIONS[(n + i) % QUESTIONS.length] }) });
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

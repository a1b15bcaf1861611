/**
 * Executor overhead: the same probe queries run in-process (executeDirect, the baseline) and through
 * the child-process pool, one at a time (per-query overhead), then with many in flight
 * (throughput). Run with `npx tsx bench/executor.ts [N]`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { ExecutorPool, closeDirectConnections, executeDirect, type ExecResult } from "../src/sql/index.js";

const N = Number(process.argv[2]) || 2000;
const IN_FLIGHT = 64;
const WORKERS = 2;

function buildDb(path: string): void {
  const db = new Database(path);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, score REAL)");
  const insert = db.prepare("INSERT INTO t VALUES (?, ?, ?, ?)");
  db.transaction(() => {
    for (let i = 1; i <= 10_000; i++) insert.run(i, `name-${i}`, `city-${i % 97}`, i / 7);
  })();
  db.close();
}

const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

function summarise(samples: number[]): { median: number; p99: number; mean: number } {
  const s = [...samples].sort((a, b) => a - b);
  return { median: quantile(s, 0.5), p99: quantile(s, 0.99), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

function check(r: ExecResult): void {
  if (!r.ok) throw new Error(`bench query failed: ${r.error.code} ${r.error.message}`);
}

const distinct = (i: number): string => `SELECT name FROM t WHERE id = ${(i % 10_000) + 1}`;
const repeated = (): string => "SELECT name FROM t WHERE id = 4242";

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "reex-bench-"));
  const dbPath = join(dir, "bench.sqlite");
  buildDb(dbPath);
  const pool = new ExecutorPool({ workers: WORKERS });
  try {
    await pool.ready();
    for (let i = 0; i < 300; i++) {
      check(executeDirect(dbPath, distinct(i + 50_000)));
      check(await pool.execute(dbPath, distinct(i + 50_000)));
    }

    const rows: { label: string; direct: ReturnType<typeof summarise>; pooled: ReturnType<typeof summarise> }[] = [];
    for (const [label, sqlOf] of [
      ["distinct literal SQL (prepare each)", distinct],
      ["repeated SQL (cached statement)", repeated],
    ] as const) {
      const direct: number[] = [];
      const pooled: number[] = [];
      for (let i = 0; i < N; i++) {
        const sql = sqlOf(i);
        let t = performance.now();
        check(executeDirect(dbPath, sql));
        direct.push(performance.now() - t);
        t = performance.now();
        check(await pool.execute(dbPath, sqlOf(i + N)));
        pooled.push(performance.now() - t);
      }
      rows.push({ label, direct: summarise(direct), pooled: summarise(pooled) });
    }

    const f = (ms: number): string => ms.toFixed(3).padStart(8);
    console.log(`executor bench: ${N} sequential queries per variant, ${WORKERS} workers, node ${process.version}`);
    console.log("");
    console.log(
      `${"variant".padEnd(38)} ${"direct med".padStart(10)} ${"direct p99".padStart(10)} ${"pool med".padStart(10)} ${"pool p99".padStart(10)} ${"overhead".padStart(10)}`,
    );
    for (const r of rows) {
      console.log(
        `${r.label.padEnd(38)}   ${f(r.direct.median)}   ${f(r.direct.p99)}   ${f(r.pooled.median)}   ${f(r.pooled.p99)}   ${f(r.pooled.median - r.direct.median)}`,
      );
    }
    console.log("(milliseconds; overhead = pool median - direct median, target < 1 ms)");

    const total = Math.max(N * 5, 10_000);
    let t = performance.now();
    for (let i = 0; i < total; i++) check(executeDirect(dbPath, distinct(i)));
    const directQps = total / ((performance.now() - t) / 1000);

    t = performance.now();
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < total) check(await pool.execute(dbPath, distinct(next++)));
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
    const poolQps = total / ((performance.now() - t) / 1000);

    console.log("");
    console.log(`throughput over ${total} distinct queries:`);
    console.log(`  direct, one thread, sequential      ${directQps.toFixed(0).padStart(8)} queries/s`);
    console.log(
      `  pool, ${WORKERS} workers, ${IN_FLIGHT} in flight        ${poolQps.toFixed(0).padStart(8)} queries/s  (${(poolQps / directQps).toFixed(2)}x direct)`,
    );
    console.log(`  pool stats: ${JSON.stringify(pool.stats())}`);
  } finally {
    await pool.close();
    closeDirectConnections();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();

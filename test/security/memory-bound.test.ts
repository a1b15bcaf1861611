/**
 * One query cannot take the host's memory: SQLite's length limit stops a huge zeroblob at once, and
 * an executor child whose resident set passes sql.maxQueryMemoryMB is killed, through the real
 * `reex exec` process and `reex mcp` over stdio, with the child's peak RSS sampled from /proc.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTestModel } from "../helpers/model.js";
import { call } from "../mcp/helpers.js";
import { watchPeak } from "./rss.js";

const BOUND_MB = 256;
/** What the child may allocate past the bound within one 10 ms poll of the pool, plus sampling slack. */
const SLACK_MB = 96;
const ZEROBLOB_X8 = `SELECT ${Array.from({ length: 8 }, (_, i) => `zeroblob(500000000) AS c${i}`).join(", ")}`;
/** Each value stays under the length limit (a quarter of the bound); together they pass the bound. Allocating them takes a few hundred ms, so it must end before the 5 s time limit, not within 1 s. */
const WIDE_ROW = `SELECT ${Array.from({ length: 24 }, (_, i) => `zeroblob(30000000) AS c${i}`).join(", ")}`;

let dir: string;
let db: string;
const env = (): Record<string, string> => ({
  ...(process.env as Record<string, string>),
  REEX_SQL_DATA_DIR: join(dir, "data"),
  REEX_SQL_MAX_QUERY_MEMORY_MB: String(BOUND_MB),
  REEX_POLICY_THREADS: "1",
});
const hash = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-memory-"));
  db = join(dir, "small.sqlite");
  const w = new Database(db);
  w.exec("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2);");
  w.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function exec(sql: string): Promise<{ code: number; stdout: string; stderr: string; peakMiB: number; wallMs: number }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--json", "--db", db, sql], { env: env() });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c));
    child.stderr.on("data", (c: Buffer) => (stderr += c));
    const peak = watchPeak(child.pid!);
    const t0 = performance.now();
    child.on("exit", (code) => resolve({ code: code ?? -1, stdout, stderr, peakMiB: peak.stop(), wallMs: performance.now() - t0 }));
  });
}

describe.skipIf(process.platform !== "linux")("memory bound of one query", () => {
  it("reex exec: eight 500 MB zeroblobs end with SQL_MEMORY_LIMIT within 1 s of query time and the child stays under the bound", async () => {
    const before = hash(db);
    const r = await exec(ZEROBLOB_X8);
    expect(r.code, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ ok: false, error: { code: "SQL_MEMORY_LIMIT" } });
    expect(out.elapsedMs).toBeLessThan(1000);
    expect(r.peakMiB).toBeLessThan(BOUND_MB + SLACK_MB);
    expect(hash(db)).toBe(before);
  });

  it("reex exec: a row of values each under the length limit but together past the bound is stopped by the memory watch", async () => {
    const r = await exec(WIDE_ROW);
    expect(r.code, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ ok: false, error: { code: "SQL_MEMORY_LIMIT" } });
    expect(out.elapsedMs).toBeLessThan(5000);
    expect(r.peakMiB).toBeGreaterThan(BOUND_MB * 0.9);
    expect(r.peakMiB).toBeLessThan(BOUND_MB + SLACK_MB);
  });

  it("reex mcp run_sql: the same two queries fail with the typed error, the child stays under the bound, and the next query answers", async () => {
    const model = await ensureTestModel();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ["--import", "tsx", "src/cli.ts", "mcp", "--no-examples", "--db", db, "--policy.model", model, "--policy.gpu", "cpu"],
      env: env(),
      stderr: "pipe",
    });
    const client = new Client({ name: "reex-memory-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const id = ((await call(client, "list_databases", {})).structuredContent!.databases as { id: string }[])[0]!.id;
      await call(client, "run_sql", { database: id, sql: "SELECT 1" });
      for (const [sql, withinMs] of [
        [ZEROBLOB_X8, 1000],
        [WIDE_ROW, 5000],
      ] as const) {
        const peak = watchPeak(transport.pid!);
        const t0 = performance.now();
        const r = await call(client, "run_sql", { database: id, sql });
        const ms = performance.now() - t0;
        const peakMiB = peak.stop();
        expect(r.isError).toBe(true);
        expect(JSON.stringify(r.content)).toContain("SQL_MEMORY_LIMIT");
        expect(ms, sql.slice(0, 30)).toBeLessThan(withinMs);
        expect(peakMiB).toBeLessThan(BOUND_MB + SLACK_MB);
      }
      const ok = await call(client, "run_sql", { database: id, sql: "SELECT count(*) AS n FROM t" });
      expect(ok.isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });
});

/**
 * One Postgres query cannot take the server's memory: rows arrive through a cursor whose bytes are
 * counted on the socket as they come, and the connection is cut the moment they pass the result cap,
 * so a huge row is never read whole. Through the real `reex exec` process with the time limit raised
 * far past what the queries need (the memory bound, not the clock, must stop them), its peak
 * resident set sampled from /proc stays under the `SELECT 1` baseline + the 32 MiB cap + 96 MiB.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";
import { watchPeak } from "../security/rss.js";

const CAP_MIB = 32;
const MARGIN_MIB = 96;

let server: PgServer;

function exec(url: string, sql: string): Promise<{ code: number; stdout: string; stderr: string; peakMiB: number }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--json", "--db", url, sql], {
      env: { ...(process.env as Record<string, string>), REEX_SQL_TIMEOUT_MS: "120000" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c));
    child.stderr.on("data", (c: Buffer) => (stderr += c));
    const peak = watchPeak(child.pid!, { self: true });
    child.on("exit", (code) => resolve({ code: code ?? -1, stdout, stderr, peakMiB: peak.stop() }));
  });
}

beforeAll(async () => {
  server = await startPostgres();
  await loadExamples(server);
});
afterAll(async () => server?.stop());

describe.skipIf(process.platform !== "linux")("memory bound of one Postgres query", () => {
  it("huge rows, many large rows, wide rows, bytea and one giant value end with SQL_RUNTIME while reex exec stays under baseline + cap + 96 MiB", async () => {
    const url = server.readerUrl("reex_retail");
    const base = await exec(url, "SELECT 1 AS one");
    expect(base.code, base.stderr).toBe(0);
    const bound = base.peakMiB + CAP_MIB + MARGIN_MIB;
    const wide = Array.from({ length: 8 }, (_, i) => `repeat('${"abcdefgh"[i]}', 5000000) AS c${i}`).join(", ");
    for (const sql of [
      "SELECT repeat('x', 30000000) FROM generate_series(1, 256)",
      "SELECT repeat(md5(g::text), 6250) FROM generate_series(1, 1000) AS g",
      `SELECT ${wide} FROM generate_series(1, 64)`,
      "SELECT decode(repeat('ff', 20000000), 'hex') FROM generate_series(1, 64)",
      "SELECT repeat('z', 400000000)",
    ]) {
      const r = await exec(url, sql);
      expect(r.code, `${sql}: ${r.stderr}`).toBe(1);
      expect(JSON.parse(r.stdout), sql).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME", message: expect.stringMatching(/larger than 32 MiB/) } });
      expect(r.peakMiB, `${sql}: peak ${r.peakMiB.toFixed(1)} MiB against ${bound.toFixed(1)} (baseline ${base.peakMiB.toFixed(1)})`).toBeLessThan(bound);
    }
  }, 300_000);

  it("a result under the cap still comes back whole", async () => {
    const r = await exec(server.readerUrl("reex_retail"), "SELECT repeat('x', 1000000) AS v FROM generate_series(1, 20)");
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ ok: true, rowCount: 20 });
  }, 120_000);
});

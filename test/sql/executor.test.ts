import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool, closeDirectConnections, executeDirect, type ExecResult } from "../../src/sql/index.js";
import { ENDLESS_SQL, makeFixtureDb, removeDir, tempDir } from "./helpers.js";

let dir: string;
let db: string;
let pool: ExecutorPool;

beforeAll(async () => {
  dir = tempDir();
  db = makeFixtureDb(join(dir, "fixture.sqlite"));
  pool = new ExecutorPool({ workers: 2 });
  await pool.ready();
});

afterAll(async () => {
  await pool.close();
  closeDirectConnections();
  removeDir(dir);
});

function rowsOf(result: ExecResult): unknown[][] {
  if (!result.ok) throw new Error(`query failed: ${result.error.code}: ${result.error.message}`);
  return result.rows;
}

describe("executor pool answers queries off the event loop", () => {
  it("returns columns, rows and flags in the ExecResult shape", async () => {
    const r = await pool.execute(db, "SELECT id, name FROM t WHERE id <= 3 ORDER BY id");
    expect(r).toMatchObject({
      ok: true,
      columns: ["id", "name"],
      rows: [
        [1, "name1"],
        [2, ""],
        [3, "name3"],
      ],
      rowCount: 3,
      truncated: false,
      empty: false,
    });
    expect(r.elapsedMs).toBeGreaterThanOrEqual(0);
  });

  it("round-trips BLOB, NULL, float, and integers beyond 2^53 as bigint", async () => {
    const sql = "SELECT data, score, big, 0.1 + 0.2, 9007199254740993, -9223372036854775808, x'', 'text' FROM t WHERE id IN (1, 2) ORDER BY id";
    for (const r of [await pool.execute(db, sql), executeDirect(db, sql)]) {
      const [first, second] = rowsOf(r) as unknown[][];
      expect(first![0]).toBeInstanceOf(Uint8Array);
      expect([...(first![0] as Uint8Array)]).toEqual([0, 1, 2, 255]);
      expect(first!.slice(1)).toEqual([1.5, 2n ** 60n, 0.30000000000000004, 9007199254740993n, -9223372036854775808n, expect.any(Uint8Array), "text"]);
      expect((first![6] as Uint8Array).length).toBe(0);
      expect(second!.slice(0, 3)).toEqual([null, null, 2]);
      expect(typeof second![2]).toBe("number");
    }
  });

  it("flags an empty result without calling it an error", async () => {
    expect(await pool.execute(db, "SELECT x FROM e")).toMatchObject({ ok: true, columns: ["x"], rows: [], rowCount: 0, empty: true, truncated: false });
  });

  it("caps rows at maxRows and sets truncated only when more rows exist", async () => {
    expect(await pool.execute(db, "SELECT id FROM t", { maxRows: 10 })).toMatchObject({ rowCount: 10, truncated: true });
    expect(await pool.execute(db, "SELECT id FROM t", { maxRows: 49 })).toMatchObject({ rowCount: 49, truncated: true });
    expect(await pool.execute(db, "SELECT id FROM t", { maxRows: 50 })).toMatchObject({ rowCount: 50, truncated: false });
    expect(await pool.execute(db, "SELECT id FROM t")).toMatchObject({ rowCount: 50, truncated: false });
    expect(await pool.execute(db, "SELECT id FROM t", { maxRows: 0 })).toMatchObject({ rowCount: 0, truncated: true, empty: true });
  });

  it("stops reading an endless result at maxRows + 1 instead of materialising it", async () => {
    const r = await pool.execute(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c", { maxRows: 5, timeoutMs: 2000 });
    expect(r).toMatchObject({ ok: true, rows: [[1], [2], [3], [4], [5]], truncated: true });
  });

  it("answers many concurrent queries, each with its own result", async () => {
    const ids = Array.from({ length: 40 }, (_, i) => (i % 50) + 1);
    const results = await Promise.all(ids.map((id) => pool.execute(db, `SELECT id, name FROM t WHERE id = ${id}`)));
    results.forEach((r, i) => expect(rowsOf(r)).toEqual([[ids[i], ids[i] === 2 ? "" : `name${ids[i]}`]]));
  });

  it("answers a runaway query SQL_TIMEOUT from its own timer, keeps serving others, and replaces the killed child", async () => {
    const spawnedBefore = pool.stats().spawned;
    const start = performance.now();
    let answeredAt = 0;
    const slow = pool.execute(db, ENDLESS_SQL, { timeoutMs: 500 }).then((r) => {
      answeredAt = performance.now() - start;
      return r;
    });
    await new Promise((res) => setTimeout(res, 50));
    const during: number[] = [];
    for (let i = 1; i <= 5; i++) {
      const r = await pool.execute(db, `SELECT ${i}`);
      expect(rowsOf(r)).toEqual([[i]]);
      during.push(performance.now() - start);
    }
    const timedOut = await slow;
    expect(timedOut).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT", category: "timeout" } });
    expect(answeredAt).toBeGreaterThanOrEqual(490);
    expect(answeredAt).toBeLessThan(700);
    expect(Math.max(...during)).toBeLessThan(answeredAt);
    expect(pool.stats().killed).toBeGreaterThanOrEqual(1);
    const after = await Promise.all([1, 2, 3, 4].map((i) => pool.execute(db, `SELECT ${i} * 10`)));
    expect(after.map(rowsOf)).toEqual([[[10]], [[20]], [[30]], [[40]]]);
    expect(pool.stats().spawned).toBe(spawnedBefore + 1);
    expect(pool.stats().workers).toBe(2);
  });

  it("stops a running query when its AbortSignal fires, and drops a queued one", async () => {
    const small = new ExecutorPool({ workers: 1 });
    try {
      await small.ready();
      const running = new AbortController();
      const queued = new AbortController();
      const a = small.execute(db, ENDLESS_SQL, { signal: running.signal, timeoutMs: 30_000 });
      const b = small.execute(db, "SELECT 1", { signal: queued.signal });
      const start = performance.now();
      queued.abort();
      expect(await b).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT", message: expect.stringMatching(/cancelled/) } });
      running.abort();
      expect(await a).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT", category: "timeout" } });
      expect(performance.now() - start).toBeLessThan(200);
      expect(rowsOf(await small.execute(db, "SELECT 7"))).toEqual([[7]]);
      const aborted = new AbortController();
      aborted.abort();
      expect(await small.execute(db, "SELECT 1", { signal: aborted.signal })).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT" } });
    } finally {
      await small.close();
    }
  });

  it("answers SQL_RUNTIME when a child dies mid-query and serves the next query from a replacement", async () => {
    const small = new ExecutorPool({ workers: 1 });
    try {
      await small.ready();
      const pending = small.execute(db, ENDLESS_SQL, { timeoutMs: 30_000 });
      await new Promise((res) => setTimeout(res, 50));
      process.kill(small.stats().pids[0]!, "SIGKILL");
      const r = await pending;
      expect(r).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME", category: "runtime", message: expect.stringMatching(/crashed/) } });
      expect(rowsOf(await small.execute(db, "SELECT 8"))).toEqual([[8]]);
      expect(small.stats()).toMatchObject({ crashed: 1, spawned: 2, workers: 1 });
    } finally {
      await small.close();
    }
  });

  it("answers pending and later work EXECUTOR_UNAVAILABLE once closed", async () => {
    const small = new ExecutorPool({ workers: 1 });
    await small.ready();
    const running = small.execute(db, ENDLESS_SQL, { timeoutMs: 30_000 });
    const queued = small.execute(db, "SELECT 1");
    await small.close();
    const unavailable = { ok: false, error: { code: "EXECUTOR_UNAVAILABLE" } };
    expect(await running).toMatchObject(unavailable);
    expect(await queued).toMatchObject(unavailable);
    expect(await small.execute(db, "SELECT 1")).toMatchObject(unavailable);
    expect(small.stats().workers).toBe(0);
  });

  it("rejects nonsensical limits as BAD_REQUEST instead of running with them", async () => {
    await expect(pool.execute(db, "SELECT 1", { timeoutMs: 0 })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(pool.execute(db, "SELECT 1", { maxRows: -1 })).rejects.toMatchObject({ code: "BAD_REQUEST" });
  });
});

describe("executor limits the size of what crosses the process boundary", () => {
  it("fails SQL_RUNTIME instead of shipping a result larger than maxResultBytes", async () => {
    const small = new ExecutorPool({ workers: 1, maxResultBytes: 1024 * 1024 });
    try {
      const big = await small.execute(db, "SELECT zeroblob(2 * 1024 * 1024)");
      expect(big).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME", category: "runtime", message: expect.stringMatching(/larger than 1 MiB/) } });
      const many = await small.execute(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 2000) SELECT printf('%01000d', x) FROM c", {
        maxRows: 5000,
      });
      expect(many).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME" } });
      expect(await small.execute(db, "SELECT length(zeroblob(2 * 1024 * 1024))")).toMatchObject({ ok: true, rows: [[2097152]] });
    } finally {
      await small.close();
    }
  });
});

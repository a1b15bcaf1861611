/**
 * Issue #83 on a real PostgreSQL, as the SELECT-only role: error and notice messages are metered
 * like rows (a 100 MB error echo is cut at MAX_NOTICE_BYTES with a marker, the message capped at
 * MAX_MESSAGE_BYTES, memory stays flat, three at once included); redaction of a 384 KB error is
 * instant; operators inside `op ANY/ALL (subquery)` are checked; the allow-list holds operators,
 * casts and types to what is known safe and is read again when the catalogue changes, so an
 * operator, cast, type or overload created after the source connected is refused (fail closed);
 * and a 3,000-term expression gets a typed answer, not a RangeError.
 */
import { spawn } from "node:child_process";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ReexError } from "../../src/errors/index.js";
import { MAX_MESSAGE_BYTES } from "../../src/errors/testing.js";
import { checkPostgresSql, PostgresSource } from "../../src/pg/index.js";
import { FUNCTION_CATALOG_SQL } from "../../src/pg/functions.js";
import { startPostgres, type PgServer } from "../helpers/postgres.js";
import { watchPeak } from "../security/rss.js";

let server: PgServer;
let admin: pg.Client;
let url: string;

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

beforeAll(async () => {
  server = await startPostgres();
  const root = new pg.Client({ connectionString: server.adminUrl });
  await root.connect();
  await root.query("CREATE DATABASE reex_hard");
  await root.end();
  admin = new pg.Client({ connectionString: server.adminUrlOf("reex_hard") });
  await admin.connect();
  await admin.query("CREATE TABLE t (a int PRIMARY KEY, b text)");
  await admin.query("INSERT INTO t VALUES (1, 'x'), (2, 'y')");
  await admin.query("GRANT SELECT ON t TO reex_reader");
  // a volatile function of a user, behind an operator created before the source connects
  await admin.query("CREATE FUNCTION public.volatile_eq(int, int) RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT $1 = $2 $$");
  await admin.query("CREATE OPERATOR public.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = public.volatile_eq)");
  // messages longer than the meter reads, for the transaction layer alone (the guard refuses plpgsql functions)
  await admin.query("CREATE FUNCTION public.noisy() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE NOTICE '%', repeat('n', 1000000); RETURN 1; END $$");
  await admin.query(
    "CREATE FUNCTION public.loud() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION USING ERRCODE = '42703', MESSAGE = repeat('e', 1000000); END $$",
  );
  url = server.readerUrl("reex_hard");
});

afterAll(async () => {
  await admin?.end();
  await server?.stop();
});

describe("error and notice messages are metered like rows", () => {
  it("a 100 MB error echo is cut with a marker and capped, and the source answers the next query", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 2, timeoutMs: 30_000 });
    try {
      const t0 = performance.now();
      const r = await source.execute("SELECT repeat(repeat('x', 10000), 10000)::int");
      const ms = performance.now() - t0;
      expect(r.ok).toBe(false);
      if (r.ok) return;
      console.log(`100 MB error echo: ${r.error.code} in ${ms.toFixed(0)} ms, message ${bytes(r.error.message)} bytes`);
      expect(r.error.code).toBe("SQL_RUNTIME");
      expect(r.error.message).toMatch(/^invalid input syntax for type integer: "x+/);
      expect(r.error.message).toMatch(/\[cut at 8192 bytes\]$/);
      expect(bytes(r.error.message)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
      expect(await source.execute("SELECT count(*) AS n FROM t")).toMatchObject({ ok: true, rows: [[2]] });
    } finally {
      await source.close();
    }
  }, 120_000);

  it("the probe's redaction bomb answers at once with a capped message, and its ReexError is instant", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 1 });
    try {
      const t0 = performance.now();
      const r = await source.execute("SELECT repeat('postgres://a', 32000)::int");
      const ms = performance.now() - t0;
      expect(r.ok).toBe(false);
      if (r.ok) return;
      const t1 = performance.now();
      const err = new ReexError(r.error.code, r.error.message);
      const errMs = performance.now() - t1;
      console.log(`repeat('postgres://a', 32000)::int: ${ms.toFixed(0)} ms to answer, ReexError in ${errMs.toFixed(2)} ms, ${bytes(err.message)} bytes`);
      expect(ms).toBeLessThan(2000);
      expect(errMs).toBeLessThan(100);
      expect(bytes(err.message)).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    } finally {
      await source.close();
    }
  });

  it("a long notice and a long error raised by a function are cut at the meter, the SQLSTATE kept", async () => {
    const source = new PostgresSource({ url: server.adminUrlOf("reex_hard"), name: "hard-admin", poolSize: 1 });
    try {
      const notice = await source.runChecked("SELECT public.noisy()");
      expect(notice).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME", message: expect.stringMatching(/notice of \d+ bytes, more than the 16384/) } });
      const error = await source.runChecked("SELECT public.loud()");
      expect(error).toMatchObject({ ok: false, error: { code: "SQL_NO_SUCH_COLUMN", message: expect.stringMatching(/^e+ … \[cut at 8192 bytes\]$/) } });
      expect(await source.runChecked("SELECT 1 AS one")).toMatchObject({ ok: true, rows: [[1]] });
    } finally {
      await source.close();
    }
  });

  it.skipIf(process.platform !== "linux")(
    "three 100 MB error echoes at once keep reex's memory flat",
    async () => {
      const run = (sql: string): Promise<{ code: number; stdout: string; peakMiB: number }> =>
        new Promise((resolve) => {
          const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--json", "--db", url, sql], {
            env: { ...(process.env as Record<string, string>), REEX_SQL_TIMEOUT_MS: "60000" },
          });
          let stdout = "";
          child.stdout.on("data", (c: Buffer) => (stdout += c));
          const peak = watchPeak(child.pid!, { self: true });
          child.on("exit", (code) => resolve({ code: code ?? -1, stdout, peakMiB: peak.stop() }));
        });
      const base = await run("SELECT 1 AS one");
      expect(base.code).toBe(0);
      const bombs = await Promise.all([1, 2, 3].map(() => run("SELECT repeat(repeat('x', 10000), 10000)::int")));
      console.log(`reex exec peak RSS: SELECT 1 ${base.peakMiB.toFixed(0)} MiB; 100 MB error echo ${bombs.map((b) => b.peakMiB.toFixed(0)).join(", ")} MiB`);
      for (const b of bombs) {
        expect(b.code).toBe(1);
        expect(b.stdout.length).toBeLessThan(3 * MAX_MESSAGE_BYTES);
        expect(JSON.parse(b.stdout)).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME" } });
        expect(b.peakMiB).toBeLessThan(base.peakMiB + 64);
      }
      const inProcess = new PostgresSource({ url, name: "hard", poolSize: 3, timeoutMs: 60_000 });
      try {
        const before = process.memoryUsage().rss;
        let peak = before;
        const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
        const rs = await Promise.all([1, 2, 3].map(() => inProcess.execute("SELECT repeat(repeat('x', 10000), 10000)::int")));
        clearInterval(timer);
        console.log(`one process, three at once: RSS ${(before / 2 ** 20).toFixed(0)} → peak ${(peak / 2 ** 20).toFixed(0)} MiB`);
        for (const r of rs) expect(r.ok).toBe(false);
        expect(peak - before).toBeLessThan(128 * 2 ** 20);
      } finally {
        await inProcess.close();
      }
    },
    240_000,
  );
});

describe("the allow-list: operators in every node, fail closed for what is new", () => {
  it("an operator inside op ANY/ALL (subquery) is checked like any other", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 1 });
    try {
      for (const sql of [
        "SELECT 1 WHERE 1 === ANY (SELECT 1)",
        "SELECT 1 WHERE 1 === ALL (SELECT 1)",
        "SELECT 1 WHERE 1 === SOME (SELECT a FROM t)",
        "SELECT 1 WHERE 1 === ANY (ARRAY[1])",
        "SELECT 1 === 1",
        "SELECT a FROM t ORDER BY a USING ===",
      ]) {
        expect(await source.execute(sql), sql).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
      }
      expect(await source.execute("SELECT 1 AS n WHERE 1 = ANY (SELECT a FROM t)")).toMatchObject({ ok: true, rows: [[1]] });
    } finally {
      await source.close();
    }
  });

  it("an operator, cast, type or overload created after the source connected is refused, and allowed again once dropped", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 2 });
    try {
      expect(await source.execute("SELECT lower('A') AS l, 1 + 1 AS s")).toMatchObject({ ok: true, rows: [["a", 2]] });
      const before = await source.functionPolicy();
      await admin.query("CREATE FUNCTION public.sneaky(int, int) RETURNS boolean LANGUAGE sql VOLATILE AS $$ SELECT true $$");
      await admin.query("CREATE OPERATOR public.#~# (LEFTARG = int, RIGHTARG = int, FUNCTION = public.sneaky)");
      expect(await source.execute("SELECT 1 #~# 1")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
      expect(await source.execute("SELECT 1 WHERE 1 #~# ANY (SELECT 1)")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
      // a query the old list allows finds the catalogue changed and reads it again; the new operator stays refused
      expect(await source.execute("SELECT 1 AS one")).toMatchObject({ ok: true, rows: [[1]] });
      expect(await source.functionPolicy()).not.toBe(before);
      expect(await source.execute("SELECT 1 #~# 1")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
      // a new overload of a built-in operator's name, and of a built-in function's name
      await admin.query("CREATE FUNCTION public.sneaky_plus(int, text) RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT 1 $$");
      await admin.query("CREATE OPERATOR public.+ (LEFTARG = int, RIGHTARG = text, FUNCTION = public.sneaky_plus)");
      await admin.query("CREATE FUNCTION public.lower(int) RETURNS int LANGUAGE sql VOLATILE AS $$ SELECT 1 $$");
      expect(await source.execute("SELECT 1 + 1")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED", message: expect.stringMatching(/operator \+/) } });
      expect(await source.execute("SELECT lower(1)")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
      // a type and a cast
      await admin.query("CREATE DOMAIN public.checked AS int CHECK (public.sneaky(VALUE, 1))");
      await admin.query("CREATE TYPE public.mood AS ENUM ('ok')");
      await admin.query("CREATE FUNCTION public.to_mood(int) RETURNS public.mood LANGUAGE sql VOLATILE AS $$ SELECT 'ok'::public.mood $$");
      const mood = await source.execute("SELECT 'ok'::mood AS m");
      expect(mood.ok ? mood.rows : mood.error.message).toEqual([["ok"]]);
      await admin.query("CREATE CAST (int AS public.mood) WITH FUNCTION public.to_mood(int)");
      expect(await source.execute("SELECT 1::checked")).toMatchObject({
        ok: false,
        error: { code: "SQL_REFUSED", message: expect.stringMatching(/type checked/) },
      });
      expect(await source.execute("SELECT 1::mood")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED", message: expect.stringMatching(/type mood/) } });
      expect(await source.execute("SELECT '{1}'::_checked")).toMatchObject({
        ok: false,
        error: { code: "SQL_REFUSED", message: expect.stringMatching(/type _checked/) },
      });
      await admin.query("DROP CAST (int AS public.mood)");
      await admin.query("DROP OPERATOR public.+ (int, text)");
      await admin.query("DROP FUNCTION public.lower(int)");
      expect(await source.execute("SELECT lower('A') AS l, 1 + 1 AS s")).toMatchObject({ ok: true, rows: [["a", 2]] });
    } finally {
      await source.close();
    }
  });

  it("tables created after the source connected, temporary or not, do not make it read the list again", async () => {
    await admin.query("CREATE TEMP TABLE warm (a int)"); // the session's temporary schema exists before the source connects
    const source = new PostgresSource({ url, name: "hard", poolSize: 1 });
    try {
      expect(await source.execute("SELECT 1 AS one")).toMatchObject({ ok: true });
      const before = await source.functionPolicy();
      await admin.query("CREATE TABLE churn (a int)");
      await admin.query("CREATE TEMP TABLE churn_tmp (a int)");
      expect(await source.execute("SELECT 1 AS one")).toMatchObject({ ok: true });
      expect(await source.functionPolicy()).toBe(before);
    } finally {
      await admin.query("DROP TABLE churn");
      await source.close();
    }
  });

  it("the catalogue check costs little per query", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 1 });
    try {
      await source.execute("SELECT 1");
      const t0 = performance.now();
      for (let i = 0; i < 50; i++) await source.execute("SELECT a FROM t WHERE a = 1");
      const perQuery = (performance.now() - t0) / 50;
      const t1 = performance.now();
      for (let i = 0; i < 50; i++) await source.runChecked("SELECT a FROM t WHERE a = 1");
      const bare = (performance.now() - t1) / 50;
      const t2 = performance.now();
      for (let i = 0; i < 50; i++) await checkPostgresSql("SELECT a FROM t WHERE a = 1", await source.functionPolicy());
      const parse = (performance.now() - t2) / 50;
      const plan = await admin.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${FUNCTION_CATALOG_SQL.fingerprint}`);
      const server = (plan.rows[0]["QUERY PLAN"] as { "Execution Time": number }[])[0]!["Execution Time"];
      console.log(
        `execute (guard + catalogue check): ${perQuery.toFixed(2)} ms a query; the transaction layer alone: ${bare.toFixed(2)} ms; ` +
          `the parser check: ${parse.toFixed(2)} ms; the fingerprint query on the server: ${server.toFixed(2)} ms`,
      );
      expect(perQuery).toBeLessThan(bare + 50);
    } finally {
      await source.close();
    }
  });
});

describe("deep expressions", () => {
  it("a 3,000-term and a 30,000-term expression get typed answers through the source and reex exec", async () => {
    const source = new PostgresSource({ url, name: "hard", poolSize: 1 });
    try {
      for (const terms of [3_000, 30_000]) {
        const r = await source.execute(`SELECT ${Array.from({ length: terms }, () => "1").join("+")} AS n`);
        console.log(`${terms} terms: ${r.ok ? `ok, ${String(r.rows[0]?.[0])}` : `${r.error.code}: ${r.error.message.slice(0, 80)}`}`);
        expect(r.ok || ["SQL_REFUSED", "SQL_RUNTIME"].includes(r.error.code), `${terms} terms`).toBe(true);
      }
    } finally {
      await source.close();
    }
    const out = await new Promise<{ code: number; text: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--json", "--db", url, `SELECT ${"1+".repeat(29_999)}1`]);
      let text = "";
      child.stdout.on("data", (c: Buffer) => (text += c));
      child.stderr.on("data", (c: Buffer) => (text += c));
      child.on("exit", (code) => resolve({ code: code ?? -1, text }));
    });
    expect(out.text).not.toMatch(/RangeError|Maximum call stack| {4}at /);
    expect(JSON.parse(out.text)).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
  }, 120_000);
});

/**
 * The parser layer and the by-name layer of the Postgres guard on their own, without a server:
 * PostgreSQL's parser (libpg_query) decides what the text is, so comment and quoting tricks
 * cannot hide a second statement or a write.
 */
import { describe, expect, test } from "vitest";
import { checkPostgresSql } from "../../src/pg/index.js";
import { deniedFunction, deniedFunctionsIn } from "../../src/pg/testing.js";

async function refused(sql: string): Promise<string> {
  const r = await checkPostgresSql(sql);
  expect(r.ok, sql).toBe(false);
  if (r.ok) return "";
  expect(r.error.code, sql).toBe("SQL_REFUSED");
  expect(r.error.category).toBe("refused");
  return r.error.message;
}

describe("the parser layer", () => {
  test("plain reads pass and come back as the one statement, without the trailing ; or comment", async () => {
    for (const [sql, statement] of [
      ["SELECT 1", "SELECT 1"],
      ["select count(*) from t;", "select count(*) from t"],
      ["WITH x AS (SELECT 1 AS a) SELECT a FROM x", "WITH x AS (SELECT 1 AS a) SELECT a FROM x"],
      ["VALUES (1, 'a'), (2, 'b')", "VALUES (1, 'a'), (2, 'b')"],
      ["TABLE customers", "TABLE customers"],
      ["SELECT 'a;b' AS s; -- trailing comment", "SELECT 'a;b' AS s"],
      ["/* lead */ SELECT 2 ;", "SELECT 2 "],
      ["SELECT 'é' || name FROM t;", "SELECT 'é' || name FROM t"],
    ] as const) {
      const r = await checkPostgresSql(sql);
      expect(r, sql).toEqual({ ok: true, statement });
    }
  });

  test("writes of every kind are refused, also inside WITH", async () => {
    for (const sql of [
      "INSERT INTO t VALUES (1)",
      "UPDATE t SET a = 1",
      "DELETE FROM t",
      "MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE",
      "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
      "WITH u AS (UPDATE t SET a = 2 RETURNING a) SELECT count(*) FROM u",
      "SELECT * FROM (WITH i AS (INSERT INTO t VALUES (1) RETURNING a) SELECT a FROM i) AS s",
    ]) {
      expect(await refused(sql)).toMatch(/writes are not allowed/);
    }
  });

  test("DDL, COPY, DO, CALL, SET, transaction control, EXPLAIN and SELECT INTO / FOR UPDATE are refused", async () => {
    expect(await refused("CREATE TABLE x (a int)")).toMatch(/schema changes/);
    expect(await refused("DROP TABLE customers")).toMatch(/schema changes/);
    expect(await refused("ALTER TABLE t ADD COLUMN b int")).toMatch(/schema changes/);
    expect(await refused("TRUNCATE t")).toMatch(/schema changes/);
    expect(await refused("GRANT ALL ON t TO public")).toMatch(/schema changes/);
    expect(await refused("COPY t TO '/tmp/x'")).toMatch(/COPY/);
    expect(await refused("COPY (SELECT 1) TO PROGRAM 'id'")).toMatch(/COPY/);
    expect(await refused("DO $$ BEGIN DELETE FROM t; END $$")).toMatch(/DO blocks/);
    expect(await refused("CALL p()")).toMatch(/CALL/);
    expect(await refused("SET default_transaction_read_only = off")).toMatch(/SET/);
    expect(await refused("BEGIN")).toMatch(/transaction control/);
    expect(await refused("COMMIT")).toMatch(/transaction control/);
    expect(await refused("EXPLAIN ANALYZE DELETE FROM t")).toMatch(/EXPLAIN/);
    expect(await refused("SELECT * INTO t2 FROM t")).toMatch(/SELECT INTO/);
    expect(await refused("SELECT * FROM t FOR UPDATE")).toMatch(/FOR UPDATE/);
    expect(await refused("SELECT * FROM t FOR SHARE SKIP LOCKED")).toMatch(/FOR UPDATE/);
    expect(await refused("LISTEN x")).toMatch(/only one read-only query/);
    expect(await refused("VACUUM t")).toMatch(/schema changes|only one/);
    expect(await refused("PREPARE p AS SELECT 1")).toMatch(/only one read-only query/);
  });

  test("several statements are refused however comments and quotes try to hide the second", async () => {
    for (const sql of [
      "SELECT 1; SELECT 2",
      "SELECT 1; DELETE FROM t",
      "SELECT 1 -- comment\n; DROP TABLE t",
      "SELECT 1 /* ; */ ; DROP TABLE t",
      "SELECT 'x'';' ; DELETE FROM t",
      "SELECT $$;$$; DELETE FROM t",
      'SELECT "a;b" FROM t; UPDATE t SET a = 1',
      "SELECT 1;\n\n/* x */ COMMIT",
    ]) {
      expect(await refused(sql)).toMatch(/only one statement/);
    }
  });

  test("a comment or string that only looks like a write does not refuse a read", async () => {
    for (const sql of ["SELECT 1 -- ; DROP TABLE t", "SELECT '; DELETE FROM t' AS s", "SELECT 1 /* DROP TABLE t; */", "SELECT $tag$; DROP$tag$"]) {
      expect((await checkPostgresSql(sql)).ok, sql).toBe(true);
    }
  });

  test("bad SQL is SQL_SYNTAX with PostgreSQL's own message, an empty string too", async () => {
    const r = await checkPostgresSql("SELEC 1");
    expect(r).toMatchObject({ ok: false, error: { code: "SQL_SYNTAX", category: "syntax" } });
    if (!r.ok) expect(r.error.message).toMatch(/syntax error at or near "SELEC"/);
    expect(await checkPostgresSql("  -- nothing\n")).toMatchObject({ ok: false, error: { code: "SQL_SYNTAX" } });
    expect(await checkPostgresSql("SELECT $1")).toMatchObject({ ok: false, error: { code: "SQL_SYNTAX", message: expect.stringMatching(/bind parameters/) } });
  });
});

describe("the by-name layer", () => {
  test("functions that reach outside the database are refused wherever they appear, qualified or quoted", async () => {
    for (const [sql, name] of [
      ["SELECT pg_read_file('/etc/passwd')", "pg_read_file"],
      ["SELECT pg_catalog.pg_read_binary_file('/etc/passwd')", "pg_read_binary_file"],
      ["SELECT * FROM pg_ls_dir('.')", "pg_ls_dir"],
      ["SELECT lo_export(1, '/tmp/x')", "lo_export"],
      ["SELECT lo_import('/etc/passwd')", "lo_import"],
      ["SELECT * FROM dblink('host=evil', 'select 1') AS t(a int)", "dblink"],
      ["SELECT dblink_exec('delete from t')", "dblink_exec"],
      ['SELECT "pg_sleep"(100)', "pg_sleep"],
      ["SELECT PG_SLEEP_FOR('1 hour')", "pg_sleep_for"],
      ["SELECT pg_terminate_backend(pid) FROM pg_stat_activity", "pg_terminate_backend"],
      ["SELECT pg_cancel_backend(1)", "pg_cancel_backend"],
      ["SELECT set_config('default_transaction_read_only', 'off', false)", "set_config"],
      ["SELECT a FROM t WHERE a IN (SELECT pg_advisory_lock(1))", "pg_advisory_lock"],
      ["SELECT query_to_xml('delete from t', true, true, '')", "query_to_xml"],
      ["SELECT nextval('s')", "nextval"],
      ["SELECT pg_reload_conf()", "pg_reload_conf"],
      ["WITH x AS (SELECT pg_notify('c', 'm')) SELECT * FROM x", "pg_notify"],
      ["SELECT CASE WHEN true THEN pg_stat_file('/') END", "pg_stat_file"],
    ] as const) {
      expect(await refused(sql)).toBe(`${name}() reaches outside the database and is not allowed: query only the tables`);
      expect(await deniedFunctionsIn(sql)).toContain(name);
    }
  });

  test("ordinary functions and columns that merely share a prefix are allowed", async () => {
    expect(deniedFunction("lower")).toBeNull();
    expect(deniedFunction("pg_typeof")).toBeNull();
    expect(deniedFunction("Lo_Export")).toBe("lo_export");
    for (const sql of [
      "SELECT lower(name), count(*), avg(x)::numeric(10,2) FROM t GROUP BY 1",
      "SELECT pg_sleep_col FROM t",
      "SELECT lo_col FROM lo_table",
      "SELECT pg_typeof(1)",
    ]) {
      expect((await checkPostgresSql(sql)).ok, sql).toBe(true);
      expect(await deniedFunctionsIn(sql)).toEqual([]);
    }
  });
});

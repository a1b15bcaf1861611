import { copyFileSync, existsSync, renameSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool, closeDirectConnections, executeDirect, type ExecResult } from "../../src/sql/index.js";
import { lexicalRefusal, scanSql } from "../../src/sql/testing.js";
import { fileHash, listDir, makeFixtureDb, removeDir, tempDir } from "./helpers.js";

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

const hostile = (): string[] => [
  "INSERT INTO t (id, name) VALUES (100, 'x') RETURNING *",
  "UPDATE t SET name = 'x'",
  "DELETE FROM t",
  "  delete from t where id = 1",
  "REPLACE INTO e VALUES (1)",
  "WITH x AS (SELECT 1) DELETE FROM t",
  "WITH x AS (SELECT 1 AS a) INSERT INTO e SELECT a FROM x",
  "CREATE TABLE z (a)",
  "CREATE TEMP TABLE z (a)",
  "DROP TABLE t",
  "ALTER TABLE t ADD COLUMN z",
  "/* leading comment */ DROP TABLE t",
  "-- leading line comment\nDELETE FROM t",
  "SELECT 1; DROP TABLE t",
  "SELECT 1;DROP TABLE t;",
  "select 1; select 2",
  `ATTACH '${join(dir, "attached.db")}' AS x; CREATE TABLE x.t (a)`,
  `ATTACH '${join(dir, "attached.db")}' AS x`,
  "DETACH main",
  "BEGIN",
  "BEGIN IMMEDIATE",
  "COMMIT",
  "END",
  "ROLLBACK",
  "SAVEPOINT s",
  "RELEASE s",
  "PRAGMA table_info(t)",
  "PRAGMA user_version",
  "PRAGMA writable_schema = 1",
  "PRAGMA journal_mode = WAL",
  "PRAGMA query_only = 0",
  "EXPLAIN PRAGMA writable_schema = 1",
  "EXPLAIN DELETE FROM t",
  "VACUUM",
  `VACUUM INTO '${join(dir, "copy.db")}'`,
  "REINDEX",
  "ANALYZE",
  "SELECT load_extension('/nonexistent/ext')",
];

function expectRefused(result: ExecResult, sql: string): void {
  expect(result.ok, sql).toBe(false);
  if (!result.ok) {
    expect(result.error.code, sql).toBe("SQL_REFUSED");
    expect(result.error.category, sql).toBe("refused");
    expect(result.error.message.length, sql).toBeGreaterThan(10);
  }
}

describe("guard refuses everything but one read-only query", () => {
  it("refuses every hostile statement in-process and leaves the database file and its folder untouched", () => {
    const before = fileHash(db);
    const files = listDir(dir);
    for (const sql of hostile()) expectRefused(executeDirect(db, sql), sql);
    expect(fileHash(db)).toBe(before);
    expect(listDir(dir)).toEqual(files);
    expect(existsSync(join(dir, "copy.db"))).toBe(false);
    expect(executeDirect(db, "SELECT count(*) FROM t")).toMatchObject({ ok: true, rows: [[50]] });
  });

  it("refuses every hostile statement through the pool and leaves the database file and its folder untouched", async () => {
    const before = fileHash(db);
    const files = listDir(dir);
    const results = await Promise.all(hostile().map((sql) => pool.execute(db, sql)));
    hostile().forEach((sql, i) => expectRefused(results[i]!, sql));
    expect(fileHash(db)).toBe(before);
    expect(listDir(dir)).toEqual(files);
  });

  it("tells the model why: several statements, PRAGMA, writes and load_extension get specific messages", () => {
    const message = (sql: string): string => {
      const r = executeDirect(db, sql);
      return r.ok ? "" : r.error.message;
    };
    expect(message("SELECT 1; DROP TABLE t")).toMatch(/one statement/);
    expect(message("PRAGMA table_info(t)")).toMatch(/pragma_table_info/);
    expect(message("WITH x AS (SELECT 1) DELETE FROM t")).toMatch(/writes are not allowed/);
    expect(message("INSERT INTO e VALUES (1) RETURNING *")).toMatch(/writes are not allowed/);
    expect(message("SELECT load_extension('x')")).toMatch(/load_extension/);
  });

  it("refuses writes that only SQLite's verdict catches (stmt.readonly false on a WITH … DELETE)", () => {
    expect(lexicalRefusal("WITH x AS (SELECT 1) DELETE FROM t")).toBeNull();
    expectRefused(executeDirect(db, "WITH x AS (SELECT 1) DELETE FROM t"), "with-delete");
  });

  it("runs read-only queries: trailing semicolons and comments, VALUES, WITH, views, EXPLAIN QUERY PLAN, pragma table functions", () => {
    const allowed = [
      "SELECT 1;",
      "SELECT 1; -- trailing comment",
      "SELECT 1 /* c */ ;  \n /* more */ ;",
      "SELECT ';' AS s",
      "SELECT 'a;b', [we;ird] FROM (SELECT 1 AS [we;ird])",
      "VALUES (1, 'a')",
      "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
      "SELECT * FROM v",
      "EXPLAIN QUERY PLAN SELECT * FROM t WHERE id = 3",
      "SELECT name, type FROM pragma_table_info('t')",
      "SELECT name FROM sqlite_schema",
    ];
    for (const sql of allowed) expect(executeDirect(db, sql).ok, sql).toBe(true);
    expect(executeDirect(db, "SELECT name FROM pragma_table_info('t') ORDER BY cid")).toMatchObject({
      rows: [["id"], ["name"], ["score"], ["data"], ["big"]],
    });
  });

  it("scans statement boundaries without being fooled by literals, quoted identifiers or comments", () => {
    expect(scanSql("select 'it''s; fine' from t").multiple).toBe(false);
    expect(scanSql('select "a;b" from t').multiple).toBe(false);
    expect(scanSql("select `a;b` from t").multiple).toBe(false);
    expect(scanSql("select 1 -- ; drop table t").multiple).toBe(false);
    expect(scanSql("select 1 /* ; drop table t */").multiple).toBe(false);
    expect(scanSql("select 1; /* x */ select 2").multiple).toBe(true);
    expect(scanSql("select 1;;;").multiple).toBe(false);
    expect(scanSql("  explain query plan select 1").leading).toEqual(["EXPLAIN", "QUERY", "PLAN", "SELECT"]);
  });

  it("opens a rollback-journal database without creating journal, -wal or -shm files", async () => {
    const files = listDir(dir);
    await pool.execute(db, "SELECT * FROM t");
    executeDirect(db, "SELECT * FROM t");
    expect(listDir(dir)).toEqual(files);
  });

  it("reads a WAL-mode database without changing its main file", async () => {
    const walDir = tempDir();
    try {
      const wal = makeFixtureDb(join(walDir, "wal.sqlite"), { wal: true });
      const before = fileHash(wal);
      expect(await pool.execute(wal, "SELECT count(*) FROM t")).toMatchObject({ ok: true, rows: [[50]] });
      expectRefused(await pool.execute(wal, "DELETE FROM t"), "wal delete");
      expect(fileHash(wal)).toBe(before);
    } finally {
      removeDir(walDir);
    }
  });

  it("sees a database file that was replaced by a new one (new inode) on the next query", () => {
    const other = join(dir, "other.sqlite");
    const a = makeFixtureDb(join(dir, "a.sqlite"));
    copyFileSync(a, other);
    expect(executeDirect(other, "SELECT count(*) FROM t")).toMatchObject({ rows: [[50]] });
    const next = new Database(a);
    next.exec("DELETE FROM t WHERE id > 10");
    next.close();
    copyFileSync(a, join(dir, "tmp.sqlite"));
    renameSync(join(dir, "tmp.sqlite"), other);
    expect(executeDirect(other, "SELECT count(*) FROM t")).toMatchObject({ rows: [[10]] });
  });
});

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool, closeDirectConnections, executeDirect, type ExecResult } from "../../src/sql/index.js";
import { classifySqliteError } from "../../src/sql/testing.js";
import { makeFixtureDb, removeDir, tempDir } from "./helpers.js";

let dir: string;
let db: string;

beforeAll(() => {
  dir = tempDir();
  db = makeFixtureDb(join(dir, "fixture.sqlite"));
});

afterAll(() => {
  closeDirectConnections();
  removeDir(dir);
});

const cases: [sql: string, code: string, category: string][] = [
  ["SELECT nosuch FROM t", "SQL_NO_SUCH_COLUMN", "missing_column"],
  ["SELECT t.nosuch FROM t", "SQL_NO_SUCH_COLUMN", "missing_column"],
  ["SELECT id FROM t, t AS u", "SQL_NO_SUCH_COLUMN", "missing_column"],
  ["SELECT * FROM nosuch", "SQL_NO_SUCH_TABLE", "missing_table"],
  ["SELECT * FROM main.nosuch", "SQL_NO_SUCH_TABLE", "missing_table"],
  ["SELECT nofn(1)", "SQL_FUNCTION", "function"],
  ["SELECT abs(1, 2)", "SQL_FUNCTION", "function"],
  ["SELECT row_number() FROM t", "SQL_FUNCTION", "function"],
  ["SELEC 1", "SQL_SYNTAX", "syntax"],
  ["SELECT (1", "SQL_SYNTAX", "syntax"],
  ["SELECT * FROM t JOIN", "SQL_SYNTAX", "syntax"],
  ["SELECT 1 UNION SELECT 1, 2", "SQL_SYNTAX", "syntax"],
  ["SELECT count(*) FROM t GROUP BY count(*)", "SQL_SYNTAX", "syntax"],
  ["SELECT name FROM t WHERE count(*) > 1", "SQL_SYNTAX", "syntax"],
  ["SELECT id FROM t ORDER BY 3", "SQL_SYNTAX", "syntax"],
  ["SELECT * FROM t HAVING 1", "SQL_SYNTAX", "syntax"],
  ["SELECT (SELECT 1, 2)", "SQL_SYNTAX", "syntax"],
  ["SELECT name FROM t WHERE id = ?", "SQL_SYNTAX", "syntax"],
  ["", "SQL_SYNTAX", "syntax"],
  ["-- only a comment", "SQL_SYNTAX", "syntax"],
  ["SELECT abs(-9223372036854775808)", "SQL_RUNTIME", "runtime"],
  ["SELECT json('{')", "SQL_RUNTIME", "runtime"],
];

describe("errors are classified into stable codes and ReEx categories", () => {
  it.each(cases)("%s → %s (%s)", (sql, code, category) => {
    const r = executeDirect(db, sql);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.error).toMatchObject({ code, category });
      expect(r.error.message).not.toBe("");
      expect(r.elapsedMs).toBeGreaterThanOrEqual(0);
    }
  });

  it("tells the model to inline bind parameters instead of leaving ? in the query", () => {
    const r = executeDirect(db, "SELECT name FROM t WHERE id = ?");
    expect(!r.ok && r.error.message).toMatch(/literal values/);
  });

  it("gives the same classification through the pool as in-process", async () => {
    const pool = new ExecutorPool({ workers: 1 });
    try {
      const results = await Promise.all(cases.map(([sql]) => pool.execute(db, sql)));
      const errorOf = (r: ExecResult): unknown => (r.ok ? null : r.error);
      results.forEach((r, i) => expect(errorOf(r), cases[i]![0]).toEqual(errorOf(executeDirect(db, cases[i]![0]))));
    } finally {
      await pool.close();
    }
  });

  it("reports a missing file as DB_FILE_NOT_FOUND and a non-SQLite file as DB_INVALID", () => {
    expect(executeDirect(join(dir, "missing.sqlite"), "SELECT 1")).toMatchObject({ ok: false, error: { code: "DB_FILE_NOT_FOUND" } });
    const junk = join(dir, "junk.sqlite");
    writeFileSync(junk, "this is not a database ".repeat(200));
    expect(executeDirect(junk, "SELECT 1 FROM sqlite_schema")).toMatchObject({ ok: false, error: { code: "DB_INVALID" } });
  });

  it("maps SQLite wordings it cannot easily provoke here", () => {
    expect(classifySqliteError("misuse of aggregate: count()")).toMatchObject({ code: "SQL_SYNTAX", category: "syntax" });
    expect(classifySqliteError("incomplete input")).toMatchObject({ category: "syntax" });
    expect(classifySqliteError("interrupted")).toMatchObject({ code: "SQL_TIMEOUT", category: "timeout" });
    expect(classifySqliteError("attempt to write a readonly database")).toMatchObject({ code: "SQL_REFUSED", category: "refused" });
    expect(classifySqliteError("database disk image is malformed", "SQLITE_CORRUPT")).toMatchObject({ code: "DB_INVALID" });
    expect(classifySqliteError("datatype mismatch")).toMatchObject({ code: "SQL_RUNTIME", category: "runtime" });
  });
});

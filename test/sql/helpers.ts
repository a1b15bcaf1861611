/** Fixture databases for the SQL tests: real SQLite files in a fresh temp folder per test file. */
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

/** A fresh temp folder; remove it with `rmSync(dir, {recursive: true, force: true})`. */
export function tempDir(prefix = "reex-sql-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Removes a folder made by {@link tempDir}. */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Writes the standard fixture: `t(id, name, score, data)` with 50 rows (one with a BLOB, one with
 * NULLs, one with a 2^60 integer) and an empty table `e(x)`; rollback-journal mode unless `wal`.
 */
export function makeFixtureDb(path: string, options: { wal?: boolean } = {}): string {
  const db = new Database(path);
  if (options.wal) db.pragma("journal_mode = WAL");
  db.exec(`
    CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, data BLOB, big INTEGER);
    CREATE TABLE e (x INTEGER);
    CREATE VIEW v AS SELECT id, name FROM t WHERE id <= 3;
  `);
  const insert = db.prepare("INSERT INTO t (id, name, score, data, big) VALUES (?, ?, ?, ?, ?)");
  db.transaction(() => {
    for (let i = 1; i <= 50; i++) insert.run(i, `name${i}`, i + 0.5, null, i);
  })();
  db.prepare("UPDATE t SET data = ?, big = ? WHERE id = 1").run(Buffer.from([0, 1, 2, 255]), 2n ** 60n);
  db.prepare("UPDATE t SET score = NULL, name = '' WHERE id = 2").run();
  db.close();
  return path;
}

/** SHA-256 of a file's bytes, hex. */
export function fileHash(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** Names in `dir`, sorted. */
export function listDir(dir: string): string[] {
  return readdirSync(dir).sort();
}

/** The never-ending query of the timeout tests. */
export const ENDLESS_SQL = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c";

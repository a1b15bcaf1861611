/**
 * The query runner shared by the executor's child processes and the in-process `executeDirect`:
 * an LRU of read-only connections, each with an LRU of guarded prepared statements, and a row loop
 * that stops at `maxRows + 1` so a huge result never materialises.
 */
import { statSync } from "node:fs";
import type Database from "better-sqlite3";
import { classifyThrown, type SqlErrorInfo } from "./classify.js";
import { openReadonly, prepareGuarded } from "./guard.js";
import type { SqlValue } from "./types.js";

/** A query that ran, before the executor adds its derived flags. */
export interface RunSuccess {
  ok: true;
  columns: string[];
  rows: SqlValue[][];
  truncated: boolean;
  elapsedMs: number;
}

/** A query that was refused or failed, with its classified error. */
export interface RunFailure {
  ok: false;
  error: SqlErrorInfo;
  elapsedMs: number;
}

/** What {@link ConnectionCache.run} answers. */
export type RunOutcome = RunSuccess | RunFailure;

/** Sizes of a {@link ConnectionCache}. */
export interface ConnectionCacheOptions {
  /** Open connections kept (least recently used is closed first). Default 8. */
  maxDatabases?: number;
  /** Prepared statements kept per connection. Default 128. */
  maxStatements?: number;
  /** Largest result (text length + BLOB bytes + 8 per other cell) before the query fails SQL_RUNTIME. Default 32 MiB. */
  maxResultBytes?: number;
  /**
   * Largest string or BLOB SQLite may build (its SQLITE_LIMIT_LENGTH, set when a connection
   * opens), so `zeroblob(500000000)` fails at once rather than allocating. Default 128 MiB
   * (the executor passes a quarter of sql.maxQueryMemoryMB).
   */
  maxValueBytes?: number;
}

interface CachedStatement {
  stmt: Database.Statement;
  columns: string[];
}

interface OpenDatabase {
  db: Database.Database;
  dev: number;
  ino: number;
  statements: Map<string, CachedStatement>;
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function tooBig(limit: number): SqlErrorInfo {
  const mib = Math.round((limit / 1024 / 1024) * 10) / 10;
  return { code: "SQL_RUNTIME", category: "runtime", message: `the result is larger than ${mib} MiB; select fewer rows or columns, or aggregate` };
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * Keeps read-only connections and their guarded statements warm per database path. A file that is
 * replaced (new inode) or deleted is noticed on the next query, at the cost of one stat() call.
 */
export class ConnectionCache {
  private readonly maxDatabases: number;
  private readonly maxStatements: number;
  private readonly maxResultBytes: number;
  private readonly maxValueBytes: number;
  private readonly open = new Map<string, OpenDatabase>();

  constructor(options: ConnectionCacheOptions = {}) {
    this.maxDatabases = options.maxDatabases ?? 8;
    this.maxStatements = options.maxStatements ?? 128;
    this.maxResultBytes = options.maxResultBytes ?? 32 * 1024 * 1024;
    this.maxValueBytes = options.maxValueBytes ?? 128 * 1024 * 1024;
  }

  /**
   * Runs one guarded query and returns its columns and up to `maxRows` rows (integers beyond
   * ±2^53 come back as bigint, BLOBs as Buffer). Never throws for bad SQL or a bad file.
   */
  run(dbPath: string, sql: string, maxRows: number): RunOutcome {
    const start = performance.now();
    try {
      const conn = this.connection(dbPath);
      if ("error" in conn) return { ok: false, error: conn.error, elapsedMs: round(performance.now() - start) };
      let cached = conn.statements.get(sql);
      if (cached) {
        conn.statements.delete(sql);
        conn.statements.set(sql, cached);
      } else {
        const guarded = prepareGuarded(conn.db, sql);
        if (!guarded.ok) return { ok: false, error: guarded.error, elapsedMs: round(performance.now() - start) };
        const stmt = guarded.stmt.raw(true).safeIntegers(true);
        cached = { stmt, columns: stmt.columns().map((c) => c.name) };
        conn.statements.set(sql, cached);
        if (conn.statements.size > this.maxStatements) conn.statements.delete(conn.statements.keys().next().value!);
      }
      const rows: SqlValue[][] = [];
      let truncated = false;
      let bytes = 0;
      for (const row of cached.stmt.iterate() as IterableIterator<SqlValue[]>) {
        if (rows.length >= maxRows) {
          truncated = true;
          break;
        }
        for (let j = 0; j < row.length; j++) {
          const v = row[j];
          if (typeof v === "string") bytes += v.length;
          else if (typeof v === "bigint") {
            bytes += 8;
            if (v >= MIN_SAFE && v <= MAX_SAFE) row[j] = Number(v);
          } else if (v instanceof Uint8Array) bytes += v.byteLength;
          else bytes += 8;
        }
        if (bytes > this.maxResultBytes) break;
        rows.push(row);
      }
      if (bytes > this.maxResultBytes) return { ok: false, error: tooBig(this.maxResultBytes), elapsedMs: round(performance.now() - start) };
      return { ok: true, columns: cached.columns, rows, truncated, elapsedMs: round(performance.now() - start) };
    } catch (err) {
      return { ok: false, error: classifyThrown(err), elapsedMs: round(performance.now() - start) };
    }
  }

  /** Closes every connection. The cache stays usable and reopens on demand. */
  close(): void {
    for (const conn of this.open.values()) conn.db.close();
    this.open.clear();
  }

  private connection(dbPath: string): OpenDatabase | { error: SqlErrorInfo } {
    const st = statSync(dbPath, { throwIfNoEntry: false });
    let conn = this.open.get(dbPath);
    if (conn) {
      this.open.delete(dbPath);
      if (st && st.ino === conn.ino && st.dev === conn.dev) {
        this.open.set(dbPath, conn);
        return conn;
      }
      conn.db.close();
    }
    if (!st?.isFile()) {
      return { error: { code: "DB_FILE_NOT_FOUND", category: "runtime", message: "the database file does not exist or is not a regular file" } };
    }
    conn = { db: openReadonly(dbPath, { maxValueBytes: this.maxValueBytes }), dev: st.dev, ino: st.ino, statements: new Map() };
    this.open.set(dbPath, conn);
    if (this.open.size > this.maxDatabases) {
      const [oldest, evicted] = this.open.entries().next().value!;
      this.open.delete(oldest);
      evicted.db.close();
    }
    return conn;
  }
}

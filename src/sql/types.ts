import type { ErrorCode } from "../errors/index.js";

/** A SQLite cell value as it crosses the executor boundary (BLOBs arrive as Uint8Array). */
export type SqlValue = string | number | bigint | null | Uint8Array;

/**
 * The error categories of the ReEx error analysis. `empty` is not an error: a successful result
 * with no rows is flagged with `empty: true` instead.
 */
export type SqlErrorCategory = "missing_column" | "missing_table" | "function" | "syntax" | "timeout" | "refused" | "runtime";

/** Options for one execution. */
export interface ExecuteOptions {
  /** Wall-clock limit; the query is stopped (its worker process killed) past it. Default 5000. */
  timeoutMs?: number;
  /** Rows returned at most; more rows set `truncated`. Default 1000. */
  maxRows?: number;
  /** Aborting stops waiting for the query and kills it like a timeout. */
  signal?: AbortSignal;
}

/** A query that ran: columns, the first `maxRows` rows, and whether more existed. */
export interface ExecSuccess {
  ok: true;
  columns: string[];
  rows: SqlValue[][];
  rowCount: number;
  truncated: boolean;
  /** True when the query returned no rows (flagged, not an error). */
  empty: boolean;
  elapsedMs: number;
}

/** A query that did not run or did not finish: a typed, explainable error. */
interface ExecFailure {
  ok: false;
  error: { code: ErrorCode; category: SqlErrorCategory; message: string };
  elapsedMs: number;
}

/** What the executor answers for one query; never throws for bad SQL. */
export type ExecResult = ExecSuccess | ExecFailure;

/** Runs guarded read-only SQL against a database file off the event loop. */
export interface Executor {
  execute(dbPath: string, sql: string, options?: ExecuteOptions): Promise<ExecResult>;
  close(): Promise<void>;
}

/**
 * Entry point of one executor child process (forked by ExecutorPool with advanced serialization).
 * Wire format, kept minimal for per-query overhead:
 *   parent → child  [id, dbPath, sql, maxRows]
 *   child → parent  [0] once ready; [id, 1, columns, rows, truncated, elapsedMs] on success;
 *                   [id, 0, code, category, message, elapsedMs] on failure.
 * argv: [connections kept open, result byte cap, SQLite length limit in bytes]; the native addon
 * is loaded before `ready`.
 * The child runs one query at a time; the parent SIGKILLs it to stop a runaway query.
 */
import Database from "better-sqlite3";
import { ConnectionCache } from "./connections.js";

/** A request from the pool: `[id, dbPath, sql, maxRows]`. */
export type ChildRequest = [id: number, dbPath: string, sql: string, maxRows: number];

const send = process.send?.bind(process);
if (!send) {
  console.error("executor-child: must be started by ExecutorPool (child_process.fork)");
  process.exit(2);
}

const cache = new ConnectionCache({
  maxDatabases: Number(process.argv[2]) || undefined,
  maxResultBytes: Number(process.argv[3]) || undefined,
  maxValueBytes: Number(process.argv[4]) || undefined,
});

new Database(":memory:").close();

process.on("message", (message: ChildRequest) => {
  const [id, dbPath, sql, maxRows] = message;
  const out = cache.run(dbPath, sql, maxRows);
  if (out.ok) send([id, 1, out.columns, out.rows, out.truncated, out.elapsedMs]);
  else send([id, 0, out.error.code, out.error.category, out.error.message, out.elapsedMs]);
});

process.on("disconnect", () => {
  cache.close();
  process.exit(0);
});

send([0]);

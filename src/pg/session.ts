/**
 * The transaction layer of the Postgres guard: every query runs inside `BEGIN READ ONLY` with
 * `statement_timeout` and `idle_in_transaction_session_timeout` set for that transaction only,
 * through a server-side cursor fetched in chunks until the row or byte cap, and is always rolled
 * back (session advisory locks released too). This layer holds on its own: a write that got past the parser would fail here with
 * PostgreSQL's "cannot execute … in a read-only transaction".
 */
import type pg from "pg";
import type { ExecResult, SqlValue } from "../sql/index.js";
import { classifyPostgresError, reexTypes } from "./types.js";

/** Limits of one read-only run. */
export interface ReadOnlyLimits {
  /** Wall-clock limit for the whole run, ms; the server stops the statement past it. */
  timeoutMs: number;
  /** Rows returned at most; more set `truncated`. */
  maxRows: number;
  /** Result size cap: the bytes of the rows as PostgreSQL sends them (text form, bytea as hex); past it the run fails SQL_RUNTIME. */
  maxResultBytes: number;
}

const CHUNK = 256;
/** Extra time the client waits past `timeoutMs` for the server's own timeout before it drops the connection. */
const CLIENT_GRACE_MS = 2000;

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

function tooLarge(limit: number, start: number): ExecResult {
  const message = `the result is larger than ${Math.round((limit / 1024 / 1024) * 10) / 10} MiB; select fewer rows or columns, or aggregate`;
  return { ok: false, error: { code: "SQL_RUNTIME", category: "runtime", message }, elapsedMs: round(performance.now() - start) };
}

/**
 * A connection the caller must discard: it stopped answering within the grace period, or reex cut
 * it because the result was about to pass its byte cap (then `result` is the answer to give).
 */
export class ClientStuck extends Error {
  constructor(
    message: string,
    readonly result?: ExecResult,
  ) {
    super(message);
  }
}

/** The socket under a node-postgres client (pg's `connection.stream`, public since pg 7). */
function socketOf(client: pg.PoolClient): NodeJS.EventEmitter & { destroy(): void } {
  return (client as unknown as { connection: { stream: NodeJS.EventEmitter & { destroy(): void } } }).connection.stream;
}

/**
 * Follows the protocol's message framing on `client`'s socket until stopped, adding up the lengths
 * the DataRow messages declare in their headers, and destroys the socket as soon as a header would
 * take them past `budget`: a row that does not fit is cut before its body arrives, so the client
 * never buffers more than the cap. Measured as PostgreSQL sends rows (text form: bytea as hex).
 */
function meter(client: pg.PoolClient, budget: number): { tripped(): boolean; stop(): void } {
  const socket = socketOf(client);
  let rows = 0;
  let body = 0;
  let header: number[] = [];
  let tripped = false;
  const trip = (): void => {
    tripped = true;
    // the client reports the cut as an error event; it is discarded, so the event has no one else to reach
    client.on("error", () => {});
    socket.destroy();
  };
  const onData = (chunk: Buffer): void => {
    for (let i = 0; i < chunk.length && !tripped; ) {
      if (body > 0) {
        const take = Math.min(body, chunk.length - i);
        body -= take;
        i += take;
        continue;
      }
      header.push(chunk[i++]!);
      if (header.length < 5) continue;
      const length = ((header[1]! << 24) | (header[2]! << 16) | (header[3]! << 8) | header[4]!) >>> 0;
      if (header[0] === 0x44 && (rows += length + 1) > budget) trip();
      body = length - 4;
      header = [];
    }
  };
  socket.on("data", onData);
  return { tripped: () => tripped, stop: () => socket.off("data", onData) };
}

async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ClientStuck("no answer from PostgreSQL")), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `statement` (one SELECT, already checked or deliberately not) on `client` in a READ ONLY
 * transaction under `limits`, then rolls back. Never rejects for SQL errors; rejects only with
 * {@link ClientStuck} when the connection must be discarded.
 */
export async function runReadOnly(client: pg.PoolClient, statement: string, limits: ReadOnlyLimits): Promise<ExecResult> {
  const start = performance.now();
  const deadline = start + limits.timeoutMs;
  const remaining = (): number => Math.max(1, Math.ceil(deadline - performance.now()));
  const grace = (): number => remaining() + CLIENT_GRACE_MS;
  const fail = (err: unknown): ExecResult => {
    const error = classifyPostgresError(err);
    if (error.code === "SQL_TIMEOUT") error.message = `the query ran past its ${limits.timeoutMs} ms time limit and was stopped`;
    return { ok: false, error, elapsedMs: round(performance.now() - start) };
  };
  let result: ExecResult;
  try {
    await withDeadline(
      client.query(
        `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = ${remaining()}; ` +
          `SET LOCAL idle_in_transaction_session_timeout = ${limits.timeoutMs + CLIENT_GRACE_MS}; SET LOCAL lock_timeout = ${remaining()}`,
      ),
      grace(),
    );
    const bytes = meter(client, limits.maxResultBytes);
    let fetched: ExecResult | undefined;
    try {
      fetched = await fetchAll(client, statement, limits, start, remaining, grace);
    } catch (err) {
      if (!bytes.tripped()) throw err;
    } finally {
      bytes.stop();
    }
    if (bytes.tripped() || !fetched) throw new ClientStuck("the result passed its byte cap; the connection was cut", tooLarge(limits.maxResultBytes, start));
    result = fetched;
  } catch (err) {
    if (err instanceof ClientStuck) throw err;
    result = fail(err);
  }
  try {
    // session-level advisory locks survive a rollback; a pooled connection must not keep one
    await withDeadline(client.query("ROLLBACK; SELECT pg_advisory_unlock_all()"), CLIENT_GRACE_MS);
  } catch (err) {
    if (err instanceof ClientStuck) throw err;
    throw new ClientStuck(`ROLLBACK failed: ${(err as Error).message}`);
  }
  return result;
}

async function fetchAll(
  client: pg.PoolClient,
  statement: string,
  limits: ReadOnlyLimits,
  start: number,
  remaining: () => number,
  grace: () => number,
): Promise<ExecResult> {
  try {
    await withDeadline(client.query({ text: `DECLARE reex_cursor NO SCROLL CURSOR FOR\n${statement}\n`, queryMode: "extended" } as pg.QueryConfig), grace());
  } catch (err) {
    if (err instanceof ClientStuck) throw err;
    return { ok: false, error: classifyPostgresError(err), elapsedMs: round(performance.now() - start) };
  }
  const rows: SqlValue[][] = [];
  let columns: string[] = [];
  let truncated = false;
  let first = true;
  for (;;) {
    if (!first) await withDeadline(client.query(`SET LOCAL statement_timeout = ${remaining()}`), grace());
    const want = Math.min(CHUNK, limits.maxRows + 1 - rows.length);
    const chunk = await withDeadline(
      client.query({ text: `FETCH FORWARD ${want} FROM reex_cursor`, rowMode: "array", types: reexTypes } as pg.QueryArrayConfig),
      grace(),
    );
    if (first) columns = chunk.fields.map((f) => f.name);
    first = false;
    for (const row of chunk.rows as SqlValue[][]) {
      if (rows.length >= limits.maxRows) {
        truncated = true;
        break;
      }
      rows.push(row);
    }
    if (truncated || chunk.rows.length < want) break;
  }
  const elapsedMs = round(performance.now() - start);
  return { ok: true, columns, rows, rowCount: rows.length, truncated, empty: rows.length === 0, elapsedMs };
}

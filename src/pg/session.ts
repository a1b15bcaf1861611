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
  /**
   * Result size cap: the bytes of every message PostgreSQL sends for the query (rows as text, bytea
   * as hex; errors and notices too); past it the run fails SQL_RUNTIME.
   */
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

/** Longest ErrorResponse or NoticeResponse body read whole; past it the message is cut there, and the connection with it. */
export const MAX_NOTICE_BYTES = 16 * 1024;

const ERROR_RESPONSE = 0x45;
const NOTICE_RESPONSE = 0x4e;

/** The fields of a (perhaps cut) ErrorResponse or NoticeResponse body: field code → text. */
function noticeFields(body: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  for (let i = 0; i < body.length && body[i] !== 0; ) {
    const end = body.indexOf(0, i + 1);
    fields.set(String.fromCharCode(body[i]!), body.toString("utf8", i + 1, end < 0 ? body.length : end));
    if (end < 0) break;
    i = end + 1;
  }
  return fields;
}

/** What a metered run answers when the meter cut it: a message too long, or a result past the cap. */
function cutResult(kind: number, body: Buffer, declared: number, limit: number, start: number): ExecResult {
  if (kind === 0) return tooLarge(limit, start);
  const elapsedMs = round(performance.now() - start);
  const fields = noticeFields(body);
  if (kind === NOTICE_RESPONSE) {
    const message = `PostgreSQL sent a notice of ${declared} bytes, more than the ${MAX_NOTICE_BYTES} reex reads; the query was stopped`;
    return { ok: false, error: { code: "SQL_RUNTIME", category: "runtime", message }, elapsedMs };
  }
  const message = `${fields.get("M") ?? "error"} … [PostgreSQL's message was ${declared} bytes, cut at ${MAX_NOTICE_BYTES}]`;
  return { ok: false, error: classifyPostgresError({ code: fields.get("C"), message }), elapsedMs };
}

/**
 * Follows the protocol's message framing on `client`'s socket until stopped, adding up the lengths
 * every message declares in its header (rows, errors, notices and the rest alike), and destroys the
 * socket as soon as a header would take them past `budget`: a row that does not fit is cut before
 * its body arrives, so the client never buffers more than the cap. An ErrorResponse or
 * NoticeResponse longer than {@link MAX_NOTICE_BYTES} (PostgreSQL echoes bad input in errors:
 * `repeat(…)::int` can send hundreds of MB) is read up to that many bytes and cut there: `cut()`
 * then gives the error with its message so far. Measured as PostgreSQL sends rows (text form:
 * bytea as hex).
 */
function meter(client: pg.PoolClient, budget: number, start: number): { cut(): ExecResult | undefined; stop(): void } {
  const socket = socketOf(client);
  let total = 0;
  let body = 0;
  let header: number[] = [];
  /** The kind of message being captured (0: none), its declared body length and the bytes so far. */
  let capturing = 0;
  let declared = 0;
  const captured: Buffer[] = [];
  let capturedBytes = 0;
  let result: ExecResult | undefined;
  const trip = (kind: number): void => {
    result = cutResult(kind, Buffer.concat(captured), declared, budget, start);
    // the client reports the cut as an error event; it is discarded, so the event has no one else to reach
    client.on("error", () => {});
    socket.destroy();
  };
  const onData = (chunk: Buffer): void => {
    for (let i = 0; i < chunk.length && result === undefined; ) {
      if (capturing !== 0) {
        const take = Math.min(MAX_NOTICE_BYTES - capturedBytes, chunk.length - i);
        captured.push(chunk.subarray(i, i + take));
        capturedBytes += take;
        i += take;
        if (capturedBytes >= MAX_NOTICE_BYTES) trip(capturing);
        continue;
      }
      if (body > 0) {
        const take = Math.min(body, chunk.length - i);
        body -= take;
        i += take;
        continue;
      }
      header.push(chunk[i++]!);
      if (header.length < 5) continue;
      const type = header[0]!;
      const length = ((header[1]! << 24) | (header[2]! << 16) | (header[3]! << 8) | header[4]!) >>> 0;
      header = [];
      if ((type === ERROR_RESPONSE || type === NOTICE_RESPONSE) && length - 4 > MAX_NOTICE_BYTES) {
        capturing = type;
        declared = length - 4;
        continue;
      }
      if ((total += length + 1) > budget) trip(0);
      body = length - 4;
    }
  };
  socket.on("data", onData);
  return { cut: () => result, stop: () => socket.off("data", onData) };
}

async function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ClientStuck("no answer from PostgreSQL")), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** A check of the catalogue in the query's own transaction, before the query: `sql` reads a fingerprint, `accept` judges it. */
export interface CatalogueCheck {
  sql: string;
  accept(fingerprint: string): boolean;
}

/** The catalogue changed since the guard's allow-list was read: the query is not run (the source reads the list again). */
class CatalogueChanged extends Error {
  readonly result: ExecResult = {
    ok: false,
    error: { code: "SQL_REFUSED", category: "refused", message: "the database's catalogue changed since its allow-list was read; the query was not run" },
    elapsedMs: 0,
  };
}

/** The first column of the first row of the last result of a multi-statement query, as text ("" when none). */
function lastCell(results: pg.QueryResult | pg.QueryResult[]): string {
  const last = Array.isArray(results) ? results.at(-1) : results;
  const row = last?.rows[0] as Record<string, unknown> | undefined;
  const value = row ? Object.values(row)[0] : undefined;
  return value === undefined || value === null ? "" : String(value);
}

/**
 * Runs `statement` (one SELECT, already checked or deliberately not) on `client` in a READ ONLY
 * transaction under `limits`, then rolls back. With `catalogue`, the transaction first reads the
 * catalogue's fingerprint and runs nothing more when `accept` refuses it. Never rejects for SQL
 * errors; rejects only with {@link ClientStuck} when the connection must be discarded.
 */
export async function runReadOnly(client: pg.PoolClient, statement: string, limits: ReadOnlyLimits, catalogue?: CatalogueCheck): Promise<ExecResult> {
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
    const begun = await withDeadline(
      client.query(
        `BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL statement_timeout = ${remaining()}; ` +
          `SET LOCAL idle_in_transaction_session_timeout = ${limits.timeoutMs + CLIENT_GRACE_MS}; SET LOCAL lock_timeout = ${remaining()}` +
          (catalogue ? `; ${catalogue.sql}` : ""),
      ),
      grace(),
    );
    if (catalogue && !catalogue.accept(lastCell(begun))) throw new CatalogueChanged();
    const bytes = meter(client, limits.maxResultBytes, start);
    let fetched: ExecResult | undefined;
    try {
      fetched = await fetchAll(client, statement, limits, start, remaining, grace);
    } catch (err) {
      if (!bytes.cut()) throw err;
    } finally {
      bytes.stop();
    }
    const cut = bytes.cut();
    if (cut || !fetched)
      throw new ClientStuck("the result or a message passed its byte cap; the connection was cut", cut ?? tooLarge(limits.maxResultBytes, start));
    result = fetched;
  } catch (err) {
    if (err instanceof ClientStuck) throw err;
    result = err instanceof CatalogueChanged ? err.result : fail(err);
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

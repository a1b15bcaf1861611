/**
 * The one error type of reex. Every failure a caller can act on carries a stable string code from
 * {@link ERROR_CATALOG}; HTTP statuses and CLI exit codes are derived from it in one place.
 * docs/errors.md documents every code, and a test checks the two agree both ways.
 */

import { safeMessage } from "./redact.js";

export { capMessage, looksLikeConnectionString, redactSecrets } from "./redact.js";

/** Stable error codes, each with its HTTP status and a one-line meaning (mirrored in docs/errors.md). */
export const ERROR_CATALOG = {
  BAD_REQUEST: { status: 400, summary: "The request or its arguments failed validation; `issues` lists each problem with its path." },
  CONFIG_INVALID: { status: 500, summary: "The configuration (file, environment or flags) failed validation at start-up." },
  NOT_FOUND: { status: 404, summary: "No route or resource matches the request." },
  UNAUTHORIZED: { status: 401, summary: "An API key is required and was missing or wrong." },
  FORBIDDEN: { status: 403, summary: "The key is valid but may not perform this action on this resource." },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, summary: "The request body's content type is not one the route accepts; the message lists the accepted types." },
  PORT_IN_USE: { status: 500, summary: "The server's port is taken by another process; checked before the model loads." },
  PAYLOAD_TOO_LARGE: { status: 413, summary: "The request body or WebSocket message exceeds the configured limit." },
  RATE_LIMITED: { status: 429, summary: "Too many requests for this key; retry after the number of seconds in `retry-after`." },
  QUEUE_FULL: { status: 503, summary: "The generation queue is full; retry later instead of piling up work." },
  SHUTTING_DOWN: { status: 503, summary: "The server is draining for shutdown and accepts no new work." },
  DEADLINE_EXCEEDED: { status: 504, summary: "The request's deadline passed before an answer was ready." },
  CANCELLED: { status: 499, summary: "The client cancelled the work (or closed its connection)." },
  INTERNAL: { status: 500, summary: "An unexpected failure inside reex; the log has the details under the request id." },

  DB_NOT_FOUND: { status: 404, summary: "No registered database has this id (or it is not visible to this key)." },
  DB_FILE_NOT_FOUND: { status: 400, summary: "The database path does not exist or is not a regular file." },
  DB_INVALID: { status: 400, summary: "The file is not a SQLite database, or it is corrupt." },
  DB_PATH_NOT_ALLOWED: { status: 403, summary: "Registering server-side paths is disabled, or the path is outside the allowed roots." },
  DB_UNREACHABLE: { status: 503, summary: "A PostgreSQL database could not be reached, refused the login, or has not been read yet." },
  DB_READ_ONLY_ENTRY: { status: 403, summary: "This database was registered from a server-side path and cannot be deleted through the API." },
  DB_NAME_TAKEN: { status: 409, summary: "Another upload this key sees has this name; uploads never replace each other, so nothing was stored." },
  UPLOAD_QUOTA_EXCEEDED: { status: 413, summary: "The upload would take this key's uploads past `server.uploadQuotaBytesPerKey`; nothing was stored." },
  STORAGE_FULL: { status: 507, summary: "The upload would take all uploads past `server.uploadQuotaBytes` or fill the disk; nothing was stored." },

  SQL_REFUSED: { status: 422, summary: "The SQL is not a single read-only query (writes, DDL, ATTACH, PRAGMA, several statements, …)." },
  SQL_SYNTAX: { status: 422, summary: "The SQL does not parse or is structurally wrong (syntax error, wrong number of terms, misuse of aggregate)." },
  SQL_NO_SUCH_TABLE: { status: 422, summary: "The SQL names a table that the database does not have." },
  SQL_NO_SUCH_COLUMN: { status: 422, summary: "The SQL names a column that the database does not have (or that is ambiguous)." },
  SQL_FUNCTION: { status: 422, summary: "The SQL calls an unknown function or a function with the wrong arguments." },
  SQL_RUNTIME: { status: 422, summary: "The SQL failed while running for another reason (type mismatch, too big, …)." },
  SQL_TIMEOUT: { status: 422, summary: "The SQL ran past its time limit and was stopped." },
  SQL_MEMORY_LIMIT: {
    status: 422,
    summary: "The SQL built a value longer than the length limit or needed more memory than the per-query bound, and was stopped.",
  },
  EXECUTOR_UNAVAILABLE: { status: 503, summary: "The executor pool is closed or could not start a worker process." },

  MODEL_NOT_FOUND: { status: 500, summary: "The configured model file or URI could not be found or downloaded." },
  MODEL_LOAD_FAILED: { status: 500, summary: "The model file exists but llama.cpp could not load it (corrupt, unsupported, out of memory)." },
  MODEL_NOT_READY: { status: 503, summary: "The model is still loading." },
  POLICY_ERROR: { status: 502, summary: "The policy backend failed while generating (llama.cpp error or remote endpoint failure)." },
  CONTEXT_EXHAUSTED: { status: 503, summary: "No free sequence or KV space is left in the model context for this request." },

  EXAMPLE_SQL_FAILED: {
    status: 400,
    summary: "A verified example's or a correction's SQL did not run (refused, wrong, or timed out); `details` carries the SQL error and nothing was stored.",
  },
  EXAMPLE_NOT_FOUND: { status: 404, summary: "No verified example has this id on this database (or it is not visible to this key)." },
  EXAMPLES_FULL: { status: 409, summary: "The key already keeps `teach.maxExamples` verified examples on this database; delete some first." },
  ANSWER_NOT_FOUND: { status: 404, summary: "No recent answer has this id for this key and database (answers are kept for `teach.answerTtlMs`)." },
  CONVERSATION_NOT_FOUND: { status: 404, summary: "No conversation has this id for this key (or it expired after `teach.conversationTtlMs` idle)." },

  DATASET_INVALID: { status: 400, summary: "An evaluation or training dataset file is missing fields or does not parse." },
  LEARNER_FAILED: { status: 500, summary: "The Python learner exited with an error or is not installed." },
} as const satisfies Record<string, { status: number; summary: string }>;

/** A stable error code; see {@link ERROR_CATALOG}. */
export type ErrorCode = keyof typeof ERROR_CATALOG;

/** One validation problem, zod-style: what is wrong and where. */
export interface Issue {
  path: (string | number)[];
  message: string;
  code?: string;
}

/**
 * The error class of reex: a stable code, a human message (capped at 8 KiB with
 * the cut said in the text, then passwords redacted), optional structured issues and details.
 */
export class ReexError extends Error {
  override readonly name = "ReexError";
  readonly code: ErrorCode;
  readonly issues?: Issue[];
  readonly details?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, options: { issues?: Issue[]; details?: Record<string, unknown>; cause?: unknown } = {}) {
    super(safeMessage(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    if (options.issues) this.issues = options.issues.map((i) => ({ ...i, message: safeMessage(i.message) }));
    if (options.details) this.details = options.details;
  }

  /** HTTP status of this error's code. */
  get status(): number {
    return ERROR_CATALOG[this.code].status;
  }

  /** The JSON body the API returns: `{code, message, issues?}`. */
  toJSON(): { code: ErrorCode; message: string; issues?: Issue[]; details?: Record<string, unknown> } {
    return {
      code: this.code,
      message: this.message,
      ...(this.issues ? { issues: this.issues } : {}),
      ...(this.details ? { details: this.details } : {}),
    };
  }
}

/** True when `value` is a ReexError, optionally with the given code. */
export function isReexError(value: unknown, code?: ErrorCode): value is ReexError {
  return value instanceof ReexError && (code === undefined || value.code === code);
}

/** Wraps any thrown value as a ReexError (unknown failures become `INTERNAL`). */
export function toReexError(value: unknown): ReexError {
  if (value instanceof ReexError) return value;
  const message = value instanceof Error ? value.message : String(value);
  return new ReexError("INTERNAL", message, { cause: value });
}

/** Converts zod issues (or anything with `path` and `message`) to reex {@link Issue}s. */
export function issuesFrom(list: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string; code?: string }>): Issue[] {
  return list.map((i) => ({
    path: i.path.map((p) => (typeof p === "number" ? p : String(p))),
    message: i.message,
    ...(i.code ? { code: i.code } : {}),
  }));
}

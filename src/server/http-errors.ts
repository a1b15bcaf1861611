/** The one mapping from anything thrown inside a request (fastify's own errors included) to a catalog code. */
import { ZodError } from "zod";
import { ReexError, issuesFrom, type ErrorCode } from "../errors/index.js";

interface FastifyLikeError {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
}

/** Content types of a raw SQLite upload (POST /v1/databases). */
export const UPLOAD_TYPES = ["application/octet-stream", "application/vnd.sqlite3", "application/x-sqlite3"];
/** Every content type a body may have: JSON for requests, the upload types for SQLite files. */
export const ACCEPTED_TYPES = ["application/json", ...UPLOAD_TYPES];

const BY_FASTIFY_CODE: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "BAD_REQUEST",
  FST_ERR_CTP_INVALID_JSON_BODY: "BAD_REQUEST",
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: "BAD_REQUEST",
  FST_ERR_CTP_INVALID_TYPE: "BAD_REQUEST",
  FST_ERR_CTP_EMPTY_TYPE: "BAD_REQUEST",
  FST_ERR_BAD_URL: "BAD_REQUEST",
  FST_ERR_ASYNC_CONSTRAINT: "BAD_REQUEST",
  FST_ERR_VALIDATION: "BAD_REQUEST",
  FST_ERR_NOT_FOUND: "NOT_FOUND",
};

const BY_STATUS: Record<number, ErrorCode> = {
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  429: "RATE_LIMITED",
};

/** Maps any thrown value to a ReexError: ReexErrors pass, zod → BAD_REQUEST, fastify errors by code/status, the rest → INTERNAL; `contentType` names the request's in an UNSUPPORTED_MEDIA_TYPE message. */
export function toApiError(err: unknown, request: { contentType?: string } = {}): ReexError {
  if (err instanceof ReexError) return err;
  if (err instanceof ZodError) return new ReexError("BAD_REQUEST", "invalid request", { issues: issuesFrom(err.issues) });
  const e = (err ?? {}) as FastifyLikeError;
  const message = typeof e.message === "string" ? e.message : "request failed";
  const byCode = typeof e.code === "string" ? BY_FASTIFY_CODE[e.code] : undefined;
  if (byCode) {
    if (byCode === "UNSUPPORTED_MEDIA_TYPE") {
      const got = request.contentType ? `content-type ${request.contentType}` : "a body without a content-type";
      return new ReexError(
        byCode,
        `${got} is not accepted: send JSON as application/json, and a SQLite upload as ${UPLOAD_TYPES.join(", ")} (curl: -H 'content-type: application/octet-stream' --data-binary @file.sqlite)`,
        {
          cause: err,
          details: { accepted: ACCEPTED_TYPES },
        },
      );
    }
    const shown = byCode === "PAYLOAD_TOO_LARGE" ? "the request body exceeds the configured limit (server.bodyLimitBytes)" : message;
    return new ReexError(byCode, shown, { cause: err });
  }
  if (err instanceof SyntaxError) return new ReexError("BAD_REQUEST", `body is not valid JSON: ${message}`, { cause: err });
  const status = typeof e.statusCode === "number" ? e.statusCode : 500;
  if (status >= 400 && status < 500) return new ReexError(BY_STATUS[status] ?? "BAD_REQUEST", message, { cause: err });
  return new ReexError("INTERNAL", "internal error; the server log has the details under this request id", { cause: err });
}

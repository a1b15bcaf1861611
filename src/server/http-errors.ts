/** The one mapping from anything thrown inside a request (fastify's own errors included) to a catalog code. */
import { ZodError } from "zod";
import { ReexError, issuesFrom, type ErrorCode } from "../errors/index.js";

interface FastifyLikeError {
  code?: unknown;
  statusCode?: unknown;
  message?: unknown;
}

const BY_FASTIFY_CODE: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "BAD_REQUEST",
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
  429: "RATE_LIMITED",
};

/** Maps any thrown value to a ReexError: ReexErrors pass, zod → BAD_REQUEST, fastify errors by code/status, the rest → INTERNAL. */
export function toApiError(err: unknown): ReexError {
  if (err instanceof ReexError) return err;
  if (err instanceof ZodError) return new ReexError("BAD_REQUEST", "invalid request", { issues: issuesFrom(err.issues) });
  const e = (err ?? {}) as FastifyLikeError;
  const message = typeof e.message === "string" ? e.message : "request failed";
  const byCode = typeof e.code === "string" ? BY_FASTIFY_CODE[e.code] : undefined;
  if (byCode) {
    const shown = byCode === "PAYLOAD_TOO_LARGE" ? "the request body exceeds the configured limit (server.bodyLimitBytes)" : message;
    return new ReexError(byCode, shown, { cause: err });
  }
  if (err instanceof SyntaxError) return new ReexError("BAD_REQUEST", `body is not valid JSON: ${message}`, { cause: err });
  const status = typeof e.statusCode === "number" ? e.statusCode : 500;
  if (status >= 400 && status < 500) return new ReexError(BY_STATUS[status] ?? "BAD_REQUEST", message, { cause: err });
  return new ReexError("INTERNAL", "internal error; the server log has the details under this request id", { cause: err });
}

/** Error mapping: every failure answers `{code, message, …}` with the catalogue's status; unknown routes are NOT_FOUND. */
import type { FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { ReexError } from "../../errors/index.js";
import { toApiError } from "../http-errors.js";
import { redactUrl } from "../logging.js";

/** Codes that are the server's load or state, not its failure: logged at info, like a refusal. */
const EXPECTED_5XX = new Set(["QUEUE_FULL", "SHUTTING_DOWN", "MODEL_NOT_READY"]);

const errors: FastifyPluginAsync = async (app) => {
  const { logSql } = app.reex.config.server;

  app.setErrorHandler((err, request, reply) => {
    const e = toApiError(err, { contentType: request.headers["content-type"] });
    if (e.status >= 500 && !EXPECTED_5XX.has(e.code)) {
      const cause = e.code === "INTERNAL" ? (e.cause ?? err) : err;
      request.log.error(
        {
          code: e.code,
          errName: (cause as Error)?.name,
          messageChars: (cause as Error)?.message?.length,
          ...(logSql ? { err: cause } : { stack: stackFrames(cause) }),
        },
        "request failed",
      );
    } else {
      request.log.info({ code: e.code, status: e.status }, "request refused");
    }
    if (e.code === "RATE_LIMITED") reply.header("retry-after", String(e.details?.retryAfterSeconds ?? 60));
    if (e.code === "UNAUTHORIZED") reply.header("www-authenticate", 'Bearer realm="reex"');
    return reply.code(e.status).type("application/json; charset=utf-8").send(e.toJSON());
  });

  app.setNotFoundHandler((request) => {
    const path = redactUrl(request.url).split("?")[0]!;
    // With keys on, an unknown API path answers like a known one to a caller without a key.
    if (path === "/v1" || path.startsWith("/v1/") || path === "/mcp") app.authenticate(request);
    throw new ReexError("NOT_FOUND", `no route ${request.method} ${path}`);
  });
};

function stackFrames(err: unknown): string | undefined {
  const stack = (err as Error)?.stack;
  return stack
    ?.split("\n")
    .filter((line) => line.trimStart().startsWith("at "))
    .slice(0, 8)
    .join("\n");
}

/** The error handler and the not-found handler (which authenticates API paths first). */
export const errorsPlugin = fp(errors, { name: "reex-errors", dependencies: ["reex-auth"] });

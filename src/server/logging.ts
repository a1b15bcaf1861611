/** The server's pino logger: request ids, no keys, no bodies, no SQL unless server.logSql. */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import { pino, type DestinationStream, type Logger } from "pino";
import type { Config } from "../config/index.js";

/** The URL with any `key` query parameter replaced by `***`. */
export function redactUrl(url: string | undefined): string {
  if (!url) return "";
  return url.replace(/([?&]key=)[^&#]*/gi, "$1***");
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The request id: a well-formed incoming x-request-id, else a fresh UUID. */
export function requestId(req: IncomingMessage): string {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
}

const serializers = {
  req: (req: { method?: string; url?: string; ip?: string; socket?: { remoteAddress?: string } }) => ({
    method: req.method,
    url: redactUrl(req.url),
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
  }),
  res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
};

/**
 * The server's logger: a child of `base` (or a new pino logger at config.server.logLevel writing
 * to `stream`, default stdout) whose request serializer keeps only method, redacted URL and address.
 * Typed as the logger fastify's instance carries, so the app needs no cast.
 */
export function createLogger(config: Config, options: { base?: Logger; stream?: DestinationStream } = {}): FastifyBaseLogger {
  if (options.base) return options.base.child({}, { serializers });
  return pino({ level: config.server.logLevel, base: { service: "reex" }, serializers }, options.stream ?? pino.destination(1));
}

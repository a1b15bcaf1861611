/** The playground page at / (one self-contained HTML document) and an empty favicon. */
import type { FastifyPluginAsync } from "fastify";
import { PLAYGROUND_HTML } from "../public/playground.js";
import type { RouteDoc } from "../route-doc.js";

const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'";

/** Serves GET / and GET /favicon.ico. */
export const playgroundPlugin: FastifyPluginAsync = async (app) => {
  const doc: RouteDoc = { summary: "The playground page", responses: { 200: { description: "HTML", mediaType: "text/html" } } };
  app.get("/", { config: { doc } }, async (_request, reply) =>
    reply.type("text/html; charset=utf-8").header("cache-control", "no-store").header("content-security-policy", CSP).send(PLAYGROUND_HTML),
  );
  app.get("/favicon.ico", { logLevel: "warn" }, async (_request, reply) => reply.code(204).send());
};

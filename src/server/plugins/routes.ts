/** The API: WebSocket support, uploads' content types, /v1 (databases, their examples, conversations, sql, stream) and /mcp, each behind `guardApi`. */
import fastifyWebsocket from "@fastify/websocket";
import type { FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { UPLOAD_TYPES } from "../http-errors.js";
import { conversationRoutes } from "../routes/conversations.js";
import { databaseRoutes } from "../routes/databases.js";
import { exampleRoutes } from "../routes/examples.js";
import { mcpRoutes } from "../routes/mcp.js";
import { sqlRoutes } from "../routes/sql.js";
import { WS_READ_FACTOR, streamRoutes } from "../routes/stream.js";

const routes: FastifyPluginAsync = async (app) => {
  const sc = app.reex.config.server;
  app.addContentTypeParser(UPLOAD_TYPES, { parseAs: "buffer", bodyLimit: sc.bodyLimitBytes }, (_req, body, done) => done(null, body));

  await app.register(fastifyWebsocket, {
    options: { maxPayload: sc.wsMaxPayloadBytes * WS_READ_FACTOR },
    preClose: (done) => done(),
    errorHandler: (error, socket, request) => {
      request.log.info({ errName: error.name, code: (error as { code?: string }).code }, "websocket error");
      socket.terminate();
    },
  });

  app.register(
    async (v1) => {
      v1.addHook("onRequest", app.guardApi);
      v1.register(databaseRoutes);
      v1.register(exampleRoutes);
      v1.register(conversationRoutes);
      v1.register(sqlRoutes);
      v1.register(streamRoutes);
    },
    { prefix: "/v1" },
  );

  app.register(async (mcp) => {
    mcp.addHook("onRequest", app.guardApi);
    mcp.register(mcpRoutes);
  });

  app.addHook("onClose", async () => app.reex.teaching.close());
};

/** Registers the API routes. */
export const routesPlugin = fp(routes, { name: "reex-routes", dependencies: ["reex-auth"] });

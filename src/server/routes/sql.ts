/** POST /v1/sql: answer one question and return the SQL, its result, candidates and usage. */
import type { FastifyPluginAsync } from "fastify";
import { ReexError } from "../../errors/index.js";
import { answerQuestion } from "../answer.js";
import { tenantOf } from "../auth.js";
import type { ZodTypeProvider } from "../provider.js";
import type { RouteDoc } from "../route-doc.js";
import { errorResponses, sqlRequestSchema, sqlResponseSchema } from "../schemas.js";

/** Registers POST /v1/sql. */
export const sqlRoutes: FastifyPluginAsync = async (instance) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const state = app.reex;
  const schema = { body: sqlRequestSchema(state.config), response: { 200: sqlResponseSchema, ...errorResponses } };
  const doc: RouteDoc = {
    summary: "Answer a question with one SQL query, its result, candidates and votes",
    guarded: true,
    errors: ["DB_NOT_FOUND", "QUEUE_FULL", "DEADLINE_EXCEEDED", "CANCELLED", "POLICY_ERROR", "CONTEXT_EXHAUSTED", "EXECUTOR_UNAVAILABLE"],
    responses: { 200: "The answer" },
  };
  app.post("/sql", { schema, config: { doc } }, async (request, reply) => {
    const body = request.body;
    const gone = new AbortController();
    const onClose = (): void => {
      if (!reply.raw.writableFinished) gone.abort(new ReexError("CANCELLED", "the client closed the connection"));
    };
    reply.raw.once("close", onClose);
    const socket = request.raw.socket as { setTimeout?: (ms: number) => unknown } | undefined;
    if (typeof socket?.setTimeout === "function") socket.setTimeout(state.config.server.requestTimeoutMs + 5_000);
    try {
      const tenant = tenantOf(request.reexOwner, request.ip);
      return await answerQuestion(state, body, request.reexOwner, { cancel: gone.signal, log: request.log, tenant });
    } finally {
      reply.raw.removeListener("close", onClose);
    }
  });
};

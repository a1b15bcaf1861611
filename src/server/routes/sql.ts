/** POST /v1/sql: answer one question and return the SQL, its result, candidates and usage. */
import type { FastifyPluginAsync } from "fastify";
import { ReexError } from "../../errors/index.js";
import { answerQuestion } from "../answer.js";
import type { ZodTypeProvider } from "../provider.js";
import { sqlRequestSchema } from "../schemas.js";

/** Registers POST /v1/sql. */
export const sqlRoutes: FastifyPluginAsync = async (instance) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const state = app.reex;
  app.post("/sql", { schema: { body: sqlRequestSchema(state.config) } }, async (request, reply) => {
    const body = request.body;
    const gone = new AbortController();
    const onClose = (): void => {
      if (!reply.raw.writableFinished) gone.abort(new ReexError("CANCELLED", "the client closed the connection"));
    };
    reply.raw.once("close", onClose);
    const socket = request.raw.socket as { setTimeout?: (ms: number) => unknown } | undefined;
    if (typeof socket?.setTimeout === "function") socket.setTimeout(state.config.server.requestTimeoutMs + 5_000);
    try {
      return await answerQuestion(state, body, request.reexOwner, { cancel: gone.signal, log: request.log });
    } finally {
      reply.raw.removeListener("close", onClose);
    }
  });
};

/** POST /v1/sql: answer one question and return the SQL, its result, candidates and usage. */
import type { FastifyInstance } from "fastify";
import { ReexError } from "../../errors/index.js";
import { answerQuestion } from "../answer.js";
import { parseWith, sqlRequestSchema } from "../schemas.js";
import type { ServerState } from "../state.js";

/** Registers POST /v1/sql. */
export async function sqlRoutes(app: FastifyInstance, state: ServerState): Promise<void> {
  const schema = sqlRequestSchema(state.config);
  app.post("/sql", async (request, reply) => {
    const body = parseWith(schema, request.body, "body");
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
}

/**
 * GET /v1/stream: a WebSocket per question. The client sends one request message (the POST
 * /v1/sql body); the server streams every event as `{type, ...}` and ends with
 * `{type: "done", answer}` or `{type: "error", code, message, terminal: true}`, then closes.
 * `{type: "cancel"}` or closing the socket aborts the work.
 */
import type { FastifyInstance } from "fastify";
import type { WebSocket, RawData } from "ws";
import { ReexError } from "../../errors/index.js";
import type { ReexEvent } from "../../events/index.js";
import { answerQuestion } from "../answer.js";
import { tenantOf } from "../auth.js";
import { toApiError } from "../http-errors.js";
import { jsonSafe } from "../json.js";
import type { RouteDoc } from "../route-doc.js";
import { errorResponses, parseWith, streamControlSchema, streamQuerySchema, streamRequestSchema } from "../schemas.js";

/** Unsent bytes a slow client may accumulate before its work is cancelled. */
const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/**
 * How far past server.wsMaxPayloadBytes the socket still reads a message, so that it can refuse it
 * with PAYLOAD_TOO_LARGE and a reason; larger ones get the WebSocket library's bare 1009.
 */
export const WS_READ_FACTOR = 16;

/** Close code for a terminal error code: 1001 going away, 1011 internal, 1008 bad message, 1009 too big, else 1000. */
function closeCodeFor(code: string): number {
  if (code === "SHUTTING_DOWN") return 1001;
  if (code === "PAYLOAD_TOO_LARGE") return 1009;
  if (code === "INTERNAL") return 1011;
  if (code === "BAD_REQUEST") return 1008;
  return 1000;
}

/** Registers the GET /v1/stream WebSocket route. */
export async function streamRoutes(app: FastifyInstance): Promise<void> {
  const state = app.reex;
  const requestSchema = streamRequestSchema(state.config);

  const doc: RouteDoc = {
    summary:
      "WebSocket: send one SqlRequest message; receive every event as {type, ...}, then {type:'done', answer} or {type:'error', code, message, terminal:true}. Send {type:'cancel'} to stop. Auth: Authorization header or ?key=.",
    guarded: true,
    query: streamQuerySchema,
    responses: { 101: "Switching protocols" },
  };
  app.get("/stream", { websocket: true, schema: { response: errorResponses }, config: { doc } }, (socket: WebSocket, request) => {
    state.sockets.add(socket);
    const owner = request.reexOwner;
    const tenant = tenantOf(owner, request.ip);
    const log = request.log;
    const cancel = new AbortController();
    let started = false;
    let finished = false;

    const send = (message: unknown): void => {
      if (finished || socket.readyState !== socket.OPEN) return;
      if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
        if (!cancel.signal.aborted) cancel.abort(new ReexError("CANCELLED", "the client is not reading the stream"));
        return;
      }
      socket.send(JSON.stringify(jsonSafe(message)));
    };
    const end = (message: unknown, closeCode: number, reason: string): void => {
      send(message);
      finished = true;
      if (socket.readyState === socket.OPEN) socket.close(closeCode, reason);
    };
    const fail = (err: unknown): void => {
      const e = toApiError(err);
      if (e.code === "INTERNAL")
        log.error({ errName: (err as Error)?.name, stack: state.config.server.logSql ? (err as Error)?.stack : undefined }, "stream failed");
      end({ type: "error", code: e.code, message: e.message, ...(e.issues ? { issues: e.issues } : {}), terminal: true }, closeCodeFor(e.code), e.code);
    };

    const idle = setTimeout(() => {
      if (!started) fail(new ReexError("BAD_REQUEST", `no request message within ${state.config.server.connectionTimeoutMs} ms (server.connectionTimeoutMs)`));
    }, state.config.server.connectionTimeoutMs);
    idle.unref();

    socket.on("close", () => {
      clearTimeout(idle);
      state.sockets.delete(socket);
      finished = true;
      if (!cancel.signal.aborted) cancel.abort(new ReexError("CANCELLED", "the client closed the WebSocket"));
    });

    socket.on("message", (data: RawData, isBinary: boolean) => {
      const bytes = Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : (data as Buffer | ArrayBuffer).byteLength;
      if (bytes > state.config.server.wsMaxPayloadBytes) {
        fail(new ReexError("PAYLOAD_TOO_LARGE", `the message has ${bytes} bytes, over server.wsMaxPayloadBytes (${state.config.server.wsMaxPayloadBytes})`));
        return;
      }
      let message: unknown;
      try {
        message = JSON.parse(isBinary ? Buffer.from(data as Buffer).toString("utf8") : data.toString());
      } catch {
        if (!started) fail(new ReexError("BAD_REQUEST", "the message is not valid JSON"));
        else send({ type: "warning", code: "BAD_REQUEST", message: "the message is not valid JSON" });
        return;
      }
      if (started) {
        const control = streamControlSchema.safeParse(message);
        if (control.success) {
          if (!cancel.signal.aborted) cancel.abort(new ReexError("CANCELLED", "cancelled by the client"));
        } else {
          send({ type: "warning", code: "BAD_REQUEST", message: 'only {"type":"cancel"} may follow the request' });
        }
        return;
      }
      started = true;
      clearTimeout(idle);
      let body;
      try {
        body = parseWith(requestSchema, message, "message");
      } catch (err) {
        fail(err);
        return;
      }
      const { type: _type, ...request } = body;
      answerQuestion(state, request, owner, { sink: (event: ReexEvent) => send(event), cancel: cancel.signal, log, tenant }).then(
        (answer) => end({ type: "done", answer }, 1000, "done"),
        fail,
      );
    });
  });
}

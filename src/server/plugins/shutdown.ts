/**
 * Graceful shutdown: `app.close()` sets draining (/readyz 503, /v1 SHUTTING_DOWN), gives queued and
 * running work the grace period, then aborts it, waits for HTTP responses, closes WebSockets with
 * 1001, and finally closes the runtime.
 */
import type { FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { ReexError } from "../../errors/index.js";

/** After the grace period: how long aborted work may take to settle, then HTTP responses, then WebSocket closes, ms. */
const ABORT_WAIT_MS = 5_000;
const HTTP_WAIT_MS = 2_000;
const SOCKET_WAIT_MS = 2_000;

/** The longest drain past the grace period, ms (fastify's close timeout must exceed grace + this). */
export const DRAIN_AFTER_GRACE_MS = ABORT_WAIT_MS + HTTP_WAIT_MS + SOCKET_WAIT_MS;

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Options of the shutdown plugin. */
export interface ShutdownOptions {
  /** Time in-flight work gets to finish before it is aborted, ms. */
  graceMs: number;
}

const shutdown: FastifyPluginAsync<ShutdownOptions> = async (app, { graceMs }) => {
  const state = app.reex;
  const { deps, queue } = state;
  const httpInFlight = new Set<object>();

  app.addHook("onRequest", async (request, reply) => {
    // WebSockets and MCP's standalone GET event stream stay open by design: shutdown does not wait for them.
    if (request.headers.upgrade?.toLowerCase() !== "websocket" && !(request.method === "GET" && request.url.split("?")[0] === "/mcp")) {
      httpInFlight.add(request);
      reply.raw.once("close", () => httpInFlight.delete(request));
    }
  });
  app.addHook("onResponse", async (request) => {
    httpInFlight.delete(request);
  });

  app.addHook("preClose", async () => {
    state.draining = true;
    if (!(await queue.drain(graceMs))) {
      app.log.warn({ inFlight: queue.inFlight }, "shutdown grace period over; aborting in-flight work");
      queue.abortAll(new ReexError("SHUTTING_DOWN", "the server is shutting down"));
      if (!(await queue.drain(ABORT_WAIT_MS))) app.log.warn({ inFlight: queue.inFlight }, "aborted work did not settle; closing anyway");
    }
    for (let waited = 0; httpInFlight.size > 0 && waited < HTTP_WAIT_MS; waited += 20) await pause(20);
    const closing = [...state.sockets].map(
      (socket) =>
        new Promise<void>((resolve) => {
          if (socket.readyState === socket.CLOSED) return resolve();
          socket.once("close", () => resolve());
          socket.close(1001, "server shutting down");
          setTimeout(() => {
            socket.terminate();
            resolve();
          }, SOCKET_WAIT_MS).unref();
        }),
    );
    await Promise.all(closing);
    app.websocketServer.close();
    app.server.closeAllConnections();
  });

  app.addHook("onClose", async () => {
    if (deps.close) await deps.close();
    else {
      await deps.executor?.close();
      await state.policy()?.close();
    }
    app.log.info("runtime closed");
  });
};

/** The drain on close and the runtime's release after it. */
export const shutdownPlugin = fp(shutdown, { name: "reex-shutdown", dependencies: ["reex-routes"] });

/** The fastify app factory: hooks, error mapping, routes, and graceful shutdown. */
import fastifyWebsocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { ReexError } from "../errors/index.js";
import { modelDisplayName, type Policy, type PolicyInfo } from "../policy/index.js";
import { KeyRing } from "./auth.js";
import { UPLOAD_TYPES, toApiError } from "./http-errors.js";
import { createLogger, redactUrl, requestId } from "./logging.js";
import { createServerMetrics } from "./metrics.js";
import { buildOpenApi } from "./openapi.js";
import { PLAYGROUND_HTML } from "./public/playground.js";
import { GenerationQueue } from "./queue.js";
import { RateLimiter } from "./rate-limit.js";
import { databaseRoutes } from "./routes/databases.js";
import { mcpRoutes } from "./routes/mcp.js";
import { sqlRoutes } from "./routes/sql.js";
import { WS_READ_FACTOR, streamRoutes } from "./routes/stream.js";
import type { ServerState } from "./state.js";
import type { ServerDeps } from "./types.js";

declare module "fastify" {
  interface FastifyRequest {
    /** Identity of the caller's API key (undefined when auth is off). */
    reexOwner?: string;
  }
}

function policyOf(deps: ServerDeps): () => Policy | undefined {
  const p = deps.policy;
  if (typeof p === "function") return p;
  return () => p;
}

/** After the grace period: how long aborted work may take to settle, then HTTP responses, then WebSocket closes, ms. */
const ABORT_WAIT_MS = 5_000;
const HTTP_WAIT_MS = 2_000;
const SOCKET_WAIT_MS = 2_000;
const DRAIN_AFTER_GRACE_MS = ABORT_WAIT_MS + HTTP_WAIT_MS + SOCKET_WAIT_MS;

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Builds the reex HTTP app from its dependencies (not listening yet). `app.close()` drains: /readyz
 * turns 503 and /v1 refuses new work with SHUTTING_DOWN (the listener stays open meanwhile so
 * both stay observable), in-flight work gets `deps.shutdownGraceMs` (default 10000) to finish and
 * is then aborted, WebSockets close with 1001, the listener closes, and `deps.close` runs.
 * fastify's own close timeout (its plugin timeout) is set past the longest drain, so a stop
 * past the grace period still runs every onClose hook.
 */
export function buildApp(deps: ServerDeps): FastifyInstance {
  const { config } = deps;
  const sc = config.server;
  const logger = createLogger(config, { ...(deps.logger ? { base: deps.logger } : {}), ...(deps.logStream ? { stream: deps.logStream } : {}) });
  const graceMs = deps.shutdownGraceMs ?? sc.shutdownGraceMs;
  const app = Fastify({
    pluginTimeout: graceMs + DRAIN_AFTER_GRACE_MS + 10_000,
    loggerInstance: logger,
    genReqId: requestId,
    bodyLimit: sc.bodyLimitBytes,
    connectionTimeout: sc.connectionTimeoutMs,
    requestTimeout: sc.requestTimeoutMs,
    return503OnClosing: false,
    forceCloseConnections: "idle",
  }) as unknown as FastifyInstance;

  const policy = policyOf(deps);
  const queue = new GenerationQueue(sc.maxConcurrent, sc.maxQueued);
  const state: ServerState = {
    config,
    deps,
    queue,
    metrics: createServerMetrics({ queueDepth: () => queue.waiting, liveSequences: () => policy()?.liveTrajectories() ?? 0 }),
    keys: new KeyRing(sc.apiKeys),
    limiter: new RateLimiter(sc.rateLimitPerMinute, deps.now),
    authFailures: new RateLimiter(sc.authFailuresPerMinute, deps.now),
    draining: false,
    sockets: new Set(),
    log: app.log,
    policy,
  };
  const httpInFlight = new Set<object>();

  app.decorateRequest("reexOwner", undefined);

  app.addContentTypeParser(UPLOAD_TYPES, { parseAs: "buffer", bodyLimit: sc.bodyLimitBytes }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err, request, reply) => {
    const e = toApiError(err, { contentType: request.headers["content-type"] });
    if (e.status >= 500 && e.code !== "QUEUE_FULL" && e.code !== "SHUTTING_DOWN" && e.code !== "MODEL_NOT_READY") {
      const cause = e.code === "INTERNAL" ? (e.cause ?? err) : err;
      request.log.error(
        { code: e.code, errName: (cause as Error)?.name, messageChars: (cause as Error)?.message?.length, ...(sc.logSql ? { err: cause } : { stack: stackFrames(cause) }) },
        "request failed",
      );
    } else {
      request.log.info({ code: e.code, status: e.status }, "request refused");
    }
    if (e.code === "RATE_LIMITED") reply.header("retry-after", String(e.details?.retryAfterSeconds ?? 60));
    if (e.code === "UNAUTHORIZED") reply.header("www-authenticate", 'Bearer realm="reex"');
    return reply.code(e.status).type("application/json; charset=utf-8").send(e.toJSON());
  });

  const authenticate = (request: FastifyRequest): void => {
    if (!state.keys.enabled) return;
    const address = `ip:${request.ip}`;
    const blocked = state.authFailures.exhausted(address);
    if (!blocked.allowed) {
      throw new ReexError("RATE_LIMITED", `more than ${sc.authFailuresPerMinute} failed authentications this minute from this address`, { details: { retryAfterSeconds: blocked.retryAfterSeconds } });
    }
    const queryKey = request.routeOptions.url === "/v1/stream" ? (request.query as Record<string, unknown>)?.key : undefined;
    try {
      request.reexOwner = state.keys.authenticate(request.headers.authorization, typeof queryKey === "string" ? queryKey : undefined);
    } catch (err) {
      state.authFailures.take(address);
      throw err;
    }
  };

  app.setNotFoundHandler((request) => {
    const path = redactUrl(request.url).split("?")[0]!;
    // With keys on, an unknown API path answers like a known one to a caller without a key.
    if (path === "/v1" || path.startsWith("/v1/") || path === "/mcp") authenticate(request);
    throw new ReexError("NOT_FOUND", `no route ${request.method} ${path}`);
  });

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    // WebSockets and MCP's standalone GET event stream stay open by design: shutdown does not wait for them.
    if (request.headers.upgrade?.toLowerCase() !== "websocket" && !(request.method === "GET" && request.url.split("?")[0] === "/mcp")) {
      httpInFlight.add(request);
      reply.raw.once("close", () => httpInFlight.delete(request));
    }
  });

  app.addHook("onResponse", async (request, reply) => {
    httpInFlight.delete(request);
    const route = request.routeOptions.url ?? "unmatched";
    state.metrics.requests.inc({ route, status: String(reply.statusCode) });
    state.metrics.duration.observe(reply.elapsedTime / 1000, { route });
  });

  app.register(fastifyWebsocket, {
    options: { maxPayload: sc.wsMaxPayloadBytes * WS_READ_FACTOR },
    preClose: (done) => done(),
    errorHandler: (error, socket, request) => {
      request.log.info({ errName: error.name, code: (error as { code?: string }).code }, "websocket error");
      socket.terminate();
    },
  });

  const guardApi = async (request: FastifyRequest): Promise<void> => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    authenticate(request);
    const decision = state.limiter.take(request.reexOwner ?? `ip:${request.ip}`);
    if (!decision.allowed) {
      throw new ReexError("RATE_LIMITED", `more than ${sc.rateLimitPerMinute} requests this minute`, { details: { retryAfterSeconds: decision.retryAfterSeconds } });
    }
  };

  app.register(
    async (v1) => {
      v1.addHook("onRequest", guardApi);
      await databaseRoutes(v1, state);
      await sqlRoutes(v1, state);
      await streamRoutes(v1, state);
    },
    { prefix: "/v1" },
  );

  app.register(async (mcp) => {
    mcp.addHook("onRequest", guardApi);
    await mcpRoutes(mcp, state);
  });

  const quiet = { logLevel: "warn" as const };
  const ops = sc.protectOpsEndpoints ? { ...quiet, onRequest: async (request: FastifyRequest) => authenticate(request) } : quiet;
  app.get("/healthz", quiet, async () => ({ status: "ok" }));

  app.get("/readyz", ops, async () => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    const p = policy();
    if (!p) throw new ReexError("MODEL_NOT_READY", "the model is still loading");
    return {
      status: "ready",
      modelName: modelDisplayName(p.info),
      policy: publicPolicyInfo(p.info),
      ...(deps.model ? { modelOrigin: deps.model.origin } : {}),
      ...(deps.profile ? { profile: deps.profile } : {}),
      queue: { running: queue.running, waiting: queue.waiting, maxConcurrent: sc.maxConcurrent, maxQueued: sc.maxQueued },
    };
  });

  app.get("/metrics", ops, async (_request, reply) => {
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(state.metrics.registry.render());
  });

  const openapi = buildOpenApi(config);
  app.get("/openapi.json", async () => openapi);

  app.get("/", async (_request, reply) =>
    reply
      .type("text/html; charset=utf-8")
      .header("cache-control", "no-store")
      .header("content-security-policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'")
      .send(PLAYGROUND_HTML),
  );
  app.get("/favicon.ico", quiet, async (_request, reply) => reply.code(204).send());

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
      await policy()?.close();
    }
    app.log.info("runtime closed");
  });

  return app;
}

/** What /readyz shows of the policy: names, never a path on the server's disk. */
function publicPolicyInfo(info: PolicyInfo): Record<string, unknown> {
  const base = (file: string): string => file.split(/[\\/]/).filter(Boolean).pop() ?? file;
  return {
    backend: info.backend,
    model: modelDisplayName(info),
    device: info.device,
    contextSize: info.contextSize,
    maxSequences: info.maxSequences,
    ...(info.lora ? { lora: info.lora.map(base) } : {}),
  };
}

function stackFrames(err: unknown): string | undefined {
  const stack = (err as Error)?.stack;
  return stack?.split("\n").filter((line) => line.trimStart().startsWith("at ")).slice(0, 8).join("\n");
}

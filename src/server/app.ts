/**
 * The fastify app factory: the logger, the zod type provider (validation, JSON.stringify
 * serialization), the record of documented routes for /openapi.json, the shared state decorated
 * as `app.reex`, and the plugins in order (src/server/plugins: auth and limits, errors,
 * operations, playground, routes, shutdown).
 */
import Fastify, { type FastifyInstance } from "fastify";
import type { Policy } from "../policy/index.js";
import { KeyRing } from "./auth.js";
import { createLogger, requestId } from "./logging.js";
import { createServerMetrics } from "./metrics.js";
import { authPlugin } from "./plugins/auth.js";
import { errorsPlugin } from "./plugins/errors.js";
import { opsPlugin } from "./plugins/ops.js";
import { playgroundPlugin } from "./plugins/playground.js";
import { routesPlugin } from "./plugins/routes.js";
import { DRAIN_AFTER_GRACE_MS, shutdownPlugin } from "./plugins/shutdown.js";
import { jsonSerializerCompiler, zodValidatorCompiler } from "./provider.js";
import { GenerationQueue } from "./queue.js";
import { RateLimiter } from "./rate-limit.js";
import { recordRoutes } from "./route-doc.js";
import type { ServerState } from "./state.js";
import { Teaching } from "./teaching.js";
import type { ServerDeps } from "./types.js";

function policyOf(deps: ServerDeps): () => Policy | undefined {
  const p = deps.policy;
  if (typeof p === "function") return p;
  return () => p;
}

function createState(deps: ServerDeps, log: FastifyInstance["log"]): ServerState {
  const sc = deps.config.server;
  const policy = policyOf(deps);
  const queue = new GenerationQueue({ maxConcurrent: sc.maxConcurrent, maxQueued: sc.maxQueued, maxQueuedPerTenant: sc.maxQueuedPerKey });
  return {
    config: deps.config,
    deps,
    queue,
    metrics: createServerMetrics({ queueDepth: () => queue.waiting, liveSequences: () => policy()?.liveTrajectories() ?? 0 }),
    keys: new KeyRing(sc.apiKeys),
    limiter: new RateLimiter(sc.rateLimitPerMinute, deps.now),
    authFailures: new RateLimiter(sc.authFailuresPerMinute, deps.now),
    draining: false,
    sockets: new Set(),
    log,
    policy,
    teaching: new Teaching({ config: deps.config, ...(deps.executor ? { executor: deps.executor } : {}) }),
  };
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
  const sc = deps.config.server;
  const graceMs = deps.shutdownGraceMs ?? sc.shutdownGraceMs;
  const app = Fastify({
    pluginTimeout: graceMs + DRAIN_AFTER_GRACE_MS + 10_000,
    loggerInstance: createLogger(deps.config, { ...(deps.logger ? { base: deps.logger } : {}), ...(deps.logStream ? { stream: deps.logStream } : {}) }),
    genReqId: requestId,
    bodyLimit: sc.bodyLimitBytes,
    connectionTimeout: sc.connectionTimeoutMs,
    requestTimeout: sc.requestTimeoutMs,
    return503OnClosing: false,
    forceCloseConnections: "idle",
  });
  app.setValidatorCompiler(zodValidatorCompiler);
  app.setSerializerCompiler(jsonSerializerCompiler);
  const routes = recordRoutes(app);
  app.decorate("reex", createState(deps, app.log));
  app.register(authPlugin);
  app.register(errorsPlugin);
  app.register(opsPlugin, { routes });
  app.register(playgroundPlugin);
  app.register(routesPlugin);
  app.register(shutdownPlugin, { graceMs });
  return app;
}

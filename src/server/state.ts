/** The per-app state that routes, hooks and shutdown share. */
import type { FastifyBaseLogger } from "fastify";
import type { WebSocket } from "ws";
import type { Config } from "../config/index.js";
import type { Policy } from "../policy/index.js";
import type { KeyRing } from "./auth.js";
import type { ServerMetrics } from "./metrics.js";
import type { GenerationQueue } from "./queue.js";
import type { RateLimiter } from "./rate-limit.js";
import type { Teaching } from "./teaching.js";
import type { ServerDeps } from "./types.js";

declare module "fastify" {
  interface FastifyInstance {
    /** The app's shared state (decorated by `buildApp`). */
    reex: ServerState;
  }
}

/** Everything one app instance shares between its routes and its shutdown. */
export interface ServerState {
  config: Config;
  deps: ServerDeps;
  queue: GenerationQueue;
  metrics: ServerMetrics;
  keys: KeyRing;
  limiter: RateLimiter;
  /** Failed authentications per client address and per presented key prefix (see server.authFailuresPerMinute). */
  authFailures: RateLimiter;
  /** Set when shutdown starts: /readyz answers 503 and /v1 refuses new work. */
  draining: boolean;
  sockets: Set<WebSocket>;
  log: FastifyBaseLogger;
  /** The policy when it is loaded. */
  policy(): Policy | undefined;
  /** Verified examples, recent answers and conversations (src/server/teaching.ts). */
  teaching: Teaching;
}

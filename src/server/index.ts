/** The HTTP/WebSocket server of reex: app factory, start-up, and the pieces other tools reuse. */
export { buildApp } from "./app.js";
export { checkPort, startServer, type RunningServer } from "./start.js";
export type { ServerDeps, DecodeFn, DatabaseRegistryLike, RegistryEntry, Awaitable } from "./types.js";
export type { SqlResponse } from "./schemas.js";
export { keyIdentity } from "./auth.js";
export { buildOpenApi } from "./openapi.js";
export { toApiError } from "./http-errors.js";
export { MetricsRegistry, Counter, Gauge, Histogram } from "./metrics.js";

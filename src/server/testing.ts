/** The server's pieces its tests check one by one; only tests import this file. */
export { keyIdentity } from "./auth.js";
export { toApiError } from "./http-errors.js";
export { Counter, Gauge, Histogram, MetricsRegistry } from "./metrics.js";
export { GenerationQueue } from "./queue.js";

/** The HTTP/WebSocket server of reex: app factory and start-up. */
export { buildApp } from "./app.js";
export { checkPort, startServer, type RunningServer } from "./start.js";
export type { ServerDeps } from "./types.js";
export { Teaching } from "./teaching.js";

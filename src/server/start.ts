/** Starting the app on a port with the configured host. */
import type { FastifyInstance } from "fastify";
import type { Config } from "../config/index.js";
import { buildApp } from "./app.js";
import type { ServerDeps } from "./types.js";

/** A listening server. */
export interface RunningServer {
  app: FastifyInstance;
  /** Base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  port: number;
  /** Graceful shutdown (see {@link buildApp}); safe to call twice. */
  close(): Promise<void>;
}

/** Builds the app from `deps` and listens on config.server.host:port (port 0 picks a free one). */
export async function startServer(config: Config, deps: Omit<ServerDeps, "config">): Promise<RunningServer> {
  const app = buildApp({ ...deps, config });
  await app.listen({ host: config.server.host, port: config.server.port });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.server.port;
  const host = config.server.host.includes(":") ? `[${config.server.host}]` : config.server.host;
  let closing: Promise<void> | undefined;
  return {
    app,
    url: `http://${host}:${port}`,
    port,
    close: () => (closing ??= app.close()),
  };
}

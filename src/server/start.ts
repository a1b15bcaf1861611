/** Starting the app on a port with the configured host. */
import { createServer } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Config } from "../config/index.js";
import { ReexError } from "../errors/index.js";
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

function portInUse(config: Config, err: unknown): ReexError {
  const { host, port } = config.server;
  return new ReexError("PORT_IN_USE", `${host}:${port} is already in use by another process; stop it or pick another port with --server.port N`, {
    cause: err,
  });
}

/**
 * Throws PORT_IN_USE when config.server.host:port cannot be bound, by binding it for a moment: so
 * `reex serve` can fail in a second, before it spends the model's load time. Other bind errors
 * are left for the real listen to report.
 */
export async function checkPort(config: Config): Promise<void> {
  if (config.server.port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? reject(portInUse(config, err)) : resolve()));
    probe.listen({ host: config.server.host, port: config.server.port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/** Builds the app from `deps` and listens on config.server.host:port (port 0 picks a free one); PORT_IN_USE when it is taken. */
export async function startServer(config: Config, deps: Omit<ServerDeps, "config">): Promise<RunningServer> {
  const app = buildApp({ ...deps, config });
  try {
    await app.listen({ host: config.server.host, port: config.server.port });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") throw portInUse(config, err);
    throw err;
  }
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

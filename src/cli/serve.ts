/**
 * `reex serve`: loads the configuration (file ← REEX_* env ← flags), builds the runtime (registry,
 * executor, policy, decoder), starts the HTTP/WebSocket server and shuts it down gracefully on
 * SIGINT/SIGTERM. The runtime and server are imported only after the arguments are valid, so
 * `--help` and bad flags never load llama.cpp.
 */
import { configHelp, loadConfig, splitSettings, unknownOption } from "../config/index.js";
import { ReexError } from "../errors/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "start the HTTP/WebSocket API and the playground";

const USAGE = `usage: reex serve [--config FILE] [--section.key value ...]

Starts the API (/v1/...), the playground (/) and /healthz, /readyz, /metrics, /openapi.json.
Settings come from defaults, then the JSON file (--config FILE or REEX_CONFIG), then REEX_*
environment variables, then flags. SIGINT/SIGTERM drain in-flight work and exit.

  --db PATH|URL                      also serve this SQLite file or postgres://user@host/db
                                     (password as \${ENV_VAR} or PGPASSWORD); repeatable

options (flag, environment variable, default):
  --config FILE                      REEX_CONFIG                        default (none)
`;

/** Parsed `reex serve` arguments. */
export interface ServeArgs {
  help: boolean;
  file?: string;
  flags: Record<string, string>;
}

/** Parses `--help` and the settings ({@link splitSettings}); any other option is CONFIG_INVALID with a "did you mean". */
export function parseServeArgs(argv: string[]): ServeArgs {
  const settings = splitSettings(argv);
  const out: ServeArgs = { help: false, flags: settings.flags, ...(settings.file !== undefined ? { file: settings.file } : {}) };
  for (const arg of settings.rest) {
    if (arg === "--help" || arg === "-h") out.help = true;
    else if (arg.startsWith("-")) throw unknownOption(arg);
    else throw new ReexError("BAD_REQUEST", `unexpected argument "${arg}"`);
  }
  return out;
}

/** Takes `--db PATH|URL` / `--db=PATH|URL` (repeatable) out of the arguments: the databases to serve besides the examples. */
export function takeDbArgs(argv: string[]): { dbs: string[]; rest: string[] } {
  const dbs: string[] = [];
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg.startsWith("--db=")) dbs.push(arg.slice(5));
    else if (arg === "--db") {
      const value = argv[++i];
      if (value === undefined || value.startsWith("--")) throw new ReexError("BAD_REQUEST", "--db needs a path or a postgres:// URL");
      dbs.push(value);
    } else rest.push(arg);
  }
  return { dbs, rest };
}

/** Runs `reex serve`; resolves with the exit code once the server has shut down. */
export async function run(argv: string[]): Promise<number> {
  const { dbs, rest } = takeDbArgs(argv);
  const args = parseServeArgs(rest);
  if (args.help) {
    console.log(USAGE + configHelp());
    return 0;
  }
  const config = loadConfig({ env: process.env, flags: args.flags, ...(args.file !== undefined ? { file: args.file } : {}) });
  const { checkPort, startServer } = await import("../server/index.js");
  await checkPort(config);
  const { createRuntime } = await import("../runtime/index.js");
  const { isPostgresSetting } = await import("../pg/index.js");
  const runtime = await createRuntime(config, {
    postgres: dbs.filter((db) => isPostgresSetting(db)),
    log: (message: string) => console.error(`reex: ${message}`),
  });
  let server;
  try {
    for (const path of dbs.filter((db) => !isPostgresSetting(db))) await runtime.registry.registerPath(path);
    server = await startServer(config, runtime);
  } catch (err) {
    await runtime.close();
    throw err;
  }
  server.app.log.info({ url: server.url }, "reex is listening");
  const running = server;
  await new Promise<void>((resolve) => {
    let signals = 0;
    const stop = (signal: NodeJS.Signals): void => {
      signals += 1;
      if (signals > 1) {
        running.app.log.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      running.app.log.info({ signal }, "shutting down");
      running.close().then(resolve, (err: unknown) => {
        running.app.log.error({ errName: (err as Error)?.name }, "shutdown failed");
        resolve();
      });
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  return 0;
}

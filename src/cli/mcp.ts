/**
 * `reex mcp`: reex as an MCP server over stdio, for desktop MCP clients. It takes the same
 * configuration as `reex serve` and `--db PATH` (repeatable) to register databases at start.
 * stdout carries nothing but the protocol; start-up notes and logs go to stderr.
 */
import { loadConfig, type Config } from "../config/index.js";
import { ReexError } from "../errors/index.js";
import { parseServeArgs } from "./serve.js";

/** One-line description shown by `reex --help`. */
export const summary = "serve the tools (list_databases, describe_database, run_sql, ask, add_example, list_examples) to an MCP client over stdio";

const USAGE = `usage: reex mcp [--db PATH ...] [--no-examples] [--config FILE] [--section.key value ...]

Speaks the Model Context Protocol on stdin/stdout (logs go to stderr) with the tools
list_databases, describe_database, run_sql, ask (with verified examples and conversations),
add_example and list_examples, and each database's schema as a resource.
Settings are those of reex serve (reex serve --help lists them). The running HTTP server serves
the same tools at /mcp.

options:
  --db PATH|URL    register this SQLite file (opened read-only) or postgres://user@host/db
                   (password as \${ENV_VAR} or PGPASSWORD); repeatable
  --no-examples    do not register the example databases
  --config FILE    configuration file
  -h, --help       show this help`;

/** Parsed `reex mcp` arguments: the databases to register plus what `reex serve` takes. */
export interface McpArgs {
  help: boolean;
  dbs: string[];
  examples: boolean;
  file?: string;
  flags: Record<string, string>;
}

/** Splits `--db PATH` / `--db=PATH` (repeatable) and `--no-examples` from the `reex serve` arguments. */
export function parseMcpArgs(argv: string[]): McpArgs {
  const dbs: string[] = [];
  const rest: string[] = [];
  let examples = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--no-examples") examples = false;
    else if (arg.startsWith("--db=")) dbs.push(arg.slice(5));
    else if (arg === "--db") {
      const path = argv[++i];
      if (path === undefined || path.startsWith("--")) throw new ReexError("BAD_REQUEST", "--db needs a path");
      dbs.push(path);
    } else rest.push(arg);
  }
  const serve = parseServeArgs(rest);
  return { help: serve.help, dbs, examples, flags: serve.flags, ...(serve.file !== undefined ? { file: serve.file } : {}) };
}

/** Bounds one decode by server.requestTimeoutMs, failing it with DEADLINE_EXCEEDED, as the HTTP server does. */
function withDeadline(config: Config, signal: AbortSignal | undefined): AbortSignal {
  const ms = config.server.requestTimeoutMs;
  const deadline = new AbortController();
  setTimeout(() => deadline.abort(new ReexError("DEADLINE_EXCEEDED", `no answer within ${ms} ms (server.requestTimeoutMs)`)), ms).unref();
  return signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
}

/** Runs `reex mcp`; resolves with the exit code once the client has gone. */
export async function run(argv: string[]): Promise<number> {
  const args = parseMcpArgs(argv);
  if (args.help) {
    console.log(USAGE);
    return 0;
  }
  // stdout belongs to the protocol: anything a dependency prints goes to stderr instead.
  console.log = console.error;
  console.info = console.error;
  console.debug = console.error;
  const config = loadConfig({ env: process.env, flags: args.flags, ...(args.file !== undefined ? { file: args.file } : {}) });
  const { pino } = await import("pino");
  const log = pino({ level: config.server.logLevel, base: { front: "mcp" } }, pino.destination(2));
  const { createRuntime } = await import("../runtime/index.js");
  const { isPostgresSetting } = await import("../pg/index.js");
  const postgres = args.dbs.filter((db) => isPostgresSetting(db));
  const runtime = await createRuntime(config, { examples: args.examples, postgres, log: (message: string) => console.error(`reex: ${message}`) });
  try {
    for (const path of args.dbs.filter((db) => !isPostgresSetting(db))) {
      const entry = await runtime.registry.registerPath(path);
      console.error(`reex: registered ${entry.name} (${entry.id}) from ${entry.path}`);
    }
  } catch (err) {
    await runtime.close();
    throw err;
  }

  const { StdioServerTransport } = await import("@modelcontextprotocol/sdk/server/stdio.js");
  const { createMcpServer } = await import("../mcp/index.js");
  const { Teaching } = await import("../server/index.js");
  const teaching = new Teaching({ config, executor: runtime.executor });
  const server = createMcpServer({
    config,
    registry: runtime.registry,
    executor: runtime.executor,
    decode: (request, ctx) => runtime.decode(request, { ...(ctx.sink ? { sink: ctx.sink } : {}), signal: withDeadline(config, ctx.signal) }),
    teaching,
    log,
    profile: runtime.profile.id,
    liveTrajectories: () => runtime.policy.liveTrajectories(),
  });
  const transport = new StdioServerTransport();
  await new Promise<void>((resolve) => {
    let done = false;
    const stop = (): void => {
      if (done) return;
      done = true;
      server.close().then(resolve, resolve);
    };
    const closed = server.onclose;
    server.onclose = () => {
      closed?.();
      stop();
    };
    process.stdin.once("end", stop);
    process.stdin.once("close", stop);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    server.connect(transport).then(
      () => console.error("reex: MCP server ready on stdio"),
      (err: unknown) => {
        console.error(err);
        stop();
      },
    );
  });
  await runtime.close();
  return 0;
}

/**
 * The `reex` command line: one sub-command per job. Each lives in src/cli/<name>.ts, exports
 * `summary` and `run(argv)`, and is loaded only when used so `reex exec` never loads llama.cpp.
 */
import { isReexError, redactSecrets } from "./errors/index.js";

const COMMANDS = ["serve", "ask", "mcp", "exec", "schema", "eval", "train", "reward", "examples", "models"] as const;
type CommandName = (typeof COMMANDS)[number];

interface CommandModule {
  summary: string;
  run(argv: string[]): Promise<number>;
}

async function load(name: CommandName): Promise<CommandModule> {
  return (await import(`./cli/${name}.js`)) as CommandModule;
}

async function usage(): Promise<string> {
  const lines = ["usage: reex <command> [options]   (reex <command> --help for its options)", "", "commands:"];
  for (const name of COMMANDS) {
    try {
      lines.push(`  ${name.padEnd(10)} ${(await load(name)).summary}`);
    } catch {
      // a command whose module is not built yet is left out of the listing
    }
  }
  return lines.join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    console.log(await usage());
    return name ? 0 : 1;
  }
  if (!(COMMANDS as readonly string[]).includes(name)) {
    console.error(`reex: unknown command "${name}"\n\n${await usage()}`);
    return 2;
  }
  return (await load(name as CommandName)).run(rest);
}

/**
 * Everything the commands write to stderr (errors, progress, warnings, a library's stack trace)
 * passes {@link redactSecrets} first, so no front end prints a `postgres://` password.
 */
function redactStderr(): void {
  const write = process.stderr.write.bind(process.stderr) as (chunk: unknown, ...rest: unknown[]) => boolean;
  process.stderr.write = ((chunk: unknown, ...rest: unknown[]) =>
    write(
      typeof chunk === "string" ? redactSecrets(chunk) : chunk instanceof Uint8Array ? redactSecrets(Buffer.from(chunk).toString("utf8")) : chunk,
      ...rest,
    )) as typeof process.stderr.write;
}

redactStderr();
main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (isReexError(err)) {
      console.error(`reex: ${err.code}: ${err.message}`);
      for (const issue of err.issues ?? []) console.error(`  - ${issue.path.join(".") || "(root)"}: ${issue.message}`);
    } else {
      console.error(err);
    }
    process.exitCode = 1;
  },
);

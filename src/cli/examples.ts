/**
 * `reex examples [build] [--out DIR] [--force]`: builds the example databases and questions.json
 * (BIRD root layout). `reex examples add|list|rm --db DB …`: a database's verified examples, the
 * ones the server shows the model for similar questions (docs/teaching.md), in the same store.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig, splitSettings, type Config } from "../config/index.js";
import { ReexError } from "../errors/index.js";
import { buildExamples, DEFAULT_EXAMPLES_DIR, QUESTIONS_FILE, UNANSWERABLE_FILE } from "../examples/index.js";
import { Teaching } from "../server/index.js";
import { DatabaseRegistry, ExecutorPool, type DatabaseEntry } from "../sql/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "build the example SQLite databases and their BIRD-style questions; add, list and remove a database's verified examples";

const HELP = `usage: reex examples [build] [--out DIR] [--force]
       reex examples add  --db DB --question TEXT --sql SQL [--evidence TEXT]
       reex examples list --db DB [--json]
       reex examples rm   --db DB EXAMPLE_ID

build (also with no subcommand): builds <DIR>/databases/<db_id>/<db_id>.sqlite for every example
database, <DIR>/${QUESTIONS_FILE} and <DIR>/${UNANSWERABLE_FILE} (questions no SQL over them answers).
Skips the work when <DIR>/.build-hash says the files are current.

add, list, rm: the verified examples of a database, kept beside the registry in
<sql.dataDir>/examples/ (docs/teaching.md). The server shows the model the ones whose questions are
most like a new question. add runs the SQL first (read-only, guarded) and stores nothing when it
fails; an example of the same question replaces the earlier one. Examples written here are shared:
every API key sees them. DB is a registered database's id or name (the example databases by name:
clinic, …) or the path of a SQLite file, which is registered.

options:
  --out DIR          build: output root (default: ${DEFAULT_EXAMPLES_DIR})
  --force            build: rebuild even when the files are current
  --db DB            add, list, rm: the database
  --question TEXT    add: the question
  --sql SQL          add: its right SQL
  --evidence TEXT    add: the hint it is asked with, if any
  --json             list: print JSON instead of lines
  --config FILE      configuration file; --sql.dataDir DIR and the other settings of reex serve apply
  -h, --help         show this help`;

const OPTIONS = {
  out: { type: "string" },
  force: { type: "boolean" },
  db: { type: "string" },
  question: { type: "string" },
  sql: { type: "string" },
  evidence: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

type Values = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

async function build(values: Values): Promise<number> {
  const outDir = resolve(values.out ?? DEFAULT_EXAMPLES_DIR);
  const sets = await buildExamples(outDir, { force: values.force ?? false });
  for (const set of sets) console.log(`${set.dbId.padEnd(8)} ${String(set.questions.length).padStart(3)} questions  ${set.path}`);
  console.log(`questions: ${join(outDir, QUESTIONS_FILE)}`);
  console.log(`unanswerable questions: ${join(outDir, UNANSWERABLE_FILE)}`);
  return 0;
}

/** The database `db` names: a registered id or name (the example databases are registered first), else a SQLite file's path, registered. */
export async function resolveDatabase(config: Config, db: string): Promise<DatabaseEntry> {
  const registry = new DatabaseRegistry({ dataDir: config.sql.dataDir });
  for (const set of await buildExamples()) await registry.registerPath(set.path, { name: set.dbId });
  try {
    return registry.get(db);
  } catch (err) {
    if (existsSync(db)) return registry.registerPath(db);
    throw err;
  }
}

/** Runs add, list or rm on `entry`. */
async function manage(sub: string, values: Values, rest: string[], config: Config, entry: DatabaseEntry): Promise<number> {
  const sc = config.sql;
  const executor = new ExecutorPool({ workers: 1, timeoutMs: sc.timeoutMs, maxRows: sc.maxRows, maxQueryMemoryMB: sc.maxQueryMemoryMB });
  const teaching = new Teaching({ config, executor });
  try {
    if (sub === "add") {
      if (values.question === undefined || values.sql === undefined) throw new ReexError("BAD_REQUEST", "add needs --question and --sql");
      const input = { question: values.question, sql: values.sql, ...(values.evidence !== undefined ? { evidence: values.evidence } : {}) };
      const { example, created } = await teaching.addExample(entry, undefined, input);
      console.log(`${created ? "added" : "replaced"} ${example.id} on ${entry.name} (${entry.id}): ${example.rowCount} rows of ${example.columns.join(", ")}`);
    } else if (sub === "list") {
      const examples = teaching.listExamples(entry, undefined);
      if (values.json) console.log(JSON.stringify({ database: entry.id, examples }, null, 2));
      else for (const e of examples) console.log(`${e.id}  ${e.question}\n    ${e.sql.replace(/\s*\n\s*/g, " ")}`);
      if (!values.json && examples.length === 0) console.log(`no verified examples on ${entry.name} (${entry.id})`);
    } else {
      const id = rest[0];
      if (id === undefined || rest.length > 1) throw new ReexError("BAD_REQUEST", "rm needs one EXAMPLE_ID");
      teaching.store.remove(entry.id, id);
      console.log(`removed ${id} from ${entry.name} (${entry.id})`);
    }
    return 0;
  } finally {
    await executor.close();
  }
}

/** Runs the command; returns the exit code (0 ok, 2 bad arguments; failures throw ReexError). */
export async function run(argv: string[]): Promise<number> {
  const settings = splitSettings(argv);
  let values: Values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: settings.rest, options: OPTIONS, strict: true, allowPositionals: true }));
  } catch (err) {
    console.error(`reex examples: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const [sub = "build", ...rest] = positionals;
  if (sub === "build" && rest.length === 0) return build(values);
  if (!["add", "list", "rm"].includes(sub) || (sub !== "rm" && rest.length > 0)) {
    console.error(`reex examples: unexpected argument "${sub === "build" ? rest[0] : sub}"\n\n${HELP}`);
    return 2;
  }
  if (values.db === undefined) {
    console.error(`reex examples ${sub}: --db DB is required\n\n${HELP}`);
    return 2;
  }
  const config = loadConfig({ env: process.env, flags: settings.flags, ...(settings.file !== undefined ? { file: settings.file } : {}) });
  return manage(sub, values, rest, config, await resolveDatabase(config, values.db));
}

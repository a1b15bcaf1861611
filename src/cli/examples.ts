/** `reex examples [--out DIR] [--force]`: builds the example databases and questions.json (BIRD root layout). */
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { buildExamples, DEFAULT_EXAMPLES_DIR, QUESTIONS_FILE, UNANSWERABLE_FILE } from "../examples/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "build the example SQLite databases and their BIRD-style questions";

const HELP = `usage: reex examples [--out DIR] [--force]

Builds <DIR>/databases/<db_id>/<db_id>.sqlite for every example database, <DIR>/${QUESTIONS_FILE} and <DIR>/${UNANSWERABLE_FILE} (questions no SQL over them answers).
Skips the work when <DIR>/.build-hash says the files are current.

options:
  --out DIR   output root (default: ${DEFAULT_EXAMPLES_DIR})
  --force     rebuild even when the files are current
  -h, --help  show this help`;

/** Runs the command; returns the exit code (0 ok, 2 bad arguments). */
export async function run(argv: string[]): Promise<number> {
  let values: { out?: string; force?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { out: { type: "string" }, force: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    console.error(`reex examples: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const outDir = resolve(values.out ?? DEFAULT_EXAMPLES_DIR);
  const sets = await buildExamples(outDir, { force: values.force ?? false });
  for (const set of sets) console.log(`${set.dbId.padEnd(8)} ${String(set.questions.length).padStart(3)} questions  ${set.path}`);
  console.log(`questions: ${join(outDir, QUESTIONS_FILE)}`);
  console.log(`unanswerable questions: ${join(outDir, UNANSWERABLE_FILE)}`);
  return 0;
}

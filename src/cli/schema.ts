/**
 * `reex schema`: prints a database's schema as the prompt shows it (CodeS lines or CREATE TABLE
 * text), optionally cut to a token budget around a question, with the question's matched values.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ReexError } from "../errors/index.js";
import { ValueIndex, formatMatchedValues, loadSchema, schemaPrompt, type ColumnDescriptions, type SchemaFormat, type ValueMatch } from "../sql/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "print a database's schema prompt (and the values a question matches)";

const HELP = `usage: reex schema --db PATH [--question Q] [--format codes|ddl] [--token-budget N] [--json]

Prints the schema section of the prompt for a SQLite database. With --question, tables and
columns are ranked by relevance to it (when a --token-budget is given) and the values of the
database that the question mentions are printed under "Matched values" (the value index is
built on first use and kept in --index-dir).

options:
  --db PATH             SQLite database file (opened read-only)
  --question Q          natural-language question
  --format F            codes (table.column ( type | … ) lines, default) | ddl (CREATE TABLE text)
  --token-budget N      most tokens for the schema text (≈ 4 characters a token); default no limit
  --descriptions FILE   JSON {table: {column: comment}} of column comments
  --examples N          example values per column (default 3)
  --matches N           matched values shown at most (default 10)
  --index-dir DIR       where value indexes are kept (default .reex/indexes)
  --json                print the structured schema (and matches) as JSON
  -h, --help            show this help`;

const OPTIONS = {
  db: { type: "string" },
  question: { type: "string" },
  format: { type: "string" },
  "token-budget": { type: "string" },
  descriptions: { type: "string" },
  examples: { type: "string" },
  matches: { type: "string" },
  "index-dir": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function bad(path: string, message: string): ReexError {
  return new ReexError("BAD_REQUEST", `--${path}: ${message}`, { issues: [{ path: [path], message }] });
}

function intFlag(name: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw bad(name, `expected an integer ≥ ${min}, got "${raw}"`);
  return n;
}

/** Runs `reex schema`; returns the exit code. */
export async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: false, strict: true });
  } catch (err) {
    throw new ReexError("BAD_REQUEST", (err as Error).message);
  }
  const v = parsed.values;
  if (v.help) {
    console.log(HELP);
    return 0;
  }
  if (!v.db) throw bad("db", "required");
  const format = (v.format ?? "codes") as SchemaFormat;
  if (format !== "codes" && format !== "ddl") throw bad("format", `expected codes or ddl, got "${v.format}"`);
  const tokenBudget = intFlag("token-budget", v["token-budget"], 1);
  const examples = intFlag("examples", v.examples, 0);
  const limit = intFlag("matches", v.matches, 0) ?? 10;
  let descriptions: ColumnDescriptions | undefined;
  if (v.descriptions) {
    try {
      descriptions = JSON.parse(readFileSync(v.descriptions, "utf8")) as ColumnDescriptions;
    } catch (err) {
      throw bad("descriptions", `cannot read JSON: ${(err as Error).message}`);
    }
  }

  const schema = loadSchema(v.db, { ...(examples !== undefined ? { examples } : {}), ...(descriptions ? { descriptions } : {}) });
  let matches: ValueMatch[] = [];
  if (v.question) {
    const index = ValueIndex.open(v.db, { indexDir: v["index-dir"] ?? ".reex/indexes" });
    try {
      matches = index.match(v.question, { limit });
    } finally {
      index.close();
    }
  }
  const prompt = schemaPrompt(schema, {
    format,
    matches,
    ...(v.question ? { question: v.question } : {}),
    ...(tokenBudget !== undefined ? { tokenBudget } : {}),
  });

  if (v.json) {
    console.log(JSON.stringify({ schema, prompt, matches }, null, 2));
    return 0;
  }
  console.log(prompt.text);
  if (v.question) {
    console.log(`\nMatched values:\n${matches.length > 0 ? formatMatchedValues(matches) : "(none)"}`);
  }
  return 0;
}

/**
 * Reads the real text-to-SQL files that ship in `data/text2sql` (jkkummerfeld/text2sql-data's
 * canonical format: one entry per SQL query, with the sentences that ask it).
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ReexError } from "../../src/errors/index.js";
import type { Difficulty } from "../../src/examples/index.js";
import type { Lookup } from "../synth/index.js";

/** A question's split as the data set gives it; Advising also has `exclude`. */
export type RealSplit = "train" | "dev" | "test" | "exclude";

/** A real question whose rewritten SQL runs on its rebuilt database and returns rows. */
export interface RealItem {
  db_id: string;
  split: RealSplit;
  question: string;
  SQL: string;
  difficulty: Difficulty;
  lookups: Lookup[];
  tables: string[];
  goal: string;
}

/** One sentence of an entry. */
export interface RealSentence {
  text: string;
  /** WikiSQL only: the question as its author wrote it, values included. */
  original?: string;
  "question-split": RealSplit;
  /** WikiSQL only: the table the question is about. */
  "table-id"?: string;
  variables: Record<string, string>;
}

/** One canonical entry: a query and the sentences that ask it. */
export interface RealEntry {
  sql: string[];
  sentences: RealSentence[];
  "query-split"?: string;
  variables?: { name: string; example: string; type: string; location: string }[];
}

/** The folder the data ships in: `data/text2sql` at the repository root. */
export function defaultDataDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ["../..", "../../.."]) {
    const dir = resolve(here, up, "data", "text2sql");
    if (existsSync(dir)) return dir;
  }
  return resolve(here, "../../data/text2sql");
}

function need(path: string): void {
  if (!existsSync(path)) throw new ReexError("DATASET_INVALID", `real data file not found: ${path}`);
}

/** WikiSQL's entries, from `wikisql.json.bz2` (decompressed with the system's `bzip2 -dc`). */
export function readWikiSqlEntries(dataDir = defaultDataDir()): RealEntry[] {
  const path = join(dataDir, "wikisql.json.bz2");
  need(path);
  let text: string;
  try {
    text = execFileSync("bzip2", ["-dc", path], { maxBuffer: 512 * 1024 * 1024, encoding: "utf8" });
  } catch (error) {
    throw new ReexError(
      "DATASET_INVALID",
      `could not decompress ${path} with bzip2 -dc (is bzip2 installed?): ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return JSON.parse(text) as RealEntry[];
}

/** Advising's entries, from `advising.json`. */
export function readAdvisingEntries(dataDir = defaultDataDir()): RealEntry[] {
  const path = join(dataDir, "advising.json");
  need(path);
  return JSON.parse(readFileSync(path, "utf8")) as RealEntry[];
}

/** Lines of a comma-separated schema file, split and trimmed, header dropped. */
export function readSchemaCsv(dataDir: string, file: string): string[][] {
  const path = join(dataDir, file);
  need(path);
  return readFileSync(path, "utf8")
    .split("\n")
    .slice(1)
    .filter((l) => l.trim() !== "")
    .map((l) => l.split(",").map((c) => c.trim()));
}

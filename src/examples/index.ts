/**
 * Example databases that reex builds itself: small, realistic SQLite files whose value encodings
 * (ISO codes, status codes, cents, milliseconds, inconsistent casing) a model cannot guess without
 * probing, with questions in BIRD's layout. Output is byte-for-byte deterministic.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, posix, resolve } from "node:path";
import Database from "better-sqlite3";
import { packageRoot } from "../paths/index.js";
import { Rng } from "./prng.js";
import { UNANSWERABLE_QUESTIONS } from "./unanswerable.js";
import type { BirdQuestion, ExampleDatabase, ExampleSet } from "./types.js";
import { BUILD_MARKER, EXAMPLE_DATABASES, exampleDbPath, PAGE_SIZE } from "./layout.js";

export type { BirdQuestion, Difficulty } from "./types.js";
export { Rng } from "./prng.js";

/** File name of the unanswerable questions written beside {@link QUESTIONS_FILE}. Default `unanswerable.json`. */
export const UNANSWERABLE_FILE = "unanswerable.json";

/** Bump when a generator's data changes without its DDL or questions changing; part of the build key. Currently 1. */
const GENERATOR_VERSION = 1;

/** File name of the question list written next to `databases/`. Default `questions.json`. */
export const QUESTIONS_FILE = "questions.json";

/** Where `buildExamples` writes when no directory is given. Default `<package root>/examples`. */
export const DEFAULT_EXAMPLES_DIR = join(packageRoot(), "examples");

/** All questions with global ids in BIRD's dev.json layout, numbered from 0 in database order. */
export function exampleQuestions(): BirdQuestion[] {
  const out: BirdQuestion[] = [];
  for (const def of EXAMPLE_DATABASES) {
    for (const q of def.questions) {
      out.push({ question_id: out.length, db_id: def.dbId, question: q.question, evidence: q.evidence, SQL: q.SQL, difficulty: q.difficulty });
    }
  }
  return out;
}

/** The unanswerable questions in BIRD's layout, marked `"answerable": false` with no gold SQL, numbered from 0. */
function unanswerableQuestions(): (Omit<BirdQuestion, "SQL" | "difficulty"> & { SQL: null; answerable: false; why: string })[] {
  return UNANSWERABLE_QUESTIONS.map((q, i) => ({
    question_id: i,
    db_id: q.db_id,
    question: q.question,
    evidence: "",
    SQL: null,
    answerable: false,
    why: q.why,
  }));
}

/** The key a build is valid for: generator version, SQLite version, every schema and question. */
function buildKey(): string {
  const memory = new Database(":memory:");
  const sqliteVersion = (memory.prepare("SELECT sqlite_version() AS v").get() as { v: string }).v;
  memory.close();
  const payload = JSON.stringify({
    generator: GENERATOR_VERSION,
    sqlite: sqliteVersion,
    pageSize: PAGE_SIZE,
    databases: EXAMPLE_DATABASES.map((d) => ({ dbId: d.dbId, ddl: d.ddl, questions: d.questions })),
    unanswerable: UNANSWERABLE_QUESTIONS,
  });
  return createHash("sha256").update(payload).digest("hex");
}

/** Writes one database to `path` (which must not exist) and checks its foreign keys before closing. */
function writeExampleDb(def: ExampleDatabase, path: string): void {
  const db = new Database(path);
  try {
    db.pragma(`page_size = ${PAGE_SIZE}`);
    db.pragma("journal_mode = DELETE");
    db.pragma("foreign_keys = ON");
    db.exec(def.ddl);
    const tables = def.generate(new Rng(`reex-example:${def.dbId}`));
    db.transaction(() => {
      for (const { table, rows } of tables) {
        const first = rows[0];
        if (!first) continue;
        const cols = Object.keys(first);
        const insert = db.prepare(`INSERT INTO "${table}" (${cols.map((c) => `"${c}"`).join(", ")}) VALUES (${cols.map((c) => `@${c}`).join(", ")})`);
        for (const row of rows) insert.run(row);
      }
    })();
    const violations = db.pragma("foreign_key_check") as unknown[];
    if (violations.length > 0) throw new Error(`${def.dbId}: ${violations.length} foreign key violations`);
    db.exec("VACUUM");
  } finally {
    db.close();
  }
}

function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

interface Marker {
  key: string;
  files: Record<string, string>;
}

async function readMarker(outDir: string): Promise<Marker | undefined> {
  try {
    return JSON.parse(await readFile(join(outDir, BUILD_MARKER), "utf8")) as Marker;
  } catch {
    return undefined;
  }
}

async function upToDate(outDir: string, key: string, expected: string[]): Promise<boolean> {
  const marker = await readMarker(outDir);
  if (!marker || marker.key !== key) return false;
  for (const rel of expected) {
    const want = marker.files[rel];
    if (!want) return false;
    try {
      if (sha256(await readFile(join(outDir, rel))) !== want) return false;
    } catch {
      return false;
    }
  }
  return true;
}

function relativeOutputs(): string[] {
  return [...EXAMPLE_DATABASES.map((d) => posix.join("databases", d.dbId, `${d.dbId}.sqlite`)), QUESTIONS_FILE, UNANSWERABLE_FILE];
}

/**
 * Builds every example database, `questions.json` and `unanswerable.json` into `outDir` (BIRD root layout), skipping the
 * work when `.build-hash` matches; each file is replaced atomically. Default `outDir`: {@link DEFAULT_EXAMPLES_DIR}.
 */
export async function buildExamples(outDir: string = DEFAULT_EXAMPLES_DIR, options: { force?: boolean } = {}): Promise<ExampleSet[]> {
  const root = resolve(outDir);
  const questions = exampleQuestions();
  const sets: ExampleSet[] = EXAMPLE_DATABASES.map((d) => ({
    dbId: d.dbId,
    path: exampleDbPath(root, d.dbId),
    questions: questions.filter((q) => q.db_id === d.dbId),
  }));
  const key = buildKey();
  const outputs = relativeOutputs();
  if (!options.force && (await upToDate(root, key, outputs))) return sets;

  await mkdir(root, { recursive: true });
  const tmp = join(root, `.tmp-build-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    for (const def of EXAMPLE_DATABASES) {
      await mkdir(join(tmp, "databases", def.dbId), { recursive: true });
      writeExampleDb(def, exampleDbPath(tmp, def.dbId));
    }
    await writeFile(join(tmp, QUESTIONS_FILE), `${JSON.stringify(questions, null, 2)}\n`);
    await writeFile(join(tmp, UNANSWERABLE_FILE), `${JSON.stringify(unanswerableQuestions(), null, 2)}\n`);
    const files: Record<string, string> = {};
    for (const rel of outputs) files[rel] = sha256(await readFile(join(tmp, rel)));
    await writeFile(join(tmp, BUILD_MARKER), `${JSON.stringify({ key, files } satisfies Marker, null, 2)}\n`);
    for (const rel of [...outputs, BUILD_MARKER]) {
      await mkdir(dirname(join(root, rel)), { recursive: true });
      await rename(join(tmp, rel), join(root, rel));
    }
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return sets;
}

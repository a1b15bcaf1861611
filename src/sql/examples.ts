/**
 * Verified examples: question/SQL pairs that a user vouched for, per database and API key, kept in
 * `<dataDir>/examples/<database id>.json` beside the registry (written through a temp file and a
 * rename), and the ones whose questions are most like a new question, by BM25 over the question
 * text. An example is stored only after its SQL ran through the guarded executor; the record keeps
 * its result's shape (columns, row count). Visibility follows the registry's: a key sees its own
 * examples and the shared (owner-less) ones; a call without an owner sees all of them.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { ReexError } from "../errors/index.js";
import { writeAtomic } from "./registry.js";
import { relevanceTokens } from "./schema-prompt.js";
import type { ExecuteOptions, Executor } from "./types.js";

/** One verified example of a database. */
export interface VerifiedExample {
  /** `ex-` and 12 hex digits. */
  id: string;
  /** The registry id of its database. */
  database: string;
  /** API key id that added it; owner-less examples are shared with every key. */
  owner?: string;
  question: string;
  sql: string;
  evidence?: string;
  /** The result's columns when it was verified. */
  columns: string[];
  /** Rows the result had (at most the executor's row cap, then `truncated`). */
  rowCount: number;
  truncated: boolean;
  /** "added": given as question and SQL; "confirmed": an answer marked right; "corrected": an answer's question with the right SQL. */
  origin: "added" | "confirmed" | "corrected";
  /** The answer it came from (confirmations and corrections). */
  answerId?: string;
  /** ISO-8601 time it was stored (or last replaced). */
  createdAt: string;
}

/** An example with its BM25 similarity to a question. */
export interface ScoredExample extends VerifiedExample {
  score: number;
}

/** What adding an example takes. */
export interface NewExample {
  question: string;
  sql: string;
  evidence?: string;
  /** Default "added". */
  origin?: VerifiedExample["origin"];
  answerId?: string;
}

/** Settings of an {@link ExampleStore}. */
export interface ExampleStoreOptions {
  /** The registry's folder; examples live in its `examples/` folder. */
  dataDir: string;
  /** Examples one owner keeps per database at most. */
  maxPerDatabase: number;
}

const FILE_VERSION = 1;
/** Registry ids (`name-hash`, `up-hash`, `pg-name`) are file-name safe; anything else is refused before it reaches a path. */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
/** BM25's term-frequency saturation and length normalisation (the usual values). */
const K1 = 1.2;
const B = 0.75;

interface Shelf {
  /** mtime and size of the file when it was read, so a write by another process (the CLI) is seen. */
  stamp: string;
  examples: VerifiedExample[];
}

function visible(example: VerifiedExample, owner: string | undefined): boolean {
  return owner === undefined || example.owner === undefined || example.owner === owner;
}

/** A question as examples compare them: trimmed, spacing collapsed, lower-cased. */
export function questionKey(question: string): string {
  return question.trim().replace(/\s+/g, " ").toLowerCase();
}

function sameQuestion(a: string, b: string): boolean {
  return questionKey(a) === questionKey(b);
}

/**
 * The BM25 scores of `docs` (token lists) for `query`'s distinct tokens, with document frequencies
 * over `docs` alone: Okapi BM25, idf = ln(1 + (N − df + 0.5) / (df + 0.5)).
 */
export function bm25Scores(query: readonly string[], docs: readonly (readonly string[])[]): number[] {
  const n = docs.length;
  if (n === 0) return [];
  const avg = docs.reduce((sum, d) => sum + d.length, 0) / n || 1;
  const df = new Map<string, number>();
  for (const doc of docs) for (const term of new Set(doc)) df.set(term, (df.get(term) ?? 0) + 1);
  const terms = [...new Set(query)].filter((t) => df.has(t));
  return docs.map((doc) => {
    const tf = new Map<string, number>();
    for (const term of doc) tf.set(term, (tf.get(term) ?? 0) + 1);
    let score = 0;
    for (const term of terms) {
      const f = tf.get(term) ?? 0;
      if (f === 0) continue;
      const d = df.get(term)!;
      score += Math.log(1 + (n - d + 0.5) / (d + 0.5)) * ((f * (K1 + 1)) / (f + K1 * (1 - B + (B * doc.length) / avg)));
    }
    return score;
  });
}

/**
 * The `k` entries of `pool` whose questions are most like `question` (BM25 over {@link relevanceTokens},
 * scores rounded to 3 decimals), best first; entries that share no word are left out, ties go to
 * `tieBreak` (default pool order). How the server picks a request's examples, and how `reex eval
 * --examples-from` picks them from a training split.
 */
export function rankExamples<T extends { question: string }>(
  question: string,
  pool: readonly T[],
  k: number,
  tokensOf: (entry: T) => string[] = (entry) => relevanceTokens(entry.question),
  tieBreak: (a: T, b: T) => number = () => 0,
): (T & { score: number })[] {
  if (k <= 0 || pool.length === 0) return [];
  const scores = bm25Scores(relevanceTokens(question), pool.map(tokensOf));
  return pool
    .map((e, i) => ({ ...e, score: Math.round(scores[i]! * 1000) / 1000 }))
    .filter((e) => e.score > 0)
    .sort((a, b) => b.score - a.score || tieBreak(a, b))
    .slice(0, k);
}

/** The verified examples of every database, persisted per database beside the registry. */
export class ExampleStore {
  private readonly dir: string;
  private readonly max: number;
  private readonly shelves = new Map<string, Shelf>();
  private readonly tokens = new Map<string, string[]>();

  constructor(options: ExampleStoreOptions) {
    this.dir = join(resolve(options.dataDir), "examples");
    this.max = options.maxPerDatabase;
  }

  /** The examples of `database` that `owner` sees, oldest first. */
  list(database: string, owner?: string): VerifiedExample[] {
    return this.shelf(database)
      .examples.filter((e) => visible(e, owner))
      .map((e) => ({ ...e, columns: [...e.columns] }));
  }

  /** The example `id` of `database` if `owner` sees it; EXAMPLE_NOT_FOUND otherwise. */
  get(database: string, id: string, owner?: string): VerifiedExample {
    const found = this.shelf(database).examples.find((e) => e.id === id && visible(e, owner));
    if (!found) throw new ReexError("EXAMPLE_NOT_FOUND", `no verified example "${id}" on database "${database}"`);
    return { ...found, columns: [...found.columns] };
  }

  /**
   * Runs `input.sql` on `target` through `executor` and, when it runs, stores it for `owner`:
   * EXAMPLE_SQL_FAILED (nothing stored) when it does not, EXAMPLES_FULL past the cap. The same
   * owner's example with the same question (case and spacing aside) is replaced, keeping its id:
   * the latest verified SQL of a question wins. `created` is false for a replacement.
   */
  async add(
    target: { id: string; path: string },
    owner: string | undefined,
    input: NewExample,
    executor: Executor,
    exec: ExecuteOptions = {},
  ): Promise<{ example: VerifiedExample; created: boolean }> {
    this.file(target.id);
    const result = await executor.execute(target.path, input.sql, exec);
    if (!result.ok) {
      throw new ReexError("EXAMPLE_SQL_FAILED", `the SQL did not run, so nothing was stored: ${result.error.code}: ${result.error.message}`, {
        details: { sqlCode: result.error.code, sqlMessage: result.error.message, category: result.error.category },
      });
    }
    // read again after the await: another add may have written meanwhile
    const shelf = this.shelf(target.id);
    const previous = shelf.examples.find((e) => e.owner === owner && sameQuestion(e.question, input.question));
    if (!previous && shelf.examples.filter((e) => e.owner === owner).length >= this.max) {
      throw new ReexError(
        "EXAMPLES_FULL",
        `${this.max} verified examples are kept on database "${target.id}" for this key (teach.maxExamples); delete some first`,
      );
    }
    const example: VerifiedExample = {
      id: previous?.id ?? `ex-${randomUUID().replace(/-/g, "").slice(0, 12)}`,
      database: target.id,
      ...(owner !== undefined ? { owner } : {}),
      question: input.question.trim(),
      sql: input.sql.trim(),
      ...(input.evidence?.trim() ? { evidence: input.evidence.trim() } : {}),
      columns: [...result.columns],
      rowCount: result.rowCount,
      truncated: result.truncated,
      origin: input.origin ?? "added",
      ...(input.answerId !== undefined ? { answerId: input.answerId } : {}),
      createdAt: new Date().toISOString(),
    };
    const examples = previous ? shelf.examples.map((e) => (e === previous ? example : e)) : [...shelf.examples, example];
    this.save(target.id, examples);
    return { example: { ...example, columns: [...example.columns] }, created: !previous };
  }

  /** Deletes example `id`: EXAMPLE_NOT_FOUND when `owner` does not see it, FORBIDDEN for a shared one and a caller with an owner. */
  remove(database: string, id: string, owner?: string): void {
    const example = this.get(database, id, owner);
    if (owner !== undefined && example.owner !== owner) throw new ReexError("FORBIDDEN", `example "${id}" is shared and cannot be deleted with this key`);
    this.save(
      database,
      this.shelf(database).examples.filter((e) => e.id !== id),
    );
  }

  /** Forgets every example of `database` (its upload was deleted). */
  removeDatabase(database: string): void {
    this.shelves.delete(database);
    rmSync(this.file(database), { force: true });
  }

  /** The `k` examples of `database` that `owner` sees whose questions are most like `question` (BM25 > 0), best first. */
  nearest(database: string, owner: string | undefined, question: string, k: number): ScoredExample[] {
    const pool = this.shelf(database).examples.filter((e) => visible(e, owner));
    return rankExamples(
      question,
      pool,
      k,
      (e) => this.tokensOf(e),
      (a, b) => a.createdAt.localeCompare(b.createdAt),
    ).map((e) => ({
      ...e,
      columns: [...e.columns],
    }));
  }

  private tokensOf(example: VerifiedExample): string[] {
    const key = `${example.id}\0${example.question}`;
    let tokens = this.tokens.get(key);
    if (!tokens) {
      tokens = relevanceTokens(example.question);
      this.tokens.set(key, tokens);
      if (this.tokens.size > 100_000) this.tokens.delete(this.tokens.keys().next().value!);
    }
    return tokens;
  }

  private file(database: string): string {
    if (!SAFE_ID.test(database)) throw new ReexError("BAD_REQUEST", `"${database}" is not a database id`);
    return join(this.dir, `${database}.json`);
  }

  /** The examples of `database`, read again when the file changed since the last read. */
  private shelf(database: string): Shelf {
    const file = this.file(database);
    const st = statSync(file, { throwIfNoEntry: false });
    const stamp = st ? `${st.mtimeMs}:${st.size}` : "none";
    const cached = this.shelves.get(database);
    if (cached && cached.stamp === stamp) return cached;
    const shelf: Shelf = { stamp, examples: st ? readShelf(file) : [] };
    this.shelves.set(database, shelf);
    return shelf;
  }

  private save(database: string, examples: VerifiedExample[]): void {
    const file = this.file(database);
    mkdirSync(this.dir, { recursive: true });
    writeAtomic(file, `${JSON.stringify({ version: FILE_VERSION, examples }, null, 2)}\n`);
    const st = statSync(file);
    this.shelves.set(database, { stamp: `${st.mtimeMs}:${st.size}`, examples });
  }
}

function isExample(value: unknown): value is VerifiedExample {
  const e = value as VerifiedExample;
  return (
    typeof e === "object" &&
    e !== null &&
    typeof e.id === "string" &&
    typeof e.question === "string" &&
    typeof e.sql === "string" &&
    Array.isArray(e.columns) &&
    typeof e.rowCount === "number" &&
    (e.owner === undefined || typeof e.owner === "string")
  );
}

/** The examples in `file`; an unreadable file is moved aside (`.invalid-<time>`) and read as none, as the registry does. */
function readShelf(file: string): VerifiedExample[] {
  try {
    const list = (JSON.parse(readFileSync(file, "utf8")) as { examples?: unknown }).examples;
    if (Array.isArray(list)) return list.filter(isExample);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
  }
  renameSync(file, `${file}.invalid-${Date.now()}`);
  return [];
}

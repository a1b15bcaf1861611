import type { Rng } from "./prng.js";

/** Difficulty labels of the BIRD benchmark. */
export type Difficulty = "simple" | "moderate" | "challenging";

/** One question in BIRD's dev.json layout. */
export interface BirdQuestion {
  question_id: number;
  db_id: string;
  question: string;
  evidence: string;
  SQL: string;
  difficulty: Difficulty;
}

/** A question as a generator defines it; `naive` is the SQL a model would write without probing the data. */
export interface ExampleQuestion {
  question: string;
  evidence: string;
  SQL: string;
  difficulty: Difficulty;
  /** A plausible guess at the value encoding (e.g. country = 'United Kingdom') that gives a different result than the gold SQL; absent when the question hides no encoding. */
  naive?: string;
}

/** A cell as the generators write it. */
export type Cell = string | number | null;

/** Rows for one table, inserted in order; columns are the keys of the first row. */
export interface TableRows {
  table: string;
  rows: Record<string, Cell>[];
}

/** One example database: its schema, a deterministic data generator, its questions and the quirks it documents. */
export interface ExampleDatabase {
  dbId: string;
  /** CREATE TABLE / CREATE INDEX statements, foreign keys included. */
  ddl: string;
  /** Rows of every table, parents before children, drawn only from `rng`. */
  generate(rng: Rng): TableRows[];
  questions: ExampleQuestion[];
}

/** A built example database: where it lies and its questions (BIRD layout). */
export interface ExampleSet {
  dbId: string;
  path: string;
  questions: BirdQuestion[];
}

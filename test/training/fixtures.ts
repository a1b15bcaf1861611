/** A small real SQLite database for the training tests, written into a fresh temp folder. */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

export interface TrainingFixture {
  dir: string;
  /** BIRD root: `<dbRoot>/concerts/concerts.sqlite`. */
  dbRoot: string;
  dbPath: string;
  /** BIRD-layout questions over the database. */
  datasetFile: string;
}

/** Gold SQL of the main test question: the French singers (Ann, Bob, Dee). */
export const GOLD = "SELECT name FROM singer WHERE country = 'France'";

export const QUESTIONS = [
  {
    question_id: 1,
    db_id: "concerts",
    question: "Names of the singers from France?",
    evidence: "France refers to country = 'France'",
    SQL: GOLD,
    difficulty: "simple",
  },
  { question_id: 2, db_id: "concerts", question: "How many singers are there?", evidence: "", SQL: "SELECT COUNT(*) FROM singer", difficulty: "simple" },
  {
    question_id: 3,
    db_id: "concerts",
    question: "Names of concerts in 2015?",
    evidence: "",
    SQL: "SELECT concert_name FROM concert WHERE year = 2015",
    difficulty: "simple",
  },
];

/** Writes the concerts database (BIRD layout) and a questions file. */
export function makeTrainingFixture(): TrainingFixture {
  const dir = mkdtempSync(join(tmpdir(), "reex-train-"));
  const dbRoot = join(dir, "databases");
  mkdirSync(join(dbRoot, "concerts"), { recursive: true });
  const dbPath = join(dbRoot, "concerts", "concerts.sqlite");
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, year INTEGER, singer_id INTEGER REFERENCES singer(singer_id));
    INSERT INTO singer VALUES (1, 'Ann', 'France', 31), (2, 'Bob', 'France', 42), (3, 'Cid', 'Spain', 19), (4, 'Dee', 'France', 55), (5, 'Eve', 'Italy', 23);
    INSERT INTO concert VALUES (1, 'Summer', 2014, 1), (2, 'Winter', 2015, 2), (3, 'Spring', 2015, 1);
  `);
  db.close();
  const datasetFile = join(dir, "train.json");
  writeFileSync(datasetFile, JSON.stringify(QUESTIONS, null, 2));
  return { dir, dbRoot, dbPath, datasetFile };
}

/** An execution-aware response: one probe per entry of `probes` (results injected as the server would), then `final`. */
export function response(probes: string[], final: string): string {
  const parts = ["<think>Let me look at the data.</think>\n"];
  for (const p of probes) parts.push(`<intermediate_sql>${p}</intermediate_sql><result>\n(rows)\n</result>\n<think>checked</think>\n`);
  parts.push(`<final_sql>${final}</final_sql>`);
  return parts.join("");
}

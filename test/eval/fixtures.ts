/** Hand-made SQLite databases and datasets for the evaluation tests, written into a fresh temp dir. */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

export interface Fixture {
  dir: string;
  /** BIRD root: `<dbRoot>/<db_id>/<db_id>.sqlite`. */
  dbRoot: string;
  /** Spider-style flat root: `<flatRoot>/<db_id>.sqlite`. */
  flatRoot: string;
  birdFile: string;
  spiderFile: string;
}

/** The BIRD-layout questions; see PREDICTIONS for the hand-scored answers. */
export const BIRD_QUESTIONS = [
  { question_id: 100, db_id: "shop", question: "How many products are there?", evidence: "", SQL: "SELECT COUNT(*) FROM products", difficulty: "simple" },
  {
    question_id: 101,
    db_id: "shop",
    question: "Names of fruit from cheapest to dearest.",
    evidence: "fruit refers to category = 'fruit'",
    SQL: "SELECT name FROM products WHERE category = 'fruit' ORDER BY price",
    difficulty: "simple",
  },
  {
    question_id: 102,
    db_id: "shop",
    question: "Which product is the most expensive?",
    evidence: "",
    SQL: "SELECT name FROM products ORDER BY price DESC LIMIT 1",
    difficulty: "moderate",
  },
  {
    question_id: 103,
    db_id: "shop",
    question: "How many products per category?",
    evidence: "",
    SQL: "SELECT category, COUNT(*) FROM products GROUP BY category",
    difficulty: "moderate",
  },
  {
    question_id: 104,
    db_id: "shop",
    question: "Names and prices of bakery products.",
    evidence: "",
    SQL: "SELECT name, price FROM products WHERE category = 'bakery'",
    difficulty: "challenging",
  },
  {
    question_id: 105,
    db_id: "zoo",
    question: "How many animals have four legs?",
    evidence: "",
    SQL: "SELECT COUNT(*) FROM animals WHERE legs = 4",
    difficulty: "simple",
  },
];

/**
 * One prediction per question, with the verdicts worked out by hand:
 * 0 right everywhere; 1 reversed order (gold has ORDER BY): bird ✔ spider ✘ refined ✔;
 * 2 wrong product: ✘ everywhere; 3 columns swapped: bird ✘ spider ✔ refined ✔;
 * 4 a duplicated row: bird ✔ spider ✘ refined ✘; 5 syntax error.
 */
export const PREDICTIONS = [
  "SELECT COUNT(id) FROM products",
  "SELECT name FROM products WHERE category = 'fruit' ORDER BY price DESC",
  "SELECT name FROM products ORDER BY price ASC LIMIT 1",
  "SELECT COUNT(*), category FROM products GROUP BY category",
  "SELECT name, price FROM products WHERE category = 'bakery' UNION ALL SELECT name, price FROM products WHERE name = 'donut'",
  "SELECT COUNT(* FROM animals",
];

function writeShop(path: string): void {
  const db = new Database(path);
  db.exec(`CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL, category TEXT);
    INSERT INTO products VALUES (1,'apple',1.5,'fruit'),(2,'banana',0.5,'fruit'),(3,'carrot',0.8,'veg'),(4,'donut',2.0,'bakery'),(5,'eclair',3.0,'bakery');`);
  db.close();
}

function writeZoo(path: string): void {
  const db = new Database(path);
  db.exec(`CREATE TABLE animals (id INTEGER PRIMARY KEY, name TEXT, species TEXT, legs INTEGER);
    INSERT INTO animals VALUES (1,'rex','dog',4),(2,'tweety','bird',2),(3,'tom','cat',4),(4,'nemo','fish',0);`);
  db.close();
}

/** Writes both databases in BIRD and flat layouts, a BIRD questions file and a Spider dev-style file. */
export function makeFixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), "reex-eval-"));
  const dbRoot = join(dir, "databases");
  const flatRoot = join(dir, "flat");
  for (const [id, write] of [
    ["shop", writeShop],
    ["zoo", writeZoo],
  ] as const) {
    mkdirSync(join(dbRoot, id), { recursive: true });
    write(join(dbRoot, id, `${id}.sqlite`));
    mkdirSync(flatRoot, { recursive: true });
    write(join(flatRoot, `${id}.sqlite`));
  }
  const birdFile = join(dir, "dev.json");
  writeFileSync(birdFile, JSON.stringify(BIRD_QUESTIONS, null, 2));
  const spiderFile = join(dir, "spider_dev.json");
  writeFileSync(
    spiderFile,
    JSON.stringify(
      BIRD_QUESTIONS.map((q) => ({
        db_id: q.db_id,
        query: q.SQL,
        query_toks: q.SQL.split(" "),
        question: q.question,
        question_toks: q.question.split(" "),
        sql: {},
      })),
      null,
      2,
    ),
  );
  return { dir, dbRoot, flatRoot, birdFile, spiderFile };
}

/** Writes a JSON file into the fixture dir and returns its path. */
export function writeJson(fixture: Fixture, name: string, data: unknown): string {
  const path = join(fixture.dir, name);
  writeFileSync(path, typeof data === "string" ? data : JSON.stringify(data));
  return path;
}

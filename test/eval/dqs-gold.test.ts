/**
 * Spider writes string literals in double quotes (`WHERE T2.Name  =  "Aruba"`), as stock SQLite
 * allows: gold SQL in that style must run, score 100% against itself, and reward a correct answer.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run } from "../../src/cli/eval.js";
import { loadDataset, selfCheck } from "../../src/eval/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { gatherFacts } from "../../src/training/index.js";

/** Spider-style gold (double-quoted strings, Spider's spacing), each with a standard single-quoted twin. */
const GOLD: [dbId: string, question: string, gold: string, singleQuoted: string][] = [
  [
    "world_1",
    "What language is predominantly spoken in Aruba?",
    `SELECT T2.Language FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T1.Name  =  "Aruba" ORDER BY Percentage DESC LIMIT 1`,
    `SELECT T2.Language FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE T1.Name = 'Aruba' ORDER BY Percentage DESC LIMIT 1`,
  ],
  [
    "world_1",
    "How many countries are in Asia?",
    `SELECT count(*) FROM country WHERE continent  =  "Asia"`,
    `SELECT count(*) FROM country WHERE continent = 'Asia'`,
  ],
  [
    "world_1",
    "Which countries speak both English and Dutch?",
    `SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  "English" INTERSECT SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code  =  T2.CountryCode WHERE T2.Language  =  "Dutch"`,
    `SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE T2.Language = 'English' INTERSECT SELECT T1.Name FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE T2.Language = 'Dutch'`,
  ],
  [
    "concert_singer",
    "What are the names of singers from France, oldest first?",
    `SELECT name FROM singer WHERE country  =  "France" ORDER BY age DESC`,
    `SELECT name FROM singer WHERE country = 'France' ORDER BY age DESC`,
  ],
  [
    "concert_singer",
    "How many concerts took place in 2014 or 2015?",
    `SELECT count(*) FROM concert WHERE YEAR  =  2014 OR YEAR  =  2015`,
    `SELECT count(*) FROM concert WHERE YEAR = 2014 OR YEAR = 2015`,
  ],
];

let dir: string;
let root: string;
let datasetFile: string;

function writeDb(path: string, sql: string): void {
  const db = new Database(path);
  db.exec(sql);
  db.close();
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-dqs-gold-"));
  root = join(dir, "database");
  mkdirSync(join(root, "world_1"), { recursive: true });
  mkdirSync(join(root, "concert_singer"), { recursive: true });
  writeDb(
    join(root, "world_1", "world_1.sqlite"),
    `CREATE TABLE country (Code TEXT PRIMARY KEY, Name TEXT, Continent TEXT);
     CREATE TABLE countrylanguage (CountryCode TEXT, Language TEXT, IsOfficial TEXT, Percentage REAL);
     INSERT INTO country VALUES ('ABW','Aruba','North America'), ('NLD','Netherlands','Europe'), ('JPN','Japan','Asia'), ('NPL','Nepal','Asia');
     INSERT INTO countrylanguage VALUES ('ABW','Papiamento','F',76.7), ('ABW','Dutch','T',5.3), ('ABW','English','F',9.5),
       ('NLD','Dutch','T',95.6), ('JPN','Japanese','T',99.1), ('NPL','Nepali','T',50.4);`,
  );
  writeDb(
    join(root, "concert_singer", "concert_singer.sqlite"),
    `CREATE TABLE singer (Singer_ID INTEGER PRIMARY KEY, Name TEXT, Country TEXT, Age INTEGER);
     CREATE TABLE concert (concert_ID INTEGER PRIMARY KEY, concert_Name TEXT, Year TEXT);
     INSERT INTO singer VALUES (1,'Joe Sharp','Netherlands',52), (2,'Timbaland','United States',32), (3,'Justin Brown','France',29), (4,'Rose White','France',41);
     INSERT INTO concert VALUES (1,'Auditions','2014'), (2,'Super bootcamp','2014'), (3,'Home Visits','2015'), (4,'Week 1','2016');`,
  );
  datasetFile = join(dir, "dev.json");
  writeFileSync(datasetFile, JSON.stringify(GOLD.map(([db_id, question, query]) => ({ db_id, question, query }))));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

describe("Spider gold SQL with double-quoted strings", () => {
  it("passes the gold-vs-gold self-check, each gold returning the rows its string selects", async () => {
    const { items } = loadDataset(datasetFile, { dbRoot: root });
    const pool = new ExecutorPool({ workers: 1 });
    try {
      const check = await selfCheck(items, { executor: pool });
      expect(check.failures).toEqual([]);
      expect(check).toMatchObject({ ok: true, checked: GOLD.length });
      const rows = items.map((item) => {
        const gold = check.goldResults.get(item.index);
        return gold?.ok ? gold.rows : gold?.error.message;
      });
      expect(rows).toEqual([[["Papiamento"]], [[2]], [["Aruba"]], [["Rose White"], ["Justin Brown"]], [[3]]]);
    } finally {
      await pool.close();
    }
  });

  it("scores 100% under every EX rule in `reex eval` when predictions write the same strings in single quotes", async () => {
    const preds = join(dir, "predictions.sql");
    writeFileSync(preds, GOLD.map(([, , , single]) => single).join("\n") + "\n");
    const outDir = join(dir, "out");
    const err: string[] = [];
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const code = await run(["--dataset", datasetFile, "--db-root", root, "--predictions", preds, "--out", outDir, "--quiet"]);
    expect(code, err.join("\n")).toBe(0);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.selfCheck).toMatchObject({ ok: true, checked: GOLD.length, failures: [] });
    expect(report.runs[0].summary.ex).toEqual({ bird: 1, spider: 1, refined: 1 });
  });

  it("rewards a correct final answer against double-quoted gold, and a double-quoted final against single-quoted gold", async () => {
    const pool = new ExecutorPool({ workers: 1 });
    try {
      const [, , gold, single] = GOLD[0]!;
      const dbPath = join(root, "world_1", "world_1.sqlite");
      const a = await gatherFacts({ response: "", finalSql: single, goldSql: gold, dbPath }, { executor: pool });
      const b = await gatherFacts({ response: "", finalSql: gold, goldSql: single, dbPath }, { executor: pool });
      for (const facts of [a, b]) {
        expect(facts.goldResult).toMatchObject({ ok: true, rows: [["Papiamento"]] });
        expect(facts).toMatchObject({ executable: true, correct: true });
      }
    } finally {
      await pool.close();
    }
  });
});

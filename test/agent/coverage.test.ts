/** `repairCoverage`: what the question names and the final SQL leaves out is put in, on a real SQLite file. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SchemaNames } from "../../src/agent/index.js";
import { repairCoverage, rowsAsked, type NamedValue, type ReadRows } from "../../src/agent/testing.js";
import type { SqlValue } from "../../src/sql/index.js";

const schema: SchemaNames = {
  tables: [
    { name: "customers", columns: ["customer_id", "first_name", "country", "tier"] },
    { name: "orders", columns: ["order_id", "customer_id", "ship_country", "status", "order_date"] },
    { name: "visits", columns: ["visit_id", "visit_type", "visit_date", "duration"] },
    { name: "awards", columns: ["award_id", "award", "result", "year"] },
    { name: "city", columns: ["city_id", "hanzi", "hanyu_pinyin"] },
    { name: "games", columns: ["game_id", "home_team", "ground", "crowd"] },
  ],
};

let dir: string;
let db: Database.Database;
const read: ReadRows = async (sql) => {
  try {
    return db.prepare(sql).raw().all() as SqlValue[][];
  } catch {
    return undefined;
  }
};
const rows = (sql: string): unknown[] => db.prepare(sql).raw().all();

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-coverage-"));
  const path = join(dir, "db.sqlite");
  const setup = new Database(path);
  setup.exec(`
    CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, first_name TEXT, country TEXT, tier TEXT);
    INSERT INTO customers VALUES (1, 'Ana', 'AU', 'G'), (2, 'Ben', 'AU', 'S'), (3, 'Cy', 'GB', 'G'), (4, 'Di', 'GB', 'G'), (5, 'Ed', 'AU', 'G');
    CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, ship_country TEXT, status TEXT, order_date TEXT);
    INSERT INTO orders VALUES (1, 1, 'AU', 'SHP', '2022-03-01'), (2, 3, 'GB', 'SHP', '2023-05-02'), (3, 5, 'AU', 'CNC', '2023-07-09');
    CREATE TABLE visits (visit_id INTEGER PRIMARY KEY, visit_type TEXT, visit_date TEXT, duration INTEGER);
    INSERT INTO visits VALUES (1, 'TEL', '2022-01-04', 600), (2, 'TEL', '2023-02-11', 900), (3, 'ER', '2022-05-20', 3600), (4, 'TEL', '2022-08-30', 1200), (5, 'ER', '2020-03-03', 300);
    CREATE TABLE awards (award_id INTEGER PRIMARY KEY, award TEXT, result TEXT, year INTEGER);
    INSERT INTO awards VALUES (1, 'Best Film', 'won', 2000), (2, 'Best Score', 'nominated', 2000);
    CREATE TABLE city (city_id INTEGER PRIMARY KEY, hanzi TEXT, hanyu_pinyin TEXT);
    INSERT INTO city VALUES (1, 'JUNIOR', 'JUN'), (2, 'SENIOR', 'SEN');
  `);
  setup.close();
  db = new Database(path, { readonly: true });
});

afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const named = (table: string, column: string, value: string, score = 1): NamedValue => ({ table, column, value, score });

describe("repairCoverage: a value the question names that the query never compares", () => {
  it("adds the one exactly named value of a column the query leaves out, and the count changes", async () => {
    const sql = "SELECT COUNT(*) FROM customers WHERE tier = 'G'";
    const r = await repairCoverage(sql, schema, read, {
      named: [named("customers", "country", "AU"), named("orders", "ship_country", "AU"), named("customers", "tier", "G", 0.9)],
    });
    expect(r).toEqual({
      sql: "SELECT COUNT(*) FROM customers WHERE tier = 'G' AND country = 'AU'",
      fixes: [{ rule: "condition", from: "", to: "country = 'AU'" }],
    });
    expect(rows(sql)).toEqual([[4]]);
    expect(rows(r!.sql)).toEqual([[2]]);
  });

  it("qualifies the condition through the table's alias and puts it before ORDER BY and LIMIT", async () => {
    const sql =
      "SELECT T1.first_name FROM customers AS T1 INNER JOIN orders AS T2 ON T1.customer_id = T2.customer_id WHERE T2.status = 'SHP' ORDER BY T2.order_date DESC LIMIT 1";
    const r = await repairCoverage(sql, schema, read, { named: [named("orders", "ship_country", "GB")] });
    expect(r?.sql).toBe(
      "SELECT T1.first_name FROM customers AS T1 INNER JOIN orders AS T2 ON T1.customer_id = T2.customer_id WHERE T2.status = 'SHP' AND T2.ship_country = 'GB' ORDER BY T2.order_date DESC LIMIT 1",
    );
    expect(rows(r!.sql)).toEqual([["Cy"]]);
  });

  it("opens a WHERE clause when the query has none, before its `;`", async () => {
    const r = await repairCoverage("SELECT COUNT(*) FROM customers;", schema, read, { named: [named("customers", "tier", "S")] });
    expect(r?.sql).toBe("SELECT COUNT(*) FROM customers WHERE tier = 'S';");
  });

  it("leaves the query alone when the value is only a near match, names a column already read, or the table is not in the query", async () => {
    expect(
      await repairCoverage("SELECT COUNT(*) FROM customers WHERE tier = 'G'", schema, read, { named: [named("customers", "country", "AU", 0.9)] }),
    ).toBeUndefined();
    expect(
      await repairCoverage("SELECT COUNT(*) FROM customers WHERE country = 'GB'", schema, read, { named: [named("customers", "country", "AU")] }),
    ).toBeUndefined();
    // a quoted column name is the same column
    expect(
      await repairCoverage(`SELECT COUNT(*) FROM customers WHERE "country" = 'GB'`, schema, read, { named: [named("customers", "country", "AU")] }),
    ).toBeUndefined();
    expect(
      await repairCoverage("SELECT COUNT(*) FROM customers WHERE tier = 'G'", schema, read, { named: [named("orders", "ship_country", "AU")] }),
    ).toBeUndefined();
  });

  it("takes a value that begins like a string the query compares for the same words of the question", async () => {
    // "junior" gave both the code the model used and the other column's spelled-out value
    expect(
      await repairCoverage("SELECT COUNT(*) FROM city WHERE hanyu_pinyin = 'JUN'", schema, read, { named: [named("city", "hanzi", "JUNIOR")] }),
    ).toBeUndefined();
  });

  it("adds nothing when two values are left, or the value is a column's name, or the query groups or has a top-level OR", async () => {
    const two = [named("customers", "country", "AU"), named("customers", "first_name", "Ana")];
    expect(await repairCoverage("SELECT COUNT(*) FROM customers WHERE tier = 'G'", schema, read, { named: two })).toBeUndefined();
    expect(await repairCoverage("SELECT award FROM awards WHERE year = 2000", schema, read, { named: [named("awards", "result", "year")] })).toBeUndefined();
    expect(
      await repairCoverage("SELECT tier, COUNT(*) FROM customers GROUP BY tier", schema, read, { named: [named("customers", "country", "AU")] }),
    ).toBeUndefined();
    expect(
      await repairCoverage("SELECT COUNT(*) FROM customers WHERE tier = 'G' OR tier = 'S'", schema, read, { named: [named("customers", "country", "AU")] }),
    ).toBeUndefined();
  });

  it("takes a value spelt like words of a column the query reads for those words of the question", async () => {
    // "the west coast home team": 'home' is a ground, but here it is the home of home_team
    const sql = "SELECT MIN(crowd) FROM games WHERE home_team = 'west coast'";
    expect(await repairCoverage(sql, schema, read, { named: [named("games", "ground", "home")] })).toBeUndefined();
    expect((await repairCoverage(sql, schema, read, { named: [named("games", "ground", "subiaco")] }))?.sql).toBe(`${sql} AND ground = 'subiaco'`);
  });

  it("leaves a table read twice alone: which of its two readings the value belongs to is unknown", async () => {
    const sql = "SELECT COUNT(*) FROM customers AS T1 INNER JOIN customers AS T2 ON T1.customer_id = T2.customer_id WHERE T2.tier = 'G'";
    expect(await repairCoverage(sql, schema, read, { named: [named("customers", "country", "AU")] })).toBeUndefined();
  });
});

describe("repairCoverage: a year the question names", () => {
  it("adds the year on the one date column of the query's tables, in the column's format", async () => {
    const sql = "SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL'";
    const r = await repairCoverage(sql, schema, read, { question: "How many telehealth visits took place in 2022?" });
    expect(r).toEqual({
      sql: "SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL' AND visit_date LIKE '2022%'",
      fixes: [{ rule: "year", from: "", to: "visit_date LIKE '2022%'" }],
    });
    expect(rows(r!.sql)).toEqual([[2]]);
  });

  it("leaves the query alone when it writes the year, when a column is named for years, or when no row falls in it", async () => {
    expect(
      await repairCoverage("SELECT COUNT(*) FROM visits WHERE visit_date LIKE '2022-%'", schema, read, { question: "How many visits in 2022?" }),
    ).toBeUndefined();
    expect(await repairCoverage("SELECT award FROM awards WHERE result = 'won'", schema, read, { question: "Which award was won in 2000?" })).toBeUndefined();
    expect(await repairCoverage("SELECT COUNT(*) FROM visits", schema, read, { question: "How many visits took place in 1999?" })).toBeUndefined();
  });

  it("does not read a decade or a year the question does not place anything in", async () => {
    // a row of 2020 exists, so only the reading of "2020s" as a decade keeps the query as it is
    expect(await repairCoverage("SELECT COUNT(*) FROM visits", schema, read, { question: "How many visits in the 2020s?" })).toBeUndefined();
    expect(await repairCoverage("SELECT COUNT(*) FROM visits", schema, read, { question: "How many visits lasted 2022 seconds?" })).toBeUndefined();
  });
});

describe("repairCoverage: the number of rows the question asks for", () => {
  it("reads the count the question asks for, and not a count of what is compared", () => {
    expect(rowsAsked("List the names of the five most expensive products.")).toBe(5);
    expect(rowsAsked("Which are the top 3 artists?")).toBe(3);
    expect(rowsAsked("What are the names of the four tracks with the highest year opened?")).toBe(4);
    expect(rowsAsked("Which of the two teams has the most wins?")).toBeUndefined();
    expect(rowsAsked("Which product is the most expensive?")).toBeUndefined();
  });

  it("replaces an ordered query's LIMIT with the count, and leaves an unordered one", async () => {
    const question = "Give the first names of the three customers with the highest id.";
    const r = await repairCoverage("SELECT first_name FROM customers ORDER BY customer_id DESC LIMIT 1", schema, read, { question });
    expect(r).toEqual({
      sql: "SELECT first_name FROM customers ORDER BY customer_id DESC LIMIT 3",
      fixes: [{ rule: "limit", from: "LIMIT 1", to: "LIMIT 3" }],
    });
    expect(rows(r!.sql)).toEqual([["Ed"], ["Di"], ["Cy"]]);
    expect(await repairCoverage("SELECT first_name FROM customers LIMIT 1", schema, read, { question })).toBeUndefined();
    expect(await repairCoverage("SELECT first_name FROM customers ORDER BY customer_id DESC LIMIT 3", schema, read, { question })).toBeUndefined();
  });

  it("puts in a condition and a row count together, each reported", async () => {
    const r = await repairCoverage("SELECT first_name FROM customers WHERE tier = 'G' ORDER BY customer_id LIMIT 1", schema, read, {
      named: [named("customers", "country", "AU")],
      question: "Which are the two gold-tier customers in Australia with the lowest id?",
    });
    expect(r?.sql).toBe("SELECT first_name FROM customers WHERE tier = 'G' AND country = 'AU' ORDER BY customer_id LIMIT 2");
    expect(r?.fixes.map((f) => f.rule)).toEqual(["condition", "limit"]);
  });
});

describe("repairCoverage: comments and strings are never rewritten into", () => {
  const shipped = named("orders", "status", "SHP");

  it("puts a condition and a year before a trailing comment, where they take effect", async () => {
    const r = await repairCoverage("SELECT COUNT(*) FROM orders -- all orders", schema, read, {
      named: [shipped],
      question: "How many orders shipped in 2022?",
    });
    expect(r?.sql).toBe("SELECT COUNT(*) FROM orders WHERE status = 'SHP' AND order_date LIKE '2022%' -- all orders");
    expect(r?.fixes.map((f) => f.rule)).toEqual(["condition", "year"]);
    expect(rows(r!.sql)).toEqual([[1]]);
  });

  it("puts a condition before a comment that sits ahead of ORDER BY or after a `;`", async () => {
    const ordered = await repairCoverage("SELECT order_id FROM orders /* newest first */\nORDER BY order_date DESC", schema, read, { named: [shipped] });
    expect(ordered?.sql).toBe("SELECT order_id FROM orders WHERE status = 'SHP' /* newest first */\nORDER BY order_date DESC");
    expect(rows(ordered!.sql)).toEqual([[2], [1]]);
    const ended = await repairCoverage("SELECT COUNT(*) FROM orders; -- done", schema, read, { named: [shipped] });
    expect(ended?.sql).toBe("SELECT COUNT(*) FROM orders WHERE status = 'SHP'; -- done");
    expect(ended?.fixes).toHaveLength(1);
  });

  it("leaves a query whose words sit only in comments or strings as it was when the query itself is covered", async () => {
    const r = await repairCoverage("SELECT COUNT(*) FROM orders WHERE status = 'SHP' -- WHERE order_date", schema, read, { named: [shipped] });
    expect(r).toBeUndefined();
  });
});

describe("repairCoverage: what it must not put in", () => {
  it("adds no condition or year the question negates", async () => {
    const notIn = "SELECT COUNT(*) FROM customers WHERE tier = 'G'";
    expect(
      await repairCoverage(notIn, schema, read, {
        named: [named("customers", "country", "AU")],
        question: "How many gold-tier customers are not in Australia?",
      }),
    ).toBeUndefined();
    // the same value without the negation is put in
    expect(
      (await repairCoverage(notIn, schema, read, { named: [named("customers", "country", "AU")], question: "How many gold-tier customers are in Australia?" }))
        ?.fixes,
    ).toHaveLength(1);
    const visits = "SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL'";
    expect(await repairCoverage(visits, schema, read, { question: "How many telehealth visits did not take place in 2022?" })).toBeUndefined();
    expect(await repairCoverage(visits, schema, read, { question: "How many telehealth visits were there, other than those in 2022?" })).toBeUndefined();
    expect(await repairCoverage(visits, schema, read, { question: "How many telehealth visits weren't in 2022?" })).toBeUndefined();
    expect(
      await repairCoverage(notIn, schema, read, {
        named: [named("customers", "country", "AU")],
        question: "How many gold-tier customers live outside Australia?",
      }),
    ).toBeUndefined();
  });

  it("adds no year to a query that already compares a range", async () => {
    const sql = "SELECT COUNT(*) FROM visits WHERE visit_date >= '2022-06-01'";
    expect(await repairCoverage(sql, schema, read, { question: "How many visits took place in 2022 from June on?" })).toBeUndefined();
    expect(
      await repairCoverage("SELECT COUNT(*) FROM visits WHERE duration BETWEEN 600 AND 1200", schema, read, {
        question: "How many visits in 2022 lasted 10 to 20 minutes?",
      }),
    ).toBeUndefined();
  });

  it("keeps the LIMIT of a question that picks one of several", async () => {
    expect(rowsAsked("Of the five oldest customers, which one has the highest id?")).toBeUndefined();
    expect(rowsAsked("Among the three cheapest products, what is the most ordered one?")).toBeUndefined();
    expect(rowsAsked("List the names of the five most expensive products.")).toBe(5);
    const sql = "SELECT first_name FROM customers ORDER BY customer_id DESC LIMIT 1";
    expect(await repairCoverage(sql, schema, read, { question: "Of the five oldest customers, which has the highest id?" })).toBeUndefined();
  });
});

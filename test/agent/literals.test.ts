/** `repairLiterals`: a comparison whose string no row holds is rewritten to the column's date format or spelling, on a real SQLite file. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SchemaNames } from "../../src/agent/index.js";
import { repairLiterals, type ReadRows } from "../../src/agent/testing.js";
import type { SqlValue } from "../../src/sql/index.js";

const schema: SchemaNames = {
  tables: [
    { name: "race", columns: ["race_id", "track_id", "name", "date"] },
    { name: "track", columns: ["track_id", "name", "opened"] },
    { name: "meal", columns: ["meal_id", "feed_date", "kind"] },
    { name: "city", columns: ["city_id", "name", "level", "town"] },
    { name: "log", columns: ["log_id", "stamp"] },
    { name: "album", columns: ["album_id", "album_type", "released"] },
  ],
};

let dir: string;
let db: Database.Database;
let dbPath: string;
const reads: string[] = [];
const read: ReadRows = async (sql) => {
  reads.push(sql);
  try {
    return db.prepare(sql).raw().all() as SqlValue[][];
  } catch {
    return undefined;
  }
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-literals-"));
  dbPath = join(dir, "db.sqlite");
  const setup = new Database(dbPath);
  setup.exec(`
    CREATE TABLE race (race_id INTEGER PRIMARY KEY, track_id INTEGER, name TEXT, date TEXT);
    INSERT INTO race VALUES (1, 1, 'Winter Cup', '12/05/2008'), (2, 2, 'Spring Cup', '04/23/2009'), (3, 1, 'Autumn Cup', '10/30/1998'), (4, 2, 'Late Cup', '12/19/2015');
    CREATE TABLE track (track_id INTEGER PRIMARY KEY, name TEXT, opened TEXT);
    INSERT INTO track VALUES (1, 'Ring', '03/04/2001'), (2, 'Oval', '05/06/2011');
    CREATE TABLE meal (meal_id INTEGER PRIMARY KEY, feed_date TEXT, kind TEXT);
    INSERT INTO meal VALUES (1, '2022-10-03 08:00', 'hay'), (2, '2022-11-12 09:30', 'oats'), (3, '2013-01-20 07:15', 'hay');
    CREATE TABLE city (city_id INTEGER PRIMARY KEY, name TEXT, level TEXT, town TEXT);
    INSERT INTO city VALUES (1, 'Leeds', 'Junior', 'Leeds'), (2, 'York', 'Senior', 'LEEDS'), (3, 'Hull', 'Junior', 'York');
    CREATE TABLE log (log_id INTEGER PRIMARY KEY, stamp TEXT);
    INSERT INTO log VALUES (1, '01/02/2020'), (2, '03/04/2020');
    CREATE TABLE album (album_id INTEGER PRIMARY KEY, album_type TEXT, released TEXT);
    INSERT INTO album VALUES (1, 'ep', '2019-01-01'), (2, 'single', '2019-05-01');
  `);
  setup.close();
  db = new Database(dbPath, { readonly: true });
});

afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("repairLiterals: dates written in another format than the column's", () => {
  it("puts a month named in words into a month-first column's format, qualified through its alias", async () => {
    const sql = "SELECT DISTINCT T1.name FROM track AS T1 INNER JOIN race AS T2 ON T1.track_id = T2.track_id WHERE T2.date LIKE 'December 2008'";
    const r = await repairLiterals(sql, schema, read);
    expect(r).toEqual({
      sql: "SELECT DISTINCT T1.name FROM track AS T1 INNER JOIN race AS T2 ON T1.track_id = T2.track_id WHERE T2.date LIKE '12/%/2008'",
      fixes: [{ column: "race.date", from: "T2.date LIKE 'December 2008'", to: "T2.date LIKE '12/%/2008'", rule: "date-format" }],
    });
  });

  it("moves a year written first to the end, and turns = on a bare year into LIKE", async () => {
    expect((await repairLiterals("SELECT name FROM race WHERE date LIKE '1998/%'", schema, read))?.sql).toBe("SELECT name FROM race WHERE date LIKE '%/1998'");
    expect((await repairLiterals("SELECT COUNT(*) FROM race WHERE date = '2015'", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM race WHERE date LIKE '%/2015'",
    );
  });

  it("writes a month-first literal year-first for an ISO column whose values go on with a time", async () => {
    const r = await repairLiterals("SELECT COUNT(*) FROM meal WHERE feed_date LIKE '10/%/2022' AND kind = 'hay'", schema, read);
    expect(r?.sql).toBe("SELECT COUNT(*) FROM meal WHERE feed_date LIKE '2022-10-%' AND kind = 'hay'");
    expect(r?.fixes).toHaveLength(1);
    expect((await repairLiterals("SELECT COUNT(*) FROM meal WHERE feed_date = '2022-10-03'", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM meal WHERE feed_date LIKE '2022-10-03%'",
    );
  });

  it("reads a decade ('2010s') as the decade's years", async () => {
    expect((await repairLiterals("SELECT COUNT(*) FROM meal WHERE feed_date LIKE '2010s'", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM meal WHERE feed_date LIKE '201%'",
    );
    expect((await repairLiterals("SELECT name FROM race WHERE date LIKE '2010s'", schema, read))?.sql).toBe("SELECT name FROM race WHERE date LIKE '%/201_'");
  });

  it("leaves a date alone when no row has it in the column's format either: an empty answer may be the answer", async () => {
    expect(await repairLiterals("SELECT name FROM race WHERE date LIKE '2017/%/%'", schema, read)).toBeUndefined();
  });

  it("does not guess the month's place when the column's values never show whether month or day comes first", async () => {
    // every stamp has both fields at most 12: 01/02/2020 may be 1 February or 2 January
    expect(await repairLiterals("SELECT COUNT(*) FROM log WHERE stamp LIKE '2020-01-%'", schema, read)).toBeUndefined();
    expect((await repairLiterals("SELECT COUNT(*) FROM log WHERE stamp LIKE '2020-%'", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM log WHERE stamp LIKE '%/2020'",
    );
  });

  it("never treats a year in a column that holds no dates as a date", async () => {
    expect(await repairLiterals("SELECT COUNT(*) FROM album WHERE album_type = '2019'", schema, read)).toBeUndefined();
  });
});

describe("repairLiterals: strings in another case or spacing", () => {
  it("rewrites a string to the one value that equals it but for case and spaces", async () => {
    const r = await repairLiterals("SELECT COUNT(*) FROM city WHERE level = ' JUNIOR'", schema, read);
    expect(r).toEqual({
      sql: "SELECT COUNT(*) FROM city WHERE level = 'Junior'",
      fixes: [{ column: "city.level", from: "level = ' JUNIOR'", to: "level = 'Junior'", rule: "case" }],
    });
  });

  it("widens a string the column holds in several spellings to all of them, whichever one was written", async () => {
    const r = await repairLiterals("SELECT COUNT(*) FROM city WHERE town = 'LEEDS'", schema, read);
    expect(r).toEqual({
      sql: "SELECT COUNT(*) FROM city WHERE LOWER(TRIM(town)) = 'leeds'",
      fixes: [{ column: "city.town", from: "town = 'LEEDS'", to: "LOWER(TRIM(town)) = 'leeds'", rule: "variants" }],
    });
    expect((await repairLiterals("SELECT COUNT(*) FROM city WHERE town = ' leeds '", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM city WHERE LOWER(TRIM(town)) = 'leeds'",
    );
  });

  it("leaves a string the column holds in one spelling, and a number compared as text", async () => {
    reads.length = 0;
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'Junior' AND town = 'York'", schema, read)).toBeUndefined();
    expect(reads).toHaveLength(2);
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE city_id = '2'", schema, read)).toBeUndefined();
  });

  it("skips a column it cannot place in one table, and a string inside a larger expression", async () => {
    // name is in both FROM tables and unqualified
    expect(await repairLiterals("SELECT COUNT(*) FROM race, track WHERE name = 'RING'", schema, read)).toBeUndefined();
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE 'x' || level = 'xJUNIOR'", schema, read)).toBeUndefined();
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'JUNIOR' || ''", schema, read)).toBeUndefined();
  });

  it("places a column through a schema-qualified table and through a table listed after a join's ON condition", async () => {
    expect((await repairLiterals("SELECT COUNT(*) FROM main.city WHERE level = 'JUNIOR'", schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM main.city WHERE level = 'Junior'",
    );
    const sql = "SELECT COUNT(*) FROM track JOIN race ON track.track_id = race.track_id, city WHERE city.level = 'JUNIOR'";
    expect((await repairLiterals(sql, schema, read))?.sql).toBe(
      "SELECT COUNT(*) FROM track JOIN race ON track.track_id = race.track_id, city WHERE city.level = 'Junior'",
    );
  });

  it("does not take a WITH query named like a table for the table", async () => {
    expect(
      await repairLiterals("WITH city AS (SELECT name AS level FROM track) SELECT COUNT(*) FROM city WHERE level = 'JUNIOR'", schema, read),
    ).toBeUndefined();
  });

  it("only reads the database", async () => {
    const before = readFileSync(dbPath);
    await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'JUNIOR' AND name = 'it''s'", schema, read);
    expect(readFileSync(dbPath).equals(before)).toBe(true);
  });
});

describe("repairLiterals: a string no row holds, where the question names one value of the column", () => {
  const named = (value: string, score = 1, column = "level") => ({ table: "city", column, value, score });

  it("puts the named value in its place", async () => {
    const r = await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'the level'", schema, read, [named("Senior"), named("Hull", 1, "name")]);
    expect(r).toEqual({
      sql: "SELECT COUNT(*) FROM city WHERE level = 'Senior'",
      fixes: [{ column: "city.level", from: "level = 'the level'", to: "level = 'Senior'", rule: "named" }],
    });
    expect((await repairLiterals("SELECT COUNT(*) FROM city WHERE level LIKE 'SENIOR LEVEL'", schema, read, [named("Senior")]))?.sql).toBe(
      "SELECT COUNT(*) FROM city WHERE level = 'Senior'",
    );
  });

  it("leaves it when the match is unsure, names two values, names a value no row holds, or the literal is a pattern or held", async () => {
    const sql = "SELECT COUNT(*) FROM city WHERE level = 'the level'";
    expect(await repairLiterals(sql, schema, read, [named("Senior", 0.6)])).toBeUndefined();
    expect(await repairLiterals(sql, schema, read, [named("Senior"), named("Junior")])).toBeUndefined();
    expect(await repairLiterals(sql, schema, read, [named("Retired")])).toBeUndefined();
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level LIKE '%lev%'", schema, read, [named("Senior")])).toBeUndefined();
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'Junior'", schema, read, [named("Senior")])).toBeUndefined();
  });
});

describe("repairLiterals: a string its column lacks and one other column of the table holds", () => {
  it("moves the comparison to that column, keeping the qualifier", async () => {
    const r = await repairLiterals("SELECT T1.town FROM city AS T1 WHERE T1.level = 'Hull'", schema, read);
    expect(r).toEqual({
      sql: "SELECT T1.town FROM city AS T1 WHERE T1.name = 'Hull'",
      fixes: [{ column: "city.level", from: "T1.level = 'Hull'", to: "T1.name = 'Hull'", rule: "column" }],
    });
  });

  it("leaves it when two other columns hold the string, or the question names a value of the compared column", async () => {
    // 'York' is both a name and a town
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'York'", schema, read)).toBeUndefined();
    const named = [{ table: "city", column: "level", value: "Retired", score: 1 }];
    expect(await repairLiterals("SELECT COUNT(*) FROM city WHERE level = 'Hull'", schema, read, named)).toBeUndefined();
  });
});

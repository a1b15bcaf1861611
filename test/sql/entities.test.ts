import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { extractEntities, loadSchema, type DatabaseSchema } from "../../src/sql/index.js";

let dir: string;
let schema: DatabaseSchema;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-entities-"));
  const path = join(dir, "concerts.sqlite");
  const db = new Database(path);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, stadium_id INTEGER, year TEXT);
    CREATE TABLE singer_in_concert (concert_id INTEGER, singer_id INTEGER);
    CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT, capacity INTEGER, "Home Team" TEXT);
  `);
  db.close();
  schema = loadSchema(path);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const entities = (sql: string) => extractEntities(sql, schema);

describe("extractEntities", () => {
  it("resolves table aliases with and without AS across joins", () => {
    const e = entities(
      "SELECT s.name, c.concert_name FROM singer AS s JOIN singer_in_concert sic ON s.singer_id = sic.singer_id JOIN concert c ON c.concert_id = sic.concert_id",
    );
    expect(e.tables).toEqual(["concert", "singer", "singer_in_concert"]);
    expect(e.columns).toEqual([
      "concert.concert_id",
      "concert.concert_name",
      "singer.name",
      "singer.singer_id",
      "singer_in_concert.concert_id",
      "singer_in_concert.singer_id",
    ]);
  });

  it("resolves unqualified columns against the tables in scope, counting every candidate when ambiguous", () => {
    expect(entities("SELECT name, age FROM singer WHERE country = 'France'").columns).toEqual(["singer.age", "singer.country", "singer.name"]);
    expect(entities("SELECT name FROM singer JOIN stadium ON 1 = 1").columns).toEqual(["singer.name", "stadium.name"]);
  });

  it("expands * over the FROM tables and t.* over one table, but not count(*)", () => {
    expect(entities("SELECT * FROM stadium").columns).toEqual(["stadium.capacity", "stadium.home team", "stadium.name", "stadium.stadium_id"]);
    expect(entities("SELECT T1.* FROM singer T1 JOIN singer_in_concert T2 ON T1.singer_id = T2.singer_id").columns).toEqual([
      "singer.age",
      "singer.country",
      "singer.name",
      "singer.singer_id",
      "singer_in_concert.singer_id",
    ]);
    expect(entities("SELECT count(*) FROM singer").columns).toEqual([]);
    expect(entities("SELECT age * 2 FROM singer").columns).toEqual(["singer.age"]);
  });

  it("walks subqueries, resolving correlated columns in the outer scope", () => {
    const e = entities(
      "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert WHERE year = '2014') AND capacity > (SELECT avg(capacity) FROM stadium s2 WHERE s2.name <> stadium.name)",
    );
    expect(e.tables).toEqual(["concert", "stadium"]);
    expect(e.columns).toEqual(["concert.stadium_id", "concert.year", "stadium.capacity", "stadium.name", "stadium.stadium_id"]);
  });

  it("walks derived tables but maps columns read through their alias to nothing", () => {
    const e = entities("SELECT d.n FROM (SELECT count(*) AS n, stadium_id FROM concert GROUP BY stadium_id) AS d");
    expect(e.tables).toEqual(["concert"]);
    expect(e.columns).toEqual(["concert.stadium_id"]);
  });

  it("does not count CTE names as tables and walks CTE bodies", () => {
    const e = entities(
      "WITH big AS (SELECT stadium_id, name FROM stadium WHERE capacity > 50000) SELECT big.name, c.year FROM big JOIN concert c ON c.stadium_id = big.stadium_id",
    );
    expect(e.tables).toEqual(["concert", "stadium"]);
    expect(e.columns).toEqual(["concert.stadium_id", "concert.year", "stadium.capacity", "stadium.name", "stadium.stadium_id"]);
  });

  it("reads quoted identifiers in all three styles", () => {
    expect(entities('SELECT "Home Team", [name], `capacity` FROM "stadium"').columns).toEqual(["stadium.capacity", "stadium.home team", "stadium.name"]);
  });

  it("ignores string literals and double-quoted strings that look like identifiers", () => {
    const e = entities(`SELECT name FROM singer WHERE country = 'age' AND name = "concert_name" -- age`);
    expect(e.tables).toEqual(["singer"]);
    expect(e.columns).toEqual(["singer.country", "singer.name"]);
  });

  it("handles compound selects, USING joins, CAST and output aliases", () => {
    const e = entities("SELECT CAST(age AS TEXT) AS year FROM singer UNION SELECT year FROM concert JOIN singer_in_concert USING (concert_id) ORDER BY year");
    expect(e.tables).toEqual(["concert", "singer", "singer_in_concert"]);
    expect(e.columns).toEqual(["concert.concert_id", "concert.year", "singer.age", "singer_in_concert.concert_id"]);
  });

  it("is case-insensitive and drops names missing from the schema", () => {
    const e = entities("select S.NAME, s.salary from SINGER s join nowhere n on n.x = s.singer_id");
    expect(e.tables).toEqual(["singer"]);
    expect(e.columns).toEqual(["singer.name", "singer.singer_id"]);
  });
});

import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValueIndex, formatMatchedValues, valueIndexFile } from "../../src/sql/index.js";

let dir: string;
let world: string;
let indexDir: string;

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-values-"));
  indexDir = join(dir, "indexes");
  world = join(dir, "world.sqlite");
  const db = new Database(world);
  db.exec(`
    CREATE TABLE country (code TEXT PRIMARY KEY, name TEXT, continent TEXT, population INTEGER);
    CREATE TABLE person (id INTEGER PRIMARY KEY, full_name TEXT, country_code TEXT, phone TEXT, note TEXT, born REAL);
    INSERT INTO country VALUES ('GB', 'United Kingdom', 'Europe', 67000000), ('FR', 'France', 'Europe', 68000000),
      ('CI', 'Côte d''Ivoire', 'Africa', 27000000), ('US', 'United States', 'North America', 331000000);
  `);
  const insert = db.prepare("INSERT INTO person (full_name, country_code, phone, note, born) VALUES (?, ?, ?, ?, ?)");
  const first = ["Anna", "Boris", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Karin", "Lars"];
  const last = ["Smithers", "Smyth", "Schmidt", "Johansson", "Jones", "Jonsson", "Smart", "Smits", "Johns", "Jonker"];
  db.transaction(() => {
    for (const f of first) for (const l of last) insert.run(`${f} ${l}`, "GB", "555-0100", "x".repeat(150), 1980.5);
    insert.run("John Smith", "GB", "+44 20 7946 0958", "O'Brien's pub", 1975);
  })();
  db.close();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("ValueIndex", () => {
  it("finds a misspelled value among many similar ones", () => {
    const index = ValueIndex.open(world, { indexDir });
    try {
      expect(index.match("How many people named Jonh Smith are there?")[0]).toEqual({ table: "person", column: "full_name", value: "John Smith", score: 0.9 });
      const [uk] = index.match("Which people come from the Untied Kingdom?");
      expect(uk).toMatchObject({ table: "country", column: "name", value: "United Kingdom" });
      expect(uk!.score).toBeGreaterThan(0.9);
    } finally {
      index.close();
    }
  });

  it("ignores case and diacritics", () => {
    const index = ValueIndex.open(world, { indexDir });
    try {
      expect(index.match("population of united kingdom")[0]).toEqual({ table: "country", column: "name", value: "United Kingdom", score: 1 });
      expect(index.match("cities in COTE D'IVOIRE")[0]).toEqual({ table: "country", column: "name", value: "Côte d'Ivoire", score: 1 });
    } finally {
      index.close();
    }
  });

  it("returns matches best first, at most `limit`, and nothing for unrelated questions", () => {
    const index = ValueIndex.open(world, { indexDir });
    try {
      const matches = index.match("Jonas Jonsson and Lars Smith from europe", { limit: 3 });
      expect(matches).toHaveLength(3);
      expect(matches[0]).toMatchObject({ value: "Jonas Jonsson", score: 1 });
      expect(matches.map((m) => m.score)).toEqual([...matches.map((m) => m.score)].sort((a, b) => b - a));
      expect(matches.some((m) => m.value === "Europe")).toBe(true);
      expect(index.match("What is the average of the quantity?")).toEqual([]);
    } finally {
      index.close();
    }
  });

  it("leaves out numeric-looking strings, long strings and non-text columns", () => {
    const index = ValueIndex.open(world, { indexDir });
    try {
      expect(index.match("who has the phone 555-0100")).toEqual([]);
      expect(index.match("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")).toEqual([]);
      expect(index.size).toBe(4 + 4 + 3 + 121 + 1 + 1);
    } finally {
      index.close();
    }
  });

  it("is built once per database version and reused afterwards", () => {
    const dirOnce = join(dir, "once");
    const first = ValueIndex.open(world, { indexDir: dirOnce });
    first.close();
    expect(first.built).toBe(true);
    const mtime = statSync(first.file).mtimeMs;
    const second = ValueIndex.open(world, { indexDir: dirOnce });
    second.close();
    expect(second.built).toBe(false);
    expect(second.file).toBe(first.file);
    expect(statSync(second.file).mtimeMs).toBe(mtime);
    expect(readdirSync(dirOnce)).toEqual([first.file.split("/").at(-1)]);
  });

  it("builds a new index when the database changes, and removes the one of its earlier version", () => {
    const path = join(dir, "changing.sqlite");
    const db = new Database(path);
    db.exec("CREATE TABLE t (name TEXT); INSERT INTO t VALUES ('Alpha')");
    db.close();
    const before = valueIndexFile(path, { indexDir });
    ValueIndex.open(path, { indexDir }).close();
    const again = new Database(path);
    again.exec("INSERT INTO t VALUES ('Omega')");
    again.close();
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect(valueIndexFile(path, { indexDir })).not.toBe(before);
    const index = ValueIndex.open(path, { indexDir });
    try {
      expect(index.built).toBe(true);
      expect(index.match("omega")[0]?.value).toBe("Omega");
    } finally {
      index.close();
    }
    expect(existsSync(before)).toBe(false);
    // another database's index in the same folder stays
    expect(existsSync(valueIndexFile(world, { indexDir }))).toBe(true);
  });

  it("does not change the database file", () => {
    const hash = sha(world);
    const index = ValueIndex.open(world, { indexDir: join(dir, "fresh") });
    index.match("Jonh Smith");
    index.close();
    expect(sha(world)).toBe(hash);
  });

  it("fails with DB_FILE_NOT_FOUND for a missing database", () => {
    expect(() => ValueIndex.open(join(dir, "missing.sqlite"), { indexDir })).toThrow(expect.objectContaining({ code: "DB_FILE_NOT_FOUND" }));
  });
});

describe("formatMatchedValues", () => {
  it("writes one `table.column : 'value'` line per match, doubling quotes", () => {
    expect(
      formatMatchedValues([
        { table: "country", column: "name", value: "United Kingdom", score: 1 },
        { table: "person", column: "note", value: "O'Brien's pub", score: 0.8 },
        { table: "my table", column: "Full Name", value: "x", score: 0.7 },
      ]),
    ).toBe("country.name : 'United Kingdom'\nperson.note : 'O''Brien''s pub'\n`my table`.`Full Name` : 'x'");
    expect(formatMatchedValues([])).toBe("");
  });
});

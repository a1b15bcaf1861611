import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkIdentifiers } from "../../src/agent/index.js";
import { buildGrammar, preparePrompt } from "../../src/agent/testing.js";
import { ValueIndex } from "../../src/sql/index.js";

let dir: string;
let dbPath: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-agent-inputs-"));
  dbPath = join(dir, "concerts.sqlite");
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, singer_id INTEGER REFERENCES singer(singer_id));
    INSERT INTO singer VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain');
    INSERT INTO concert VALUES (1, 'Summer Nights', 1);
  `);
  db.close();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("preparePrompt", () => {
  it("builds the prompt from a database file with its schema, matched values and names", () => {
    const values = ValueIndex.open(dbPath, { indexDir: join(dir, "indexes") });
    try {
      const prepared = preparePrompt(dbPath, { family: "execution-aware", question: "Which singer sang at Summer Nights?", evidence: "e", values });
      const user = prepared.messages[1]!.content;
      expect(user.startsWith(prepared.sharedPrefix)).toBe(true);
      expect(prepared.sharedPrefix).toMatch(/singer/);
      expect(prepared.sharedPrefix).toMatch(/concert_name/);
      expect(user).toMatch(/Matched values:\n.*Summer Nights/);
      expect(user.indexOf("Question:")).toBeGreaterThan(user.indexOf("Matched values:"));
      expect(prepared.names.tables.map((t) => t.name)).toEqual(["singer", "concert"]);
      expect(checkIdentifiers("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id", prepared.names)).toEqual([]);
      expect(buildGrammar(prepared.names, "direct")).toContain('"concert_name"');
    } finally {
      values.close();
    }
  });

  it("leaves out the matched values section without an index", () => {
    const prepared = preparePrompt(dbPath, { family: "direct", question: "How many singers?" });
    expect(prepared.messages[1]!.content).not.toContain("Matched values");
  });
});

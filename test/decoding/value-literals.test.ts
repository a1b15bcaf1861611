/**
 * The default grammar builder, given the question, limits the SQL's string literals to the
 * database's spellings of the question's words, the values of few-valued columns compared with
 * their own column, and date and time text; before the value index is built, or with linking off, strings stay free. Real SQLite
 * file, real value index, llama.cpp's own grammar matcher.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { getLlama, type Llama } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGrammarBuilder, createPromptBuilder } from "../../src/decoding/index.js";
import { type GrammarFor } from "../../src/decoding/testing.js";

let dir: string;
let dbPath: string;
let llama: Llama;
const question = "What is the position of john charles?";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-value-literals-"));
  dbPath = join(dir, "players.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE players (player TEXT, position TEXT, nationality TEXT)");
  const add = db.prepare("INSERT INTO players VALUES (?, ?, ?)");
  add.run("John Charles", "Guard", "Wales");
  add.run('"Big Mo"', "Center", "Wales");
  // more players than a few-valued column holds, three positions
  for (let i = 0; i < 80; i++) add.run(`Player ${i}`, ["Guard", "Forward", "Center"][i % 3], "Wales");
  db.close();
  llama = await getLlama({ gpu: false, build: "never", logLevel: "warn" as never });
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function accepts(grammar: string, sql: string): Promise<boolean> {
  const g = await llama.createGrammar({ grammar });
  return (g as unknown as { _testText(text: string): boolean })._testText(`<final_sql>${sql}</final_sql>`);
}

async function segmentAfterPrompt(grammarFor: GrammarFor, indexDir: string, asked = question, db = dbPath): Promise<string> {
  const prompts = createPromptBuilder({ indexDir });
  try {
    await prompts.promptFor(db, asked, undefined, "execution-aware");
    return (await grammarFor(db, "execution-aware", undefined, { question: asked })).segment!;
  } finally {
    prompts.close();
  }
}

describe("string literals linked to the database's values", () => {
  it("spells the question's words as the database stores them, and offers a few-valued column's values where that column is compared", async () => {
    const indexDir = join(dir, "linked");
    const segment = await segmentAfterPrompt(createGrammarBuilder({ indexDir }), indexDir);
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'John Charles'")).toBe(true);
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'john charles'")).toBe(false);
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position = 'Forward'")).toBe(true);
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE players.position IN ('Guard', 'Center') AND nationality != 'Wales'")).toBe(true);
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position NOT LIKE '%Forward%'")).toBe(true);
    // a value of one column is not written against another
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE player = 'Forward'")).toBe(false);
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position = 'Wales'")).toBe(false);
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'Player 17'")).toBe(false);
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'Jon Charles'")).toBe(false);
  });

  it("does not offer part of a stored value on its own, and finds a value stored with its quotes", async () => {
    const indexDir = join(dir, "parts");
    const segment = await segmentAfterPrompt(createGrammarBuilder({ indexDir }), indexDir);
    expect(await accepts(segment, "SELECT position FROM players WHERE player LIKE '%John Charles%'")).toBe(true);
    // 'john' and 'charles' lie inside a span the database stores as 'John Charles'
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'john'")).toBe(false);
    expect(await accepts(segment, "SELECT position FROM players WHERE player LIKE 'charles%'")).toBe(false);
    expect(await accepts(segment, "SELECT position FROM players WHERE player = 'position of'")).toBe(true);
    const quoted = await segmentAfterPrompt(createGrammarBuilder({ indexDir }), indexDir, 'Which position does "big mo" play?');
    expect(await accepts(quoted, `SELECT position FROM players WHERE player = '"Big Mo"'`)).toBe(true);
    expect(await accepts(quoted, `SELECT position FROM players WHERE player = '"big mo"'`)).toBe(false);
  });

  it("offers no other value of a column whose value the question names", async () => {
    const indexDir = join(dir, "named");
    const segment = await segmentAfterPrompt(createGrammarBuilder({ indexDir }), indexDir, "How many players play guard?");
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position = 'Guard'")).toBe(true);
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position = 'Forward'")).toBe(false);
    // another column's few values stay
    expect(await accepts(segment, "SELECT COUNT(*) FROM players WHERE position = 'Guard' AND nationality = 'Wales'")).toBe(true);
  });

  it("offers the code a question names in other words against its own column only, and not the words themselves", async () => {
    const shop = join(dir, "shop.sqlite");
    const db = new Database(shop);
    db.exec("CREATE TABLE customers (name TEXT, country TEXT)");
    const add = db.prepare("INSERT INTO customers VALUES (?, ?)");
    const codes = ["DE", "GB", "FR", "ES", "IT", "NL", "BE", "AT", "CH", "SE", "NO", "DK", "PL", "PT"];
    for (let i = 0; i < 56; i++) add.run(`Customer ${i}`, codes[i % codes.length]);
    db.close();
    const indexDir = join(dir, "codes");
    const segment = await segmentAfterPrompt(createGrammarBuilder({ indexDir }), indexDir, "How many customers live in Germany?", shop);
    expect(await accepts(segment, "SELECT COUNT(*) FROM customers WHERE country = 'DE'")).toBe(true);
    expect(await accepts(segment, "SELECT COUNT(*) FROM customers WHERE country = 'FR'")).toBe(false);
    // the code only against its own column, and the name as written nowhere: no column stores it
    expect(await accepts(segment, "SELECT COUNT(*) FROM customers WHERE name = 'DE'")).toBe(false);
    expect(await accepts(segment, "SELECT COUNT(*) FROM customers WHERE country = 'Germany'")).toBe(false);
  });

  it("leaves strings free before the value index is built, and with linking off", async () => {
    const unbuilt = await createGrammarBuilder({ indexDir: join(dir, "empty") })(dbPath, "execution-aware", undefined, { question });
    expect(await accepts(unbuilt.segment!, "SELECT position FROM players WHERE player = 'Jon Charles'")).toBe(true);
    const indexDir = join(dir, "off");
    const off = await segmentAfterPrompt(createGrammarBuilder({ indexDir, linkValues: false }), indexDir);
    expect(await accepts(off, "SELECT position FROM players WHERE player = 'Jon Charles'")).toBe(true);
  });
});

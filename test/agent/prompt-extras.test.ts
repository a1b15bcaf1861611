/**
 * Verified examples and earlier turns in the prompt: each profile lays them out its own way after
 * the cached schema prefix; the decoder's prompt builder keeps those that fit their share of the
 * schema's token budget (lowest-scored examples and oldest turns dropped first); and a verified
 * example becomes an SFT trace each profile's own format check accepts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROFILES, type ModelProfile } from "../../src/agent/index.js";
import { createPromptBuilder } from "../../src/decoding/index.js";
import { answerOnlyResponse, exampleFamily } from "../../src/training/traces.js";

const EXAMPLES = [
  { question: "How many singers are from France?", sql: "SELECT COUNT(*) FROM singer WHERE country = 'France'", evidence: "France is a country" },
];
const TURNS = [
  { question: "Which singers are older than 40?", sql: "SELECT name FROM singer WHERE age > 40", summary: "columns name; 2 rows; first row: Joe" },
];

const GENERIC = PROFILES.find((p) => p.id === "generic")!;

function userText(profile: ModelProfile, extras: object): { user: string; prefix: string; system: string } {
  const built = profile.buildPrompt({ family: profile.families[0]!, schema: "singer(singer_id, name, country, age)", question: "And from France?", ...extras });
  return {
    user: built.messages.find((m) => m.role === "user")!.content,
    system: built.messages.find((m) => m.role === "system")?.content ?? "",
    prefix: built.sharedPrefix,
  };
}

describe("each profile's layout of verified examples and earlier turns", () => {
  const layouts: Record<string, { example: string; turn: string }> = {
    reex: {
      example: "<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France'</final_sql>",
      turn: "<final_sql>SELECT name FROM singer WHERE age > 40</final_sql>",
    },
    generic: {
      example: "<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France'</final_sql>",
      turn: "<final_sql>SELECT name FROM singer WHERE age > 40</final_sql>",
    },
    omnisql: { example: "```sql\nSELECT COUNT(*) FROM singer WHERE country = 'France'\n```", turn: "```sql\nSELECT name FROM singer WHERE age > 40\n```" },
    "think-answer": {
      example: "```sql\nSELECT COUNT(*) FROM singer WHERE country = 'France'\n```",
      turn: "```sql\nSELECT name FROM singer WHERE age > 40\n```",
    },
    "skyrl-sql": { example: "-- SQL: SELECT COUNT(*) FROM singer WHERE country = 'France'", turn: "-- SQL: SELECT name FROM singer WHERE age > 40" },
  };
  for (const profile of PROFILES) {
    it(`${profile.id}: after the cached schema, before the question, and nothing without them`, () => {
      const plain = userText(profile, {});
      const taught = userText(profile, { examples: EXAMPLES, turns: TURNS });
      const { example, turn } = layouts[profile.id]!;
      expect(taught.user).toContain(example);
      expect(taught.user).toContain(turn);
      expect(taught.user).toContain("first row: Joe");
      expect(taught.prefix).toBe(plain.prefix);
      const at = taught.user.indexOf(example);
      expect(at).toBeGreaterThan(taught.user.indexOf(taught.prefix) + taught.prefix.length - 1);
      expect(at).toBeLessThan(taught.user.indexOf(turn));
      expect(taught.user.indexOf(turn)).toBeLessThan(taught.user.lastIndexOf("And from France?"));
      expect(plain.user).not.toContain("SELECT COUNT(*)");
      expect(taught.system).toBe(plain.system);
    });
  }
});

describe("the prompt builder's budget for examples and turns", () => {
  let dir: string;
  let db: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "reex-extras-"));
    db = join(dir, "s.sqlite");
    const d = new Database(db);
    d.exec("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER); INSERT INTO singer VALUES (1,'Joe','France',52);");
    d.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const example = (id: string, score: number, words: number) => ({ id, score, question: `question ${id} ${"word ".repeat(words)}`, sql: "SELECT 1" });

  it("keeps examples best first until one passes their share, and the newest turns until one passes theirs", async () => {
    // budget 400 tokens (≈ characters / 4): examples get 100, turns 100
    const builder = createPromptBuilder({ indexDir: join(dir, "idx"), schemaTokenBudget: 400, examplesTokenShare: 0.25, historyTokenShare: 0.25 });
    try {
      const examples = [example("a", 3, 40), example("b", 2, 40), example("c", 1, 5)];
      const turns = [0, 1, 2].map((i) => ({ question: `turn ${i} ${"word ".repeat(40)}`, sql: `SELECT ${i}`, summary: "no rows" }));
      const built = await builder.promptFor(db, "How many singers?", undefined, "direct", GENERIC, { examples, turns });
      expect(built.shown?.examples.map((e) => e.id)).toEqual(["a"]);
      expect(built.shown?.turns).toBe(1);
      expect(built.shown?.exampleTokens).toBeGreaterThan(40);
      const user = built.messages[1]!.content;
      expect(user).toContain("question a");
      expect(user).not.toContain("question b");
      expect(user).not.toContain("question c");
      expect(user).toContain("turn 2");
      expect(user).not.toContain("turn 1");
      const none = await builder.promptFor(db, "How many singers?", undefined, "direct");
      expect(none.shown).toBeUndefined();
      const off = createPromptBuilder({ indexDir: join(dir, "idx"), schemaTokenBudget: 400, examplesTokenShare: 0 });
      expect((await off.promptFor(db, "q", undefined, "direct", GENERIC, { examples })).shown?.examples).toEqual([]);
      off.close();
    } finally {
      builder.close();
    }
  });

  it("shows no examples in a profile trained without them (the starter's reex), and still the earlier turns", async () => {
    const builder = createPromptBuilder({ indexDir: join(dir, "idx"), schemaTokenBudget: 400 });
    try {
      const reex = PROFILES.find((p) => p.id === "reex")!;
      expect(reex.examples).toBe(false);
      const turns = [{ question: "turn one", sql: "SELECT 1", summary: "no rows" }];
      const built = await builder.promptFor(db, "How many singers?", undefined, "direct", reex, { examples: [example("a", 3, 5)], turns });
      expect(built.shown?.examples).toEqual([]);
      expect(built.shown?.exampleTokens).toBe(0);
      expect(built.shown?.turns).toBe(1);
      expect(built.messages[1]!.content).not.toContain("question a");
      const only = await builder.promptFor(db, "How many singers?", undefined, "direct", reex, { examples: [example("a", 3, 5)] });
      expect(only.shown).toBeUndefined();
    } finally {
      builder.close();
    }
  });
});

describe("SFT traces from verified examples", () => {
  for (const profile of PROFILES) {
    it(`${profile.id}: the answer alone passes the profile's own format check in its trace family`, () => {
      const family = exampleFamily(profile);
      expect(profile.families).toContain(family);
      const response = answerOnlyResponse(profile, family, "SELECT COUNT(*) FROM singer");
      expect(profile.formatCheck(response, family)).toEqual({ ok: true, problems: [] });
      expect(response).toContain("SELECT COUNT(*) FROM singer");
    });
  }
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  PROFILES,
  buildSegmentGrammars,
  familyFor,
  getProfile,
  resolveProfile,
  runRollout,
  type ModelProfile,
  type RolloutOptions,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../src/agent/index.js";
import { detectProfile } from "../../src/agent/testing.js";
import { configSchema } from "../../src/config/testing.js";
import { ReexError } from "../../src/errors/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { FakePolicy, type Responder } from "./fake-policy.js";
import { CountingExecutor } from "../helpers/executor.js";

let dir: string;
let dbPath: string;
let pool: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-profiles-"));
  dbPath = join(dir, "concerts.sqlite");
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
    INSERT INTO singer VALUES (1, 'Ann', 'France', 31), (2, 'Bob', 'France', 42), (3, 'Cid', 'Spain', 19);
  `);
  db.close();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A responder that writes `turns[i]` after the i-th closing of `feedbackClose`. */
function turnsAfter(feedbackClose: string, turns: string[]): Responder {
  return (response) => turns[response.split(feedbackClose).length - 1] ?? "";
}

async function run(profile: ModelProfile, responder: Responder, options: Partial<RolloutOptions> = {}) {
  const policy = new FakePolicy(responder);
  const executor = new CountingExecutor(pool);
  const family = options.family ?? profile.families[0]!;
  const prompt = profile.buildPrompt({
    family,
    schema: "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);",
    question: "How many singers are from France?",
  });
  const result = await runRollout(policy, prompt, resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, profile, family, ...options }));
  return { result, executor, policy };
}

/** The record's sampled flags, as a string over the text's characters (the fake policy's tokens). */
function maskOf(result: { text: string; record: { sampled: (0 | 1)[] } }): string {
  return result.record.sampled.join("");
}

describe("skyrl-sql runs the <sql> / <observation> / <solution> loop", () => {
  const skyrl = getProfile("skyrl-sql");

  it("executes a <sql> probe, injects its dataframe in <observation> as unsampled text and reads <solution>", async () => {
    const { result, executor, policy } = await run(
      skyrl,
      turnsAfter("</observation>", [
        "<think>Which singers are French?</think>\n<sql>SELECT name, age FROM singer WHERE country = 'France'</sql>",
        "<think>Two of them.</think>\n<solution>SELECT COUNT(*) FROM singer WHERE country = 'France'</solution>",
      ]),
    );
    expect(executor.calls).toEqual(["SELECT name, age FROM singer WHERE country = 'France'"]);
    expect(policy.generateCalls[0]!.stop).toEqual(["</sql>", "</solution>"]);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
    expect(result.stopReason).toBe("final");
    expect(result.text).toContain("</sql><observation>\n   name  age\n0   Ann   31\n1   Bob   42\n</observation>\n<think>Two");
    const injected = "<observation>\n   name  age\n0   Ann   31\n1   Bob   42\n</observation>\n";
    const at = [...result.text.slice(0, result.text.indexOf(injected))].length;
    const mask = maskOf(result);
    expect(mask.slice(at, at + injected.length)).toBe("0".repeat(injected.length));
    expect(mask.slice(0, at)).toBe("1".repeat(at));
    expect(mask.slice(at + injected.length)).toMatch(/^1+$/);
    expect(skyrl.formatCheck(result.text, "execution-aware")).toEqual({ ok: true, problems: [] });
    expect(getProfile("reex").formatCheck(result.text, "execution-aware").ok).toBe(false);
  });

  it("answers a probe past the interaction limit by opening <solution> for the model", async () => {
    const { result, executor } = await run(
      skyrl,
      (response) => (response.endsWith("<solution>") ? "SELECT 1</solution>" : "<think>again</think><sql>SELECT count(*) FROM singer</sql>"),
      { maxInteractions: 1 },
    );
    expect(executor.calls).toHaveLength(1);
    expect(result.text).toMatch(/Interaction limit reached[^<]*\n<\/observation>\n<solution>SELECT 1<\/solution>$/);
    expect(result.finalSql).toBe("SELECT 1");
  });

  it("shows an empty result and an error the way its observations do", async () => {
    const { result } = await run(
      skyrl,
      turnsAfter("</observation>", [
        "<sql>SELECT name FROM singer WHERE age > 99</sql>",
        "<sql>SELECT nme FROM singer</sql>",
        "<solution>SELECT name FROM singer</solution>",
      ]),
    );
    expect(result.probes[0]!.feedback).toBe("Empty DataFrame\nColumns: [name]\nIndex: []");
    expect(result.probes[1]!.feedback).toMatch(/^Error \(missing_column\): no such column: nme/);
  });

  it("does not read the ReEx tags as probes", async () => {
    const { result, executor } = await run(skyrl, () => "<intermediate_sql>SELECT 1</intermediate_sql><solution>SELECT 2</solution>");
    expect(executor.calls).toEqual([]);
    expect(result.finalSql).toBe("SELECT 2");
  });
});

describe("single-turn profiles answer once, with no probes", () => {
  it("omnisql reads the last ```sql fence and never stops at the fence's opening", async () => {
    const { result, executor, policy } = await run(
      getProfile("omnisql"),
      () => "The question counts French singers.\n```sql\nSELECT COUNT(*) FROM singer WHERE country = 'France';\n```",
    );
    expect(policy.generateCalls).toHaveLength(1);
    expect(policy.generateCalls[0]!.stop).toEqual([]);
    expect(executor.calls).toEqual([]);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
    expect(getProfile("omnisql").formatCheck(result.text, "direct")).toEqual({ ok: true, problems: [] });
  });

  it("omnisql keeps a closed fence when the budget ends after it, and drops an unclosed one", async () => {
    const closed = await run(getProfile("omnisql"), () => "```sql\nSELECT name FROM singer\n```\nAnd some more words that run on", { maxTokens: 40 });
    expect(closed.result.stopReason).toBe("maxTokens");
    expect(closed.result.finalSql).toBe("SELECT name FROM singer");
    const open = await run(getProfile("omnisql"), () => "```sql\nSELECT name FROM singer WHERE country = 'France' AND age > 30", { maxTokens: 30 });
    expect(open.result.finalSql).toBeNull();
    expect(open.result.truncated).toBe(true);
  });

  it("think-answer reads the SQL inside <answer>, fenced or not, and ignores <sql>", async () => {
    const profile = getProfile("think-answer");
    const { result, executor, policy } = await run(
      profile,
      () => "<think>Count the French rows. <sql>SELECT 1</sql></think>\n<answer>\n```sql\nSELECT COUNT(*) FROM singer WHERE country = 'France'\n```\n</answer>",
    );
    expect(policy.generateCalls[0]!.stop).toEqual(["</answer>"]);
    expect(executor.calls).toEqual([]);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
    expect(profile.formatCheck(result.text, "standard").ok).toBe(true);
    expect(profile.formatCheck("<reasoning>r</reasoning><answer>SELECT 1</answer>", "standard").ok).toBe(true);
  });
});

describe("prompts keep each model's layout", () => {
  const input = { schema: "CREATE TABLE t (a INTEGER);", matchedValues: "t.a: 7", question: "What is a?", evidence: "a is the answer" };

  it("omnisql writes one user message in OmniSQL's section order, the hint joined to the question, the schema first as the cached part", () => {
    const built = getProfile("omnisql").buildPrompt({ family: "direct", ...input });
    expect(built.messages.map((m) => m.role)).toEqual(["user"]);
    const text = built.messages[0]!.content;
    const order = [
      "Task Overview:",
      "Database Engine:",
      "Database Schema:",
      "CREATE TABLE t",
      "t.a: 7",
      "Question:\nWhat is a?\na is the answer",
      "Instructions:",
      "```sql",
    ].map((h) => text.indexOf(h));
    expect(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!))).toBe(true);
    expect(text).not.toContain("External Knowledge:");
    expect(text.startsWith(built.sharedPrefix)).toBe(true);
    expect(built.sharedPrefix).toContain("CREATE TABLE t");
    expect(built.sharedPrefix).not.toContain("What is a?");
  });

  it("think-answer puts the task in the system message and the sections from the engine on in the user message, as Arctic-R1's inference does", () => {
    const built = getProfile("think-answer").buildPrompt({ family: "standard", ...input });
    expect(built.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(built.messages[0]!.content).toContain("data science expert");
    const user = built.messages[1]!.content;
    expect(user.startsWith("Database Engine:")).toBe(true);
    const order = ["Database Schema:", "CREATE TABLE t", "Question:\nWhat is a?\na is the answer", "Instructions:", "<think>", "<answer>", "```sql"].map((h) =>
      user.indexOf(h),
    );
    expect(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!))).toBe(true);
    expect(user.startsWith(built.sharedPrefix)).toBe(true);
  });

  it("skyrl-sql keeps SkyRL-SQL's training split: a fixed system prompt with placeholders, a user message that fills them", () => {
    const built = getProfile("skyrl-sql").buildPrompt({ family: "execution-aware", ...input });
    expect(built.messages.map((m) => m.role)).toEqual(["system", "user"]);
    const system = built.messages[0]!.content;
    const order = [
      "Task Overview:",
      "Database Engine:",
      "{db_details}",
      "{external_knowledge}",
      "{question}",
      "Instructions:",
      "<sql>your sql</sql>",
      "<observation>...</observation>",
      "<solution>...</solution>",
    ].map((h) => system.indexOf(h));
    expect(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!))).toBe(true);
    expect(getProfile("skyrl-sql").buildPrompt({ family: "execution-aware", ...input, question: "Other?" }).messages[0]!.content).toBe(system);
    const user = built.messages[1]!.content;
    expect(user).toBe(
      "{db_details}:CREATE TABLE t (a INTEGER);\n-- Values in the database that match words of the question:\n-- t.a: 7;\n {external_knowledge}: a is the answer;\n {question}: What is a?",
    );
    expect(user.startsWith(built.sharedPrefix)).toBe(true);
    expect(built.sharedPrefix).not.toContain("What is a?");
  });

  it("generic adds one worked example of the family's exchange to the ReEx prompt", () => {
    const generic = getProfile("generic");
    const reex = getProfile("reex");
    for (const family of ["execution-aware", "standard", "direct"] as const) {
      const g = generic.buildPrompt({ family, ...input }).messages[0]!.content;
      const r = reex.buildPrompt({ family, ...input }).messages[0]!.content;
      expect(g.startsWith(r)).toBe(true);
      expect(g).toContain("Example");
      expect(g.includes("<intermediate_sql>SELECT DISTINCT")).toBe(family === "execution-aware");
    }
  });
});

describe("profile selection", () => {
  it("detects released models from their GGUF names and says why", () => {
    expect(detectProfile({ name: "SkyRL SQL 7B" })).toMatchObject({ profile: { id: "skyrl-sql" }, reason: expect.stringContaining("general.name") });
    expect(detectProfile({ basename: "OmniSQL", name: "Omnisql 7B" }).profile.id).toBe("omnisql");
    expect(detectProfile({ name: "Qwen2.5 Coder 7B Instruct" }).profile.id).toBe("omnisql");
    // the 0.5B answers more in the ReEx protocol (the generic profile) than in its native prompt
    expect(detectProfile({ name: "Qwen2.5 Coder 0.5B Instruct AWQ", basename: "Qwen2.5-Coder" }).profile.id).toBe("generic");
    expect(detectProfile({ name: "Qwen2.5 Coder 0.5B Instruct AWQ" }).reason).toMatch(
      /general\.name "Qwen2\.5 Coder 0\.5B Instruct AWQ" names Qwen2\.5-Coder-0\.5B/,
    );
    expect(detectProfile({ name: "XiYanSQL-QwenCoder-7B-2504" }).profile.id).toBe("omnisql");
    expect(detectProfile({ name: "Arctic-Text2SQL-R1-7B" }).profile.id).toBe("think-answer");
    expect(detectProfile({ file: "SQL-R1-7B.Q4_K_M.gguf" })).toMatchObject({ profile: { id: "think-answer" }, reason: expect.stringContaining("file name") });
    expect(detectProfile({ name: "reex-starter-seed1" }).profile.id).toBe("reex");
    expect(detectProfile({ name: "Meta Llama 3.1 8B Instruct" })).toMatchObject({ profile: { id: "generic" }, reason: expect.stringContaining("Meta Llama") });
    expect(detectProfile({}).profile.id).toBe("generic");
  });

  it("a base model with a reex LoRA adapter is a reex model; the base alone is generic", () => {
    const gemma = { name: "Gemma 3 270m", basename: "gemma-3", file: "gemma-3-270m-q4_k_m.gguf" };
    expect(detectProfile(gemma).profile.id).toBe("generic");
    expect(detectProfile({ ...gemma, adapters: ["gemma-3-270m-reex-lora.gguf"] })).toMatchObject({
      profile: { id: "reex" },
      reason: 'the LoRA adapter "gemma-3-270m-reex-lora.gguf" names a reex model',
    });
    expect(detectProfile({ ...gemma, adapters: ["style-lora.gguf"] }).profile.id).toBe("generic");
  });

  it("an explicit profile wins over detection, and an unknown one is a typed error", () => {
    expect(resolveProfile("omnisql", { name: "SkyRL-SQL-7B" })).toMatchObject({ profile: { id: "omnisql" }, reason: "set by policy.profile" });
    expect(resolveProfile("auto", { name: "SkyRL-SQL-7B" }).profile.id).toBe("skyrl-sql");
    expect(() => getProfile("vicuna")).toThrow(ReexError);
    expect(() => getProfile("vicuna")).toThrow(/known: reex, skyrl-sql, omnisql, think-answer, generic/);
  });

  it("a family a profile does not support is refused; none picks the profile's own", () => {
    expect(familyFor(getProfile("omnisql"), undefined)).toBe("direct");
    expect(() => familyFor(getProfile("omnisql"), "execution-aware")).toThrow(/does not support the execution-aware prompt family/);
    expect(familyFor(getProfile("reex"), "standard")).toBe("standard");
  });

  it("the config accepts exactly the registry's profiles and auto", () => {
    for (const p of PROFILES) expect(configSchema.parse({ policy: { profile: p.id } }).policy.profile).toBe(p.id);
    expect(configSchema.parse({}).policy.profile).toBe("auto");
    expect(() => configSchema.parse({ policy: { profile: "vicuna" } })).toThrow();
  });
});

describe("constrained grammars follow the profile's tags", () => {
  const names = { tables: [{ name: "singer", columns: ["name", "country"] }] };
  it("writes each profile's own markers and no other protocol's", () => {
    const skyrl = buildSegmentGrammars(names, "execution-aware", { skeleton: getProfile("skyrl-sql") });
    expect(skyrl.first).toContain('"<sql>"');
    expect(skyrl.first).toContain('"<solution>"');
    expect(skyrl.first).not.toContain("intermediate_sql");
    expect(skyrl.finalBody).toMatch(/root ::= final-body "<\/solution>"/);
    const omni = buildSegmentGrammars(names, "direct", { skeleton: getProfile("omnisql") });
    expect(omni.first).toContain("root ::= ows final");
    expect(omni.first).toContain('"```sql\\n"');
    // omnisql is not told it may decline, so its answer body has no UNANSWERABLE alternative
    const finalBody = (grammar: string | undefined): string => (grammar ?? "").split("\n").find((line) => line.startsWith("final-body ::="))!;
    expect(finalBody(omni.first)).not.toContain("unanswerable");
    expect(finalBody(buildSegmentGrammars(names, "execution-aware", { skeleton: getProfile("reex") }).first)).toContain("unanswerable");
  });
});

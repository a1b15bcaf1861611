import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDecoder, createGrammarBuilder, createPromptBuilder, DEFAULT_DECODER_DEFAULTS } from "../../src/decoding/index.js";
import { decoderDefaults } from "../../src/decoding/testing.js";
import { parseConfig } from "../../src/config/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { FakeExecutor, final, makeShopDb, rows } from "./helpers.js";

let dir: string;
let dbPath: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-decoding-prompt-"));
  dbPath = makeShopDb(join(dir, "shop.sqlite"));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the default prompt builder", () => {
  it("puts the schema first, shared by every question on the database, then matched values, question and hint", async () => {
    const builder = createPromptBuilder({ indexDir: join(dir, "indexes") });
    const a = await builder.promptFor(dbPath, "How many customers live in lyon?", "city is the town name", "execution-aware");
    const b = await builder.promptFor(dbPath, "Total of refunded orders?", undefined, "execution-aware");
    expect(a.sharedPrefix).toBe(b.sharedPrefix);
    expect(a.sharedPrefix).toMatch(/customers\.city/);
    expect(a.sharedPrefix).toMatch(/orders\.total_cents/);
    const user = a.messages[1]!.content;
    expect(user.startsWith(a.sharedPrefix)).toBe(true);
    expect(user).toMatch(/customers\.city : 'Lyon'/);
    expect(user).toMatch(/Question: How many customers live in lyon\?/);
    expect(user).toMatch(/Hint: city is the town name/);
    expect(a.messages[0]!.content).toMatch(/intermediate_sql/);
    expect(readdirSync(join(dir, "indexes")).length).toBeGreaterThan(0);
    builder.close();
  });

  it("builds the identifier grammars of the database for constrained decoding", async () => {
    const grammars = await createGrammarBuilder()(dbPath, "execution-aware");
    for (const g of [grammars.first, grammars.segment, grammars.finalBody]) expect(g).toMatch(/"customers"/);
    expect(grammars.first).toMatch(/total_cents/);
  });

  it("feeds a decoder end to end: prompt, grammar and defaults from the configuration", async () => {
    const policy = new ScriptedPolicy([final("SELECT COUNT(*) FROM customers")]);
    const executor = new FakeExecutor({ "SELECT COUNT(*) FROM customers": rows([20]) });
    const config = parseConfig({ decoding: { strategy: "greedy" }, agent: { maxTokens: 300 } });
    const decode = createDecoder({ policy, executor, config, indexDir: join(dir, "indexes") });
    const answer = await decode({ dbPath, question: "How many customers?", constrained: true });
    expect(answer.sql).toBe("SELECT COUNT(*) FROM customers");
    expect(policy.calls[0]!.prompt).toMatch(/customers\.city/);
    expect(policy.calls[0]!.options.grammar).toMatch(/"customers"/);
    expect(policy.calls[0]!.options.maxTokens).toBe(300);
    decode.close();
    expect(decoderDefaults(config)).toMatchObject({ ...DEFAULT_DECODER_DEFAULTS, maxTokens: 300, probeTimeoutMs: 5000 });
  });
});

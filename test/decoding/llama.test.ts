/**
 * The strategies through real node-llama-cpp with the tiny random model. Its text is noise, so a
 * fixed-choice grammar gives every trajectory the shape think → probe → (probe | answer) over a
 * real SQLite database and a real executor pool: branching, forking and pruning then happen with
 * real sampling, and token counters come from llama.cpp.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDecoder, type AnswerRequest } from "../../src/decoding/index.js";
import { type Decoder } from "../../src/decoding/testing.js";
import { isReexError } from "../../src/errors/index.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";
import { choiceGrammars, eventLog, makeShopDb, SHOP_FINALS, SHOP_PROBES } from "./helpers.js";

let dir: string;
let policy: Policy;
let executor: ExecutorPool;
let decode: Decoder;
let base: AnswerRequest;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-decoding-"));
  const dbPath = makeShopDb(join(dir, "shop.sqlite"));
  await ensureTestModel();
  policy = await createLlamaPolicy(testPolicyOptions({ sequences: 20, contextSize: 2048 }));
  executor = new ExecutorPool({ workers: 2 });
  decode = createDecoder({
    policy,
    executor,
    promptOptions: { indexDir: join(dir, "indexes") },
    grammarFor: () => choiceGrammars(SHOP_PROBES, SHOP_FINALS),
  });
  base = { dbPath, question: "How many customers live in Lyon?", constrained: true, maxInteractions: 3, maxTokens: 400, seed: 11 };
});

afterAll(async () => {
  decode?.close();
  await policy?.close();
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("decoding with the tiny llama model", () => {
  it.each([
    ["greedy", 1],
    ["linear", 8],
    ["tree", 8],
    ["tree-prune", 8],
  ] as const)("%s returns its candidates (or says why fewer), each final SQL executed and voted", async (strategy, wanted) => {
    const log = eventLog();
    const answer = await decode({ ...base, strategy, candidates: wanted }, { sink: log.sink });
    if (answer.candidates.length !== wanted) expect(answer.shortfall).toBeTruthy();
    expect(answer.candidates.length).toBeGreaterThan(0);
    for (const c of answer.candidates) {
      expect(SHOP_FINALS).toContain(c.sql);
      expect(c.result).toBeDefined();
    }
    const winner = answer.candidates[answer.winner!]!;
    expect(winner.votes).toBe(Math.max(...answer.candidates.map((c) => c.votes)));
    expect(answer.sql).toBe(winner.sql);
    expect(answer.usage.generatedTokens).toBeGreaterThan(0);
    expect(log.of("candidate")).toHaveLength(answer.candidates.length);
    expect(log.of("final")).toHaveLength(1);
    if (strategy === "tree" || strategy === "tree-prune") {
      expect(Math.max(...log.of("branch").map((b) => b.depth))).toBeGreaterThanOrEqual(2);
    }
    if (strategy === "tree-prune") expect(log.of("prune").length).toBeGreaterThan(0);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("tree children reuse their parent's KV state: a tree evaluates fewer tokens than linear for the same candidates", async () => {
    const tree = await decode({ ...base, strategy: "tree", candidates: 8 });
    const linear = await decode({ ...base, strategy: "linear", candidates: 8 });
    expect(tree.candidates).toHaveLength(8);
    expect(linear.candidates).toHaveLength(8);
    expect(tree.usage.evaluatedTokens).toBeLessThan(linear.usage.evaluatedTokens);
    expect(tree.usage.promptTokens).toBeLessThan(linear.usage.promptTokens);
    expect(policy.liveTrajectories()).toBe(0);
  });

  // timing on 2 shared cores: a retry absorbs a scheduler stall, a slow cancel fails all three tries
  it.each(["linear", "tree", "tree-prune"] as const)("%s: cancellation stops within 100 ms and frees every sequence", { retry: 2 }, async (strategy) => {
    const controller = new AbortController();
    const pending = decode({ ...base, strategy, candidates: 16, maxInteractions: 10, maxTokens: 1000 }, { signal: controller.signal });
    for (let i = 0; i < 2000 && policy.liveTrajectories() < 3; i++) await new Promise((r) => setTimeout(r, 5));
    expect(policy.liveTrajectories()).toBeGreaterThanOrEqual(3);
    const at = performance.now();
    controller.abort();
    const err = await pending.catch((e: unknown) => e);
    expect(performance.now() - at).toBeLessThan(100);
    expect(isReexError(err) && err.code).toBe("CANCELLED");
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("honours the deadline and frees every sequence", async () => {
    const at = performance.now();
    const answer = await decode({ ...base, strategy: "tree", candidates: 16, maxInteractions: 10, maxTokens: 1000, deadlineMs: 150 });
    expect(performance.now() - at).toBeLessThan(150 + 150);
    if (answer.candidates.length < 16) expect(answer.shortfall).toMatch(/deadline of 150 ms/);
    expect(policy.liveTrajectories()).toBe(0);
  });
});

/**
 * Sampling behind a grammar with log-probabilities on the direct decode path: the model's own draw
 * is kept where the grammar allows it (with the model's log-probability for it), the grammar makes
 * it draw again where it does not, and the tokens come out with the frequencies of node-llama-cpp's
 * own grammar-first sampler (which applies the grammar to the whole vocabulary before each draw).
 * Real runtime, tiny random model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy, type GenerateOptions, type GenerateResult, type Policy, type PromptSpec } from "../../src/policy/index.js";
import { gbnfLiteral } from "../../src/policy/tooling.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";
import { chiSquare, chiSquareQuantile } from "../helpers/stats.js";

let direct: Policy;
let evaluate: Policy;
let prompt: PromptSpec;

beforeAll(async () => {
  await ensureTestModel();
  direct = await createLlamaPolicy(testPolicyOptions({ sequences: 4 }));
  evaluate = await createLlamaPolicy(testPolicyOptions({ sequences: 4, directDecode: false }));
  prompt = direct.renderChat([
    { role: "system", content: "You are an experienced database expert.\norders.id (INTEGER)\norders.total (REAL)" },
    { role: "user", content: "What is the largest order total?" },
  ]);
});

afterAll(async () => {
  await direct?.close();
  await evaluate?.close();
});

/** One generate call per seed, each on a fresh fork of one prompt. */
async function draws(policy: Policy, seeds: number[], options: Partial<GenerateOptions>): Promise<GenerateResult[]> {
  const root = await policy.start(prompt);
  const out: GenerateResult[] = [];
  try {
    for (const seed of seeds) {
      const f = await root.fork();
      try {
        out.push(await f.generate({ stop: [], maxTokens: 1, temperature: 1, topP: 1, seed, ignoreEos: true, ...options }));
      } finally {
        await f.release();
      }
    }
  } finally {
    await root.release();
  }
  return out;
}

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** Text a grammar can spell: not empty, and not a token that is part of a UTF-8 character. */
const whole = (text: string): boolean => text.length > 0 && !text.includes("\uFFFD");

/** The whole-character texts of 200 free one-token draws from seed `from` on, the most drawn first. */
async function rankedTexts(from: number): Promise<string[]> {
  const byCount = new Map<string, number>();
  for (const r of await draws(direct, range(from, 200), { logprobs: false })) if (whole(r.text)) byCount.set(r.text, (byCount.get(r.text) ?? 0) + 1);
  return [...byCount.entries()].sort((a, b) => b[1] - a[1]).map(([t]) => t);
}

/** A grammar of one token's text out of `texts`. */
const oneOf = (texts: string[]): string => `root ::= ${texts.map(gbnfLiteral).join(" | ")}\n`;

describe("sampling behind a grammar with log-probabilities", () => {
  it("keeps the model's own draw where the grammar allows it, with the model's log-probability, and draws again within the grammar where it does not", async () => {
    const seeds = range(1, 40);
    const free = await draws(direct, seeds, {});
    // the grammar allows what the even seeds drew, so odd seeds' draws are mostly refused
    const allowed = [...new Set(free.filter((_, i) => i % 2 === 0).map((r) => r.text))].filter(whole);
    expect(allowed.length).toBeGreaterThan(3);
    const constrained = await draws(direct, seeds, { grammar: oneOf(allowed) });
    let kept = 0;
    let redrawn = 0;
    constrained.forEach((r, i) => {
      expect(allowed.some((t) => t.startsWith(r.text) && r.text.length > 0)).toBe(true);
      if (allowed.includes(free[i]!.text)) {
        kept++;
        expect(r.tokens).toEqual(free[i]!.tokens);
        expect(r.logprobs[0]).toBeCloseTo(free[i]!.logprobs[0]!, 5);
      } else {
        redrawn++;
        expect(r.logprobs[0]).toBeLessThanOrEqual(0);
      }
    });
    expect(kept).toBeGreaterThanOrEqual(10);
    expect(redrawn).toBeGreaterThan(0);
  });

  it("follows the grammar across tokens: every sampled text is one of its sentences, ended there", async () => {
    const sentences = ["SELECT MAX(total) FROM orders", "SELECT id FROM orders WHERE total > 10", "SELECT COUNT(*) FROM orders"];
    const results = await draws(direct, range(1, 12), { grammar: oneOf(sentences), maxTokens: 60, ignoreEos: false });
    for (const r of results) {
      expect(sentences).toContain(r.text);
      expect(r.stopReason).toBe("eos");
      expect(r.logprobs.every((lp) => lp <= 0)).toBe(true);
    }
  });

  it("samples with the frequencies of node-llama-cpp's grammar-first sampler (two-sample chi-square, independent seeds)", async () => {
    const N = 300;
    // allowed: the four texts the model draws most, and four it draws rarely, so both the kept draw and the redraw occur
    const ranked = await rankedTexts(10_001);
    expect(ranked.length).toBeGreaterThan(8);
    const grammar = oneOf([...ranked.slice(0, 4), ...ranked.slice(-4)]);
    const ours = await draws(direct, range(1, N), { grammar });
    const theirs = await draws(evaluate, range(100_001, N), { grammar });
    const { statistic, df } = chiSquare(
      ours.map((r) => r.tokens[0]!),
      theirs.map((r) => r.tokens[0]!),
    );
    // p < 0.001 would fail: a false alarm once in a thousand runs
    expect(statistic).toBeLessThan(chiSquareQuantile(df, 0.999));
  });

  it("behind a check that takes every token, still samples with the grammar-first sampler's frequencies, drawing a token outside the grammar again without it", async () => {
    const N = 300;
    const ranked = await rankedTexts(20_001);
    // the two texts drawn most are left out, so the first draw often falls outside the grammar
    const grammar = oneOf([...ranked.slice(2, 5), ...ranked.slice(-4)]);
    const admit = { admit: () => true, admitWatch: () => true };
    for (const logprobs of [true, false]) {
      const ours = await draws(direct, range(1, N), { grammar, logprobs, ...admit });
      expect(ours.every((r) => r.admitted === "decoder" && r.redrawn === 0)).toBe(true);
      const theirs = await draws(evaluate, range(200_001, N), { grammar, logprobs });
      const { statistic, df } = chiSquare(
        ours.map((r) => r.tokens[0]!),
        theirs.map((r) => r.tokens[0]!),
      );
      expect(statistic).toBeLessThan(chiSquareQuantile(df, 0.999));
    }
  });

  it("greedy behind a check that takes every token writes what greedy behind the grammar alone writes", async () => {
    const sentences = ["SELECT MAX(total) FROM orders", "SELECT id FROM orders WHERE total > 10", "SELECT COUNT(*) FROM orders"];
    const grammar = oneOf(sentences);
    const plain = await draws(direct, [1], { grammar, temperature: 0, maxTokens: 60, ignoreEos: false });
    const checked = await draws(direct, [1], { grammar, temperature: 0, maxTokens: 60, ignoreEos: false, admit: () => true, admitWatch: () => true });
    expect(sentences).toContain(plain[0]!.text);
    expect(checked[0]!.tokens).toEqual(plain[0]!.tokens);
  });
});

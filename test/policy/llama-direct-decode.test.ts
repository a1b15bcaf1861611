/**
 * The direct decode path (reex's own batch step on node-llama-cpp's native context, the default)
 * generates what node-llama-cpp's `evaluate` generates: the same tokens for the same options and
 * seed, the same log-probabilities, the same grammar, the same metering. Both paths run side by side
 * on the real runtime; that the direct one is really taken is shown in llama-batching.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy, type GenerateOptions, type GenerateResult, type Policy, type PromptSpec, type Trajectory } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

let direct: Policy;
let evaluate: Policy;
let prompt: PromptSpec;

beforeAll(async () => {
  await ensureTestModel();
  direct = await createLlamaPolicy(testPolicyOptions({ sequences: 8 }));
  evaluate = await createLlamaPolicy(testPolicyOptions({ sequences: 8, directDecode: false }));
  prompt = direct.renderChat([
    { role: "system", content: "You are an experienced database expert.\norders.id (INTEGER)\norders.total (REAL)" },
    { role: "user", content: "What is the largest order total?" },
  ]);
});

afterAll(async () => {
  await direct?.close();
  await evaluate?.close();
});

/** What `steps` does to a fresh trajectory of `policy`, with its usage afterwards. */
async function on(policy: Policy, steps: (t: Trajectory) => Promise<GenerateResult[]>): Promise<{ results: GenerateResult[]; evaluated: number }> {
  const t = await policy.start(prompt);
  try {
    const results = await steps(t);
    return { results, evaluated: t.usage.evaluatedTokens };
  } finally {
    await t.release();
  }
}

function expectSame(a: GenerateResult[], b: GenerateResult[]): void {
  expect(a.map((r) => r.tokens)).toEqual(b.map((r) => r.tokens));
  expect(a.map((r) => r.stopReason)).toEqual(b.map((r) => r.stopReason));
  expect(a.map((r) => r.text)).toEqual(b.map((r) => r.text));
  a.forEach((r, i) => {
    expect(r.logprobs).toHaveLength(b[i]!.logprobs.length);
    r.logprobs.forEach((lp, j) => {
      if (Number.isNaN(b[i]!.logprobs[j])) expect(lp).toBeNaN();
      else expect(lp).toBeCloseTo(b[i]!.logprobs[j]!, 5);
    });
  });
}

async function both(steps: (t: Trajectory) => Promise<GenerateResult[]>): Promise<void> {
  const d = await on(direct, steps);
  const e = await on(evaluate, steps);
  expectSame(d.results, e.results);
  expect(d.evaluated).toBe(e.evaluated);
}

const gen = (options: Partial<GenerateOptions>) => (t: Trajectory) => t.generate({ stop: [], maxTokens: 32, ...options }).then((r) => [r]);

describe("direct decode path", () => {
  it("generates greedily the tokens and log-probs node-llama-cpp's evaluate does", async () => {
    await both(gen({ ignoreEos: true }));
  });

  it("samples the same tokens from the same seed, with log-probs and without", async () => {
    await both(gen({ temperature: 1, seed: 11, ignoreEos: true }));
    await both(gen({ temperature: 1, seed: 11, ignoreEos: true, logprobs: false }));
    await both(gen({ temperature: 0.7, topP: 0.9, seed: 3, ignoreEos: true }));
  });

  it("stops at stop strings and end-of-turn as evaluate does", async () => {
    await both(gen({ temperature: 1, seed: 5, maxTokens: 200, stop: ["e"] }));
    await both(gen({ temperature: 1, seed: 9, maxTokens: 200 }));
  });

  it("follows a grammar as evaluate does", async () => {
    const grammar = exactTextGrammar("<final_sql>SELECT MAX(total) FROM orders</final_sql>");
    await both(gen({ grammar, maxTokens: 60, stop: ["</final_sql>"] }));
    const d = await on(direct, gen({ grammar, maxTokens: 60, stop: ["</final_sql>"] }));
    expect(d.results[0]!.text).toBe("<final_sql>SELECT MAX(total) FROM orders</final_sql>");
  });

  it("continues after appended text and across generate calls as evaluate does", async () => {
    await both(async (t) => {
      const first = await t.generate({ stop: [], maxTokens: 6, temperature: 1, seed: 2 });
      await t.append("<result>\n| n |\n| 42 |\n</result>\n");
      const second = await t.generate({ stop: [], maxTokens: 10, temperature: 1, seed: 4 });
      const third = await t.generate({ stop: [], maxTokens: 5 });
      return [first, second, third];
    });
  });

  it("gives forks generating together in one batch what each generates alone", async () => {
    const width = 4;
    const batched = await on(direct, async (root) => {
      const forks = await Promise.all(Array.from({ length: width }, () => root.fork()));
      try {
        return await Promise.all(forks.map((f, i) => f.generate({ stop: [], maxTokens: 24, temperature: 1, seed: 20 + i, ignoreEos: true })));
      } finally {
        await Promise.all(forks.map((f) => f.release()));
      }
    });
    const alone: GenerateResult[] = [];
    for (let i = 0; i < width; i++) {
      const r = await on(evaluate, gen({ maxTokens: 24, temperature: 1, seed: 20 + i, ignoreEos: true }));
      alone.push(r.results[0]!);
    }
    expect(batched.results.map((r) => r.tokens)).toEqual(alone.map((r) => r.tokens));
    // batched with other sequences, llama.cpp's float sums may differ in the last digits
    batched.results.forEach((r, i) => r.logprobs.forEach((lp, j) => expect(lp).toBeCloseTo(alone[i]!.logprobs[j]!, 3)));
  });

  it("stops at once on abort and leaves the trajectory able to go on", async () => {
    const t = await direct.start(prompt);
    try {
      const controller = new AbortController();
      let seen = 0;
      const r = await t.generate({
        stop: [],
        maxTokens: 500,
        ignoreEos: true,
        signal: controller.signal,
        onText: () => {
          if (++seen === 5) controller.abort();
        },
      });
      expect(r.stopReason).toBe("aborted");
      expect(r.tokens.length).toBeLessThan(500);
      const more = await t.generate({ stop: [], maxTokens: 4, ignoreEos: true });
      expect(more.tokens).toHaveLength(4);
      expect(t.record.tokens.slice(-4 - r.tokens.length)).toEqual([...r.tokens, ...more.tokens]);
    } finally {
      await t.release();
    }
  });
});

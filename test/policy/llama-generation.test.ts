import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { createLlamaPolicy, type Policy, type PromptSpec } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const SCHEMA = Array.from({ length: 12 }, (_, i) => `orders.col${i} (INTEGER | values : ${i}, ${i * 7}, ${i * 13})`).join("\n");
const messages = (question: string) => [
  { role: "system" as const, content: `You are an experienced database expert.\n${SCHEMA}` },
  { role: "user" as const, content: question },
];

let policy: Policy;
let prompt: PromptSpec;

beforeAll(async () => {
  await ensureTestModel();
  policy = await createLlamaPolicy(testPolicyOptions({ sequences: 8 }));
  prompt = policy.renderChat(messages("How many orders are there?"));
});

afterAll(async () => {
  await policy?.close();
});

describe("llama policy: sampling", () => {
  it("generates greedily and deterministically, with finite non-positive logprobs", async () => {
    const a = await policy.start(prompt);
    const b = await policy.start(prompt);
    const ra = await a.generate({ stop: [], maxTokens: 12 });
    const rb = await b.generate({ stop: [], maxTokens: 12 });
    expect(ra.tokens).toHaveLength(12);
    expect(ra.stopReason).toBe("maxTokens");
    expect(rb.tokens).toEqual(ra.tokens);
    expect(ra.text).toBe(policy.detokenize(ra.tokens));
    for (const lp of ra.logprobs) {
      expect(Number.isFinite(lp)).toBe(true);
      expect(lp).toBeLessThanOrEqual(0);
    }
    expect(a.record).toEqual({ tokens: ra.tokens, sampled: ra.tokens.map(() => 1), logprobs: ra.logprobs });
    await a.release();
    await b.release();
  });

  it("records the greedy token's logprob as the maximum of the distribution sampled at T=1", async () => {
    const parent = await policy.start(prompt);
    const greedyChild = await parent.fork();
    const greedy = await greedyChild.generate({ stop: [], maxTokens: 1 });
    await greedyChild.release();
    const seen = new Map<number, number>();
    for (let seed = 1; seed <= 12; seed++) {
      const child = await parent.fork();
      const r = await child.generate({ stop: [], maxTokens: 1, temperature: 1, seed });
      seen.set(r.tokens[0]!, r.logprobs[0]!);
      await child.release();
    }
    for (const lp of seen.values()) expect(lp).toBeLessThanOrEqual(greedy.logprobs[0]! + 1e-6);
    const sampledGreedy = seen.get(greedy.tokens[0]!);
    if (sampledGreedy !== undefined) expect(sampledGreedy).toBeCloseTo(greedy.logprobs[0]!, 4);
    const mass = [...seen.values()].reduce((s, lp) => s + Math.exp(lp), 0);
    expect(mass).toBeLessThanOrEqual(1 + 1e-6);
    await parent.release();
  });

  it("skips log-probs with logprobs: false, recording NaN for the sampled tokens; greedy tokens are the same either way", async () => {
    const parent = await policy.start(prompt);
    const run = async (logprobs: boolean, temperature: number) => {
      const child = await parent.fork();
      const r = await child.generate({ stop: [], maxTokens: 12, temperature, seed: 7, logprobs });
      const record = child.record.logprobs.slice();
      await child.release();
      return { ...r, record };
    };
    for (const temperature of [0, 1]) {
      const [with_, without] = [await run(true, temperature), await run(false, temperature)];
      if (temperature === 0) expect(without.tokens).toEqual(with_.tokens);
      expect(without.tokens).toHaveLength(12);
      expect(with_.logprobs.every((lp) => Number.isFinite(lp) && lp <= 0)).toBe(true);
      expect(without.logprobs.every((lp) => Number.isNaN(lp))).toBe(true);
      expect(without.record.every((lp) => Number.isNaN(lp))).toBe(true);
    }
    await parent.release();
  });

  it("samples from the whole vocabulary at T=1, with and without log-probs, not only the few likeliest tokens", async () => {
    const parent = await policy.start(prompt);
    for (const logprobs of [true, false]) {
      const seen = new Set<number>();
      let least = 0;
      for (let seed = 1; seed <= 24; seed++) {
        const child = await parent.fork();
        const r = await child.generate({ stop: [], maxTokens: 1, temperature: 1, seed, logprobs });
        seen.add(r.tokens[0]!);
        if (logprobs) least = Math.min(least, r.logprobs[0]!);
        await child.release();
      }
      // the tiny random model spreads its next token over hundreds of tokens; a top-k cut of a few would show only those
      expect(seen.size).toBeGreaterThan(8);
      if (logprobs) expect(least).toBeLessThan(Math.log(1 / 40));
    }
    await parent.release();
  });

  it("reproduces sampling with a seed and varies without one", async () => {
    const parent = await policy.start(prompt);
    const run = async (seed?: number) => {
      const child = await parent.fork();
      const r = await child.generate({ stop: [], maxTokens: 16, temperature: 1, ...(seed !== undefined ? { seed } : {}) });
      await child.release();
      return r.tokens;
    };
    const first = await run(42);
    expect(await run(42)).toEqual(first);
    expect(await run(43)).not.toEqual(first);
    expect(await run()).not.toEqual(await run());
    await parent.release();
  });

  it("stops right after a stop string that spans several tokens, keeping it in the text", async () => {
    const t = await policy.start(prompt);
    const pieces: string[] = [];
    const r = await t.generate({
      stop: ["</intermediate_sql>"],
      maxTokens: 50,
      grammar: exactTextGrammar("abc</intermediate_sql>xyz"),
      onText: (text) => pieces.push(text),
    });
    expect(r.stopReason).toBe("stop");
    expect(r.stop).toBe("</intermediate_sql>");
    expect(r.text).toBe("abc</intermediate_sql>");
    expect(pieces.join("")).toBe(r.text);
    const spanning = r.tokens.filter((tok) => "</intermediate_sql>".includes(policy.detokenize([tok])));
    expect(spanning.length).toBeGreaterThan(1);
    expect(policy.detokenize(r.tokens.slice(0, -1))).not.toContain("</intermediate_sql>");
    await t.release();
  });

  it("ends the segment with the token that completes a stop string even when that token runs past it", async () => {
    const t = await policy.start(prompt);
    const r = await t.generate({ stop: ["ab"], maxTokens: 50, grammar: exactTextGrammar("xabcdefgh") });
    expect(r.stopReason).toBe("stop");
    expect(r.text.startsWith("xab")).toBe(true);
    expect(policy.detokenize(r.tokens.slice(0, -1))).not.toContain("ab");
    await t.release();
  });

  it("ends with eos when the model closes its turn, recording the end-of-turn token", async () => {
    const t = await policy.start(prompt);
    const r = await t.generate({ stop: ["nothing-matches"], maxTokens: 50, grammar: exactTextGrammar("SELECT 1;") });
    expect(r.stopReason).toBe("eos");
    expect(r.text).toBe("SELECT 1;");
    expect(["<|im_end|>", "<|endoftext|>"]).toContain(policy.detokenize(r.tokens.slice(-1)));
    expect(t.record.sampled.at(-1)).toBe(1);
    await t.release();
  });

  it("samples past end-of-turn tokens with ignoreEos, the same tokens and logprobs up to them, then exactly maxTokens", async () => {
    const parent = await policy.start(prompt);
    let ended: { seed: number; tokens: number[]; logprobs: number[] } | undefined;
    for (let seed = 1; seed <= 60 && !ended; seed++) {
      const child = await parent.fork();
      const r = await child.generate({ stop: [], maxTokens: 48, temperature: 4, seed });
      if (r.stopReason === "eos") ended = { seed, tokens: r.tokens, logprobs: r.logprobs };
      await child.release();
    }
    expect(ended, "some seed ends its turn within 48 tokens at temperature 4").toBeDefined();
    const child = await parent.fork();
    const r = await child.generate({ stop: [], maxTokens: ended!.tokens.length + 20, temperature: 4, seed: ended!.seed, ignoreEos: true });
    expect(r.stopReason).toBe("maxTokens");
    expect(r.tokens).toHaveLength(ended!.tokens.length + 20);
    expect(r.tokens.slice(0, ended!.tokens.length)).toEqual(ended!.tokens);
    expect(r.logprobs.slice(0, ended!.tokens.length)).toEqual(ended!.logprobs);
    expect(r.logprobs).toHaveLength(r.tokens.length);
    expect(child.record.tokens).toEqual(r.tokens);
    await child.release();
    await parent.release();
  });

  it("honours maxTokens per call and reports it", async () => {
    const t = await policy.start(prompt);
    const r = await t.generate({ stop: [], maxTokens: 5, temperature: 0.8, seed: 3 });
    expect(r.tokens).toHaveLength(5);
    expect(r.stopReason).toBe("maxTokens");
    const none = await t.generate({ stop: [], maxTokens: 0 });
    expect(none).toMatchObject({ tokens: [], stopReason: "maxTokens" });
    expect(t.usage.generatedTokens).toBe(5);
    await t.release();
  });

  it("aborts within one token", async () => {
    const t = await policy.start(prompt);
    const controller = new AbortController();
    let pieces = 0;
    const r = await t.generate({
      stop: [],
      maxTokens: 200,
      signal: controller.signal,
      onText: () => {
        if (++pieces === 3) controller.abort();
      },
    });
    expect(r.stopReason).toBe("aborted");
    expect(r.tokens.length).toBeLessThanOrEqual(4);
    const again = await t.generate({ stop: [], maxTokens: 5, signal: controller.signal });
    expect(again).toMatchObject({ tokens: [], stopReason: "aborted" });
    const after = await t.generate({ stop: [], maxTokens: 3 });
    expect(after.tokens).toHaveLength(3);
    await t.release();
  });

  it("rejects an invalid grammar with BAD_REQUEST and keeps the trajectory usable", async () => {
    const t = await policy.start(prompt);
    await expect(t.generate({ stop: [], maxTokens: 3, grammar: "root ::= (" })).rejects.toSatisfy((e) => isReexError(e, "BAD_REQUEST"));
    expect((await t.generate({ stop: [], maxTokens: 3 })).tokens).toHaveLength(3);
    await t.release();
  });
});

describe("llama policy: injected text", () => {
  it("marks appended tokens as not sampled and continues generating after them", async () => {
    const t = await policy.start(prompt);
    const first = await t.generate({
      stop: ["</intermediate_sql>"],
      maxTokens: 40,
      grammar: exactTextGrammar("<intermediate_sql>SELECT 1</intermediate_sql>"),
    });
    const evaluatedBefore = t.usage.evaluatedTokens;
    const injected = "<result> 1 | 2 <|im_end|> </result>";
    const { tokens } = await t.append(injected);
    expect(policy.detokenize(tokens)).toBe(injected);
    expect(tokens).not.toContain(policy.tokenize("<|im_end|>")[0]);
    expect(t.usage.evaluatedTokens - evaluatedBefore).toBe(tokens.length);
    const next = await t.generate({ stop: [], maxTokens: 4 });
    const n1 = first.tokens.length;
    const n2 = tokens.length;
    expect(t.record.tokens).toEqual([...first.tokens, ...tokens, ...next.tokens]);
    expect(t.record.sampled).toEqual([...Array(n1).fill(1), ...Array(n2).fill(0), 1, 1, 1, 1]);
    expect(t.record.logprobs.slice(n1, n1 + n2)).toEqual(Array(n2).fill(0));
    expect(t.usage.generatedTokens).toBe(n1 + 4);
    await t.release();
  });

  it("continues after injected text exactly as after the same tokens given in the prompt", async () => {
    const injected = "<result> 3 rows </result>";
    const b = await policy.start(prompt);
    await b.append(injected);
    const afterAppend = await b.generate({ stop: [], maxTokens: 6 });
    const whole: PromptSpec = {
      prefix: prompt.prefix,
      suffix: prompt.suffix + injected,
      parts: { prefix: prompt.parts!.prefix, suffix: [...prompt.parts!.suffix, { text: injected, special: false }] },
    };
    const a = await policy.start(whole);
    expect(a.promptTokens).toEqual([...b.promptTokens, ...b.record.tokens.slice(0, -6)]);
    const fromPrompt = await a.generate({ stop: [], maxTokens: 6 });
    expect(afterAppend.tokens).toEqual(fromPrompt.tokens);
    await a.release();
    await b.release();
  });
});

describe("llama policy: forks and the prefix cache", () => {
  it("forks without re-evaluating: the child's greedy tokens equal the parent's would-be next tokens", async () => {
    const parent = await policy.start(prompt);
    await parent.generate({ stop: [], maxTokens: 5 });
    const child = await parent.fork();
    expect(child.record).toEqual(parent.record);
    expect(child.usage).toMatchObject({ evaluatedTokens: 0, generatedTokens: 0, promptTokens: parent.usage.promptTokens });
    const fromChild = await child.generate({ stop: [], maxTokens: 8 });
    const fromParent = await parent.generate({ stop: [], maxTokens: 8 });
    expect(fromChild.tokens).toEqual(fromParent.tokens);
    expect(fromChild.logprobs).toEqual(fromParent.logprobs);
    expect(child.usage.evaluatedTokens).toBe(8);
    await child.release();
    await parent.release();
  });

  it("evaluates only the suffix when a prompt's prefix was seen before", async () => {
    const own = policy.renderChat([
      { role: "system", content: `A different database.\n${SCHEMA}\n${SCHEMA}` },
      { role: "user", content: "First question?" },
    ]);
    const first = await policy.start(own);
    expect(first.usage.evaluatedTokens).toBe(first.usage.promptTokens - 1);
    await first.release();
    const other = policy.renderChat([
      { role: "system", content: `A different database.\n${SCHEMA}\n${SCHEMA}` },
      { role: "user", content: "A second, other question?" },
    ]);
    expect(other.prefix).toBe(own.prefix);
    const second = await policy.start(other);
    expect(second.usage.evaluatedTokens).toBe(second.usage.promptTokens - policy.tokenize(other.prefix).length);
    expect(second.usage.evaluatedTokens / second.usage.promptTokens).toBeLessThanOrEqual(0.1);
    await second.release();
  });

  it("gives the same greedy output with and without the prefix cache, and under concurrent batching", async () => {
    const q = messages("Which orders are the largest?");
    const cold = await policy.start(policy.renderChat(q));
    const expected = await cold.generate({ stop: [], maxTokens: 10 });
    await cold.release();
    const runs = await Promise.all(
      [0, 1, 2].map(async () => {
        const t = await policy.start(policy.renderChat(q));
        const r = await t.generate({ stop: [], maxTokens: 10 });
        await t.release();
        return r.tokens;
      }),
    );
    for (const tokens of runs) expect(tokens).toEqual(expected.tokens);
  });

  it("counts live trajectories, refuses use after release, and releases twice safely", async () => {
    const before = policy.liveTrajectories();
    const t = await policy.start(prompt);
    const c = await t.fork();
    expect(policy.liveTrajectories()).toBe(before + 2);
    await t.release();
    await t.release();
    expect(policy.liveTrajectories()).toBe(before + 1);
    await expect(t.generate({ stop: [], maxTokens: 1 })).rejects.toSatisfy((e) => isReexError(e, "POLICY_ERROR"));
    await c.release();
    expect(policy.liveTrajectories()).toBe(before);
  });
});

describe("llama policy: sequences and the context window", () => {
  it("fails a fork with CONTEXT_EXHAUSTED when every sequence is live, and makes start wait for a free one", async () => {
    const small = await createLlamaPolicy(testPolicyOptions({ sequences: 2 }));
    try {
      const a = await small.start(prompt);
      const b = await a.fork();
      await expect(b.fork()).rejects.toSatisfy((e) => isReexError(e, "CONTEXT_EXHAUSTED"));
      const controller = new AbortController();
      const cancelled = small.start(prompt, { signal: controller.signal });
      controller.abort();
      await expect(cancelled).rejects.toSatisfy((e) => isReexError(e, "CANCELLED"));
      let started = false;
      const waiting = small.start(prompt).then((t) => {
        started = true;
        return t;
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(started).toBe(false);
      await b.release();
      const c = await waiting;
      expect((await c.generate({ stop: [], maxTokens: 3 })).tokens).toHaveLength(3);
      await Promise.all([a.release(), c.release()]);
    } finally {
      await small.close();
    }
  });

  it("evicts cached prefixes when trajectories need their sequences", async () => {
    const small = await createLlamaPolicy(testPolicyOptions({ sequences: 2, maxCachedPrefixes: 2 }));
    try {
      const p1 = small.renderChat([
        { role: "system", content: `db one\n${SCHEMA}` },
        { role: "user", content: "q1" },
      ]);
      const p2 = small.renderChat([
        { role: "system", content: `db two\n${SCHEMA}` },
        { role: "user", content: "q2" },
      ]);
      const a = await small.start(p1);
      const b = await small.start(p2);
      expect(small.liveTrajectories()).toBe(2);
      await Promise.all([a.release(), b.release()]);
    } finally {
      await small.close();
    }
  });

  it("ends generation with maxTokens at the end of the context window and refuses prompts and appends that overflow", async () => {
    const small = await createLlamaPolicy(testPolicyOptions({ sequences: 1, contextSize: 256 }));
    try {
      const long = "word ".repeat(400);
      await expect(small.start({ prefix: "", suffix: long })).rejects.toSatisfy((e) => isReexError(e, "CONTEXT_EXHAUSTED"));
      const t = await small.start({ prefix: "", suffix: "SELECT" });
      const r = await t.generate({ stop: [], maxTokens: 1000 });
      expect(r.stopReason).toBe("maxTokens");
      expect(t.promptTokens.length + r.tokens.length).toBe(small.info.contextSize);
      await expect(t.append("more text")).rejects.toSatisfy((e) => isReexError(e, "CONTEXT_EXHAUSTED"));
      await t.release();
    } finally {
      await small.close();
    }
  });
});

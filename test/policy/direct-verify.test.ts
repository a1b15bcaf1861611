/**
 * How the direct decode step verifies a draft (src/policy/direct-decode.ts): greedy sampling without a
 * grammar keeps no state between draws, so every drafted position is sampled at once, each with its
 * own native sampler; sampling at a temperature draws one position after another from one sampler
 * (its random draws must come in plain decoding's order). Counted on the native context's
 * `sampleToken` of the starter model.
 */
import { fileURLToPath } from "node:url";
import { getLlama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DirectSamplingOptions, directSampling, enableDirectDecode } from "../../src/policy/direct-decode.js";
import { enableScheduledKvOps } from "../../src/policy/kv-schedule.js";

const STARTER = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const TEXT =
  "<think>Goal: count customers live in Germany. Tables: customers. First check how customers.country stores Germany.</think>\n" +
  "<intermediate_sql>SELECT COUNT(*) FROM customers WHERE country = 'DE'</intermediate_sql><result>\nCOUNT(*)\n0\n</result>\n" +
  "<think>No rows.</think>\n<final_sql>SELECT COUNT(*) FROM customers WHERE";

let model: LlamaModel;
let context: LlamaContext;
/** The native sample calls in flight now, and the most seen at once since the last reset. */
const inFlight = { now: 0, most: 0, calls: 0 };

beforeAll(async () => {
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" as never });
  model = await llama.loadModel({ modelPath: STARTER });
  context = await model.createContext({ contextSize: 1024, sequences: 2, threads: 1, flashAttention: false });
  expect(await enableScheduledKvOps(context)).toBe(true);
  expect(enableDirectDecode(context, () => 1)).toBe(true);
  const native = (context as unknown as { _ctx: { sampleToken: (...args: unknown[]) => Promise<unknown> } })._ctx;
  const sampleToken = native.sampleToken;
  Object.defineProperty(native, "sampleToken", {
    configurable: true,
    value: async (...args: unknown[]) => {
      inFlight.now++;
      inFlight.calls++;
      inFlight.most = Math.max(inFlight.most, inFlight.now);
      try {
        return await sampleToken.apply(native, args);
      } finally {
        inFlight.now--;
      }
    },
  });
});

afterAll(async () => {
  await context?.dispose();
  await model?.dispose();
});

/** Evaluates TEXT but its last token on a fresh sequence, then one direct step from that token with `draft`. */
async function step(options: Partial<DirectSamplingOptions>, draft: number[]) {
  const tokens = model.tokenize(TEXT) as Token[];
  const seq = context.getSequence();
  try {
    await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, -1));
    const sampling = directSampling(seq, { temperature: 0, topK: 0, topP: 1, seed: 3, confidence: false, ...options })!;
    expect(sampling).toBeDefined();
    Object.assign(inFlight, { now: 0, most: 0, calls: 0 });
    try {
      const out = await sampling.next(tokens.at(-1)!, { tokens: draft });
      return { out, most: inFlight.most, calls: inFlight.calls };
    } finally {
      sampling.dispose();
    }
  } finally {
    seq.dispose();
  }
}

describe("direct decode step: verifying a draft", () => {
  it("samples every position of a greedy draft at once, and keeps what one-at-a-time sampling keeps", async () => {
    const first = await step({}, []);
    expect(first.calls).toBe(1);
    const next = first.out.tokens[0]!.token!;
    // a draft whose first token is the model's own choice and whose later ones it does not write
    const draft = [next, 0, 0, 0];
    const greedy = await step({}, draft);
    expect(greedy.calls).toBe(draft.length + 1);
    expect(greedy.most).toBe(draft.length + 1);
    expect(greedy.out.tokens[0]!.token).toBe(next);
    expect(greedy.out.accepted).toBe(1);
    expect(greedy.out.tokens).toHaveLength(2);
    // with probabilities asked for, too
    const withConfidence = await step({ confidence: true }, draft);
    expect(withConfidence.most).toBe(draft.length + 1);
    expect(withConfidence.out.tokens.map((t) => t.token)).toEqual(greedy.out.tokens.map((t) => t.token));
    expect(withConfidence.out.tokens[0]!.confidence).toBeGreaterThan(0);
  });

  it("samples a draft at a temperature one position after another, stopping at the first token sampled otherwise", async () => {
    const sampled = await step({ temperature: 1, seed: 5 }, [0, 0, 0, 0]);
    expect(sampled.most).toBe(1);
    // token 0 is never the model's choice here, so the first sample ends the step
    expect(sampled.calls).toBe(1);
    expect(sampled.out.accepted).toBe(0);
  });
});

/**
 * Trajectories generating on one context together have their next tokens decoded in one batch a
 * step (src/policy/steps.ts and the direct decode path in src/policy/direct-decode.ts), where
 * node-llama-cpp's evaluate alone decoded a late sequence in a batch of its own: counted through the
 * policy's decode batches on the real runtime.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy, type Policy, type PromptSpec } from "../../src/policy/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const STEPS = 40;

let shared: Policy;
let prompt: PromptSpec;

beforeAll(async () => {
  await ensureTestModel();
  shared = await createLlamaPolicy(testPolicyOptions({ sequences: 12 }));
  prompt = shared.renderChat([
    { role: "system", content: "You are an experienced database expert." },
    { role: "user", content: "How many orders are there?" },
  ]);
});

afterAll(async () => {
  await shared?.close();
});

/** Decode batches `width` forks of one prompt take to generate `STEPS` tokens each, together. */
async function batchesFor(width: number, policy: Policy = shared): Promise<{ batches: number; tokens: number }> {
  const root = await policy.start(prompt);
  const forks = await Promise.all(Array.from({ length: width }, () => root.fork()));
  const before = policy.decodeBatches!()!;
  const results = await Promise.all(
    forks.map((t, i) => t.generate({ stop: [], maxTokens: STEPS, temperature: 1, seed: 7 + i, ignoreEos: true, logprobs: false })),
  );
  const batches = policy.decodeBatches!()! - before;
  await Promise.all([...forks, root].map((t) => t.release()));
  return { batches, tokens: results.reduce((n, r) => n + r.tokens.length, 0) };
}

describe("batched generation", () => {
  it("counts the context's decode batches", async () => {
    expect(shared.decodeBatches?.()).toBeTypeOf("number");
    const one = await batchesFor(1);
    expect(one.tokens).toBe(STEPS);
    expect(one.batches).toBe(STEPS);
  });

  it.each([2, 4, 8])("decodes the next tokens of %i trajectories generating together in one batch a step", async (width) => {
    const run = await batchesFor(width);
    expect(run.tokens).toBe(width * STEPS);
    // one batch a step; the forks' first steps may reach node-llama-cpp a batch apart
    expect(run.batches).toBeLessThanOrEqual(STEPS + 1);
  });

  it("leaves steps unaligned with alignSteps: false, where node-llama-cpp's evaluate splits them", async () => {
    const unaligned = await createLlamaPolicy(testPolicyOptions({ sequences: 4, alignSteps: false, directDecode: false }));
    try {
      const run = await batchesFor(2, unaligned);
      expect(run.tokens).toBe(2 * STEPS);
      expect(run.batches).toBeGreaterThan(STEPS + 1);
    } finally {
      await unaligned.close();
    }
  });

  it("batches unaligned steps all the same on the direct decode path, which collects a step's requests until the event loop turns", async () => {
    const unaligned = await createLlamaPolicy(testPolicyOptions({ sequences: 4, alignSteps: false }));
    try {
      const run = await batchesFor(2, unaligned);
      expect(run.tokens).toBe(2 * STEPS);
      expect(run.batches).toBeLessThanOrEqual(STEPS + 1);
    } finally {
      await unaligned.close();
    }
  });
});

/** `Trajectory.rewind` on llama.cpp: the KV state and the record go back, and decoding goes on as if the dropped tokens had never been written. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { createLlamaPolicy, type Policy, type PromptSpec } from "../../src/policy/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

let policy: Policy;
let prompt: PromptSpec;

beforeAll(async () => {
  await ensureTestModel();
  policy = await createLlamaPolicy(testPolicyOptions({ sequences: 4 }));
  prompt = policy.renderChat([
    { role: "system", content: "You are an experienced database expert." },
    { role: "user", content: "How many orders are there?" },
  ]);
});

afterAll(async () => {
  await policy?.close();
});

describe("llama policy: rewind", () => {
  it("continues after a rewind exactly as a trajectory that never wrote the dropped tokens", async () => {
    const reference = await policy.start(prompt);
    const head = await reference.generate({ stop: [], maxTokens: 6 });
    const tail = await reference.generate({ stop: [], maxTokens: 8 });

    const t = await policy.start(prompt);
    await t.generate({ stop: [], maxTokens: 6 });
    await t.append(" <result>\nsomething else entirely\n</result>");
    await t.generate({ stop: [], maxTokens: 5 });
    await t.rewind!(6);
    expect(t.record.tokens).toEqual(head.tokens);
    expect(t.record.sampled).toEqual(head.tokens.map(() => 1));
    const again = await t.generate({ stop: [], maxTokens: 8 });
    expect(again.tokens).toEqual(tail.tokens);
    expect(again.logprobs[0]).toBeCloseTo(tail.logprobs[0]!, 4);
    await reference.release();
    await t.release();
  });

  it("rewinds into appended text and to the prompt, and a fork after a rewind starts from the rewound state", async () => {
    const reference = await policy.start(prompt);
    await reference.append("<think>");
    const afterThink = await reference.generate({ stop: [], maxTokens: 6 });
    const fresh = await reference.fork();
    await fresh.rewind!(0);
    const fromPrompt = await fresh.generate({ stop: [], maxTokens: 4 });

    const t = await policy.start(prompt);
    const opened = await t.append("<think> and some more text");
    await t.rewind!(policy.tokenize("<think>").length);
    expect(opened.tokens.length).toBeGreaterThan(t.record.tokens.length);
    const child = await t.fork();
    expect((await child.generate({ stop: [], maxTokens: 6 })).tokens).toEqual(afterThink.tokens);
    await t.rewind!(0);
    expect((await t.generate({ stop: [], maxTokens: 4 })).tokens).toEqual(fromPrompt.tokens);
    for (const x of [reference, fresh, t, child]) await x.release();
  });

  it("refuses a length past the record", async () => {
    const t = await policy.start(prompt);
    await t.generate({ stop: [], maxTokens: 3 });
    const err = await t.rewind!(4).catch((e: unknown) => e);
    expect(isReexError(err) && err.code).toBe("INTERNAL");
    expect(t.record.tokens).toHaveLength(3);
    await t.release();
  });
});

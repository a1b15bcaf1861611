/**
 * KV copies (forks, prefix-cache hits) and sequence frees while other trajectories keep the context
 * busy: they run between decode batches (src/policy/kv-schedule.ts) instead of waiting for
 * node-llama-cpp's dispatch loop to go idle, and cancelling frees sequences promptly.
 */
import { getLlama, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { beginSequenceCopy, copySequenceState, enableScheduledKvOps, withContextLock } from "../../src/policy/kv-schedule.js";
import { createLlamaPolicy, type Policy, type PromptSpec, type Trajectory } from "../../src/policy/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const SCHEMA = Array.from({ length: 12 }, (_, i) => `orders.col${i} (INTEGER | values : ${i}, ${i * 7}, ${i * 13})`).join("\n");
const PROMPT_MESSAGES = [
  { role: "system" as const, content: `You are an experienced database expert.\n${SCHEMA}` },
  { role: "user" as const, content: "How many orders are there?" },
];

/** The test's bound on a fork, a cancel or a release while other trajectories generate. */
const PROMPT_MS = 200;

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `n` trajectories forked off `base` that generate (up to ~1500 tokens each) until `stop()`. */
async function busy(base: Trajectory, n: number): Promise<{ trajectories: Trajectory[]; active: () => boolean; stop: () => Promise<void> }> {
  const controller = new AbortController();
  const trajectories: Trajectory[] = [];
  for (let i = 0; i < n; i++) trajectories.push(await base.fork());
  let tokens = 0;
  const runs = trajectories.map((t, i) =>
    t.generate({ stop: [], maxTokens: 1500, temperature: 1, seed: 100 + i, signal: controller.signal, onText: () => void tokens++ }),
  );
  let finished = 0;
  for (const run of runs)
    run.then(
      () => void finished++,
      () => void finished++,
    );
  // Wait until the background is really generating.
  while (tokens < 3 * n) await sleep(5);
  return {
    trajectories,
    /** Whether every background trajectory is still generating (so the measurements saw a busy context). */
    active: () => finished === 0,
    stop: async () => {
      controller.abort();
      await Promise.all(runs);
      await Promise.all(trajectories.map((t) => t.release()));
    },
  };
}

describe("scheduled KV operations (node-llama-cpp internals)", () => {
  it("share node-llama-cpp's context lock, copy exactly, and run between batches of a busy context", async () => {
    const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" as never });
    const model = await llama.loadModel({ modelPath: await ensureTestModel() });
    const context = await model.createContext({ contextSize: 512, sequences: 6, threads: 1, flashAttention: false });
    try {
      expect(await enableScheduledKvOps(context)).toBe(true);
      const tokens = model.tokenize("SELECT COUNT(*) FROM orders WHERE status = 'shipped' AND total > 100") as Token[];
      const source = context.getSequence();
      await source.evaluateWithoutGeneratingNewTokens(tokens);

      // The lock is node-llama-cpp's: its own locked operations wait for ours, and so does a queued copy.
      const spare = context.getSequence();
      const target = context.getSequence();
      let cleared = false;
      let copied: Promise<boolean> | undefined;
      const held = await withContextLock(context, async () => {
        const clearing = spare.clearHistory().then(() => void (cleared = true));
        copied = copySequenceState(target, source);
        for (let i = 0; i < 5; i++) await tick();
        return { clearedMeanwhile: cleared, clearing };
      });
      expect(held.ran).toBe(true);
      if (!held.ran) return;
      expect(held.value.clearedMeanwhile).toBe(false);
      await held.value.clearing;
      expect(await copied).toBe(true);
      expect(target.contextTokens).toEqual(tokens);

      // Copies made while three other sequences keep the dispatch loop running finish promptly and exactly.
      const reference = context.getSequence();
      await reference.evaluateWithoutGeneratingNewTokens(tokens.slice(0, -1));
      const probe = async (seq: typeof source): Promise<number[]> => {
        const out: number[] = [];
        for await (const t of seq.evaluate([tokens.at(-1)!], { temperature: 0 })) {
          out.push(t);
          if (out.length === 6) break;
        }
        return out;
      };
      const expected = await probe(reference);
      await reference.clearHistory();
      await reference.evaluateWithoutGeneratingNewTokens(tokens.slice(0, -1));

      const background = [source, spare, target];
      let running = true;
      const loops = background.map(async (seq, i) => {
        let n = 0;
        for await (const _ of seq.evaluate([tokens[i]!], { temperature: 1, seed: i + 1 })) {
          if (!running || ++n > 400) break;
        }
      });
      await sleep(30);
      const fork = context.getSequence();
      const started = performance.now();
      const copy = beginSequenceCopy(fork, reference);
      expect(copy.ordered).toBe(true);
      expect(fork.contextTokens).toEqual(tokens.slice(0, -1));
      expect(await copy.done).toBe(true);
      const took = performance.now() - started;
      const released = performance.now();
      await reference.dispose();
      const releaseTook = performance.now() - released;
      expect(await probe(fork)).toEqual(expected);
      running = false;
      await Promise.all(loops);
      expect(took).toBeLessThan(PROMPT_MS);
      expect(releaseTook).toBeLessThan(PROMPT_MS);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  });
});

describe("scheduled KV copy: a source whose cache no longer matches its token history", () => {
  it("reports the copy as not done and leaves the target empty and usable", async () => {
    const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" as never });
    const model = await llama.loadModel({ modelPath: await ensureTestModel() });
    const context = await model.createContext({ contextSize: 512, sequences: 3, threads: 1, flashAttention: false, batchSize: 8 });
    try {
      expect(await enableScheduledKvOps(context)).toBe(true);
      const head = model.tokenize("SELECT name FROM customers") as Token[];
      const more = model.tokenize(" WHERE id IN (SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) > 2) ORDER BY name") as Token[];
      const source = context.getSequence();
      await source.evaluateWithoutGeneratingNewTokens(head);
      // Mid-evaluation (batches of 8), the source's cache holds more than its token history says.
      const before = source.tokenMeter.usedInputTokens;
      const evaluating = source.evaluateWithoutGeneratingNewTokens(more);
      while (source.tokenMeter.usedInputTokens < before + 8) await tick();
      await tick();
      const target = context.getSequence();
      const copy = beginSequenceCopy(target, source);
      expect(await copy.done).toBe(false);
      expect(target.contextTokens).toEqual([]);
      expect(target.nextTokenIndex).toBe(0);
      await evaluating;
      await target.evaluateWithoutGeneratingNewTokens([...head, ...more]);
      expect(target.contextTokens).toEqual(source.contextTokens);
    } finally {
      await context.dispose();
      await model.dispose();
    }
  });
});

describe("llama policy under load", () => {
  let policy: Policy;
  let prompt: PromptSpec;

  beforeAll(async () => {
    await ensureTestModel();
    policy = await createLlamaPolicy(testPolicyOptions({ sequences: 12 }));
    prompt = policy.renderChat(PROMPT_MESSAGES);
  });

  afterAll(async () => {
    await policy?.close();
  });

  it("forks promptly while other trajectories generate, and the children continue exactly", async () => {
    const parent = await policy.start(prompt);
    await parent.generate({ stop: [], maxTokens: 5 });
    const ref = await parent.fork();
    const expected = await ref.generate({ stop: [], maxTokens: 8 });
    await ref.release();

    const base = await policy.start(prompt);
    const background = await busy(base, 3);
    try {
      const times: number[] = [];
      const children: Trajectory[] = [];
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        children.push(await parent.fork());
        times.push(performance.now() - t0);
      }
      // The parent goes on at once; its children still start from the state it had when forking.
      const fromParent = parent.generate({ stop: [], maxTokens: 8 });
      const fromChildren = await Promise.all(children.map((c) => c.generate({ stop: [], maxTokens: 8 })));
      expect((await fromParent).tokens).toEqual(expected.tokens);
      try {
        for (const r of fromChildren) {
          expect(r.tokens).toEqual(expected.tokens);
          // Batched with other sequences, llama.cpp's float sums may differ in the last digits.
          r.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(expected.logprobs[i]!, 4));
        }
        for (const c of children) expect(c.usage.evaluatedTokens).toBe(8);
        for (const ms of times) expect(ms).toBeLessThan(PROMPT_MS);
        expect(background.active()).toBe(true);
      } finally {
        await Promise.all(children.map((c) => c.release()));
      }
    } finally {
      await background.stop();
      await base.release();
      await parent.release();
    }
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("a cancel while another decode is generating returns within 200 ms and frees every sequence", async () => {
    const base = await policy.start(prompt);
    const background = await busy(base, 3);
    const live = policy.liveTrajectories();
    let cancelMs = Number.NaN;
    try {
      const controller = new AbortController();
      const signal = controller.signal;
      const root = await policy.start(prompt, { signal });
      const a = await root.fork();
      const b = await root.fork();
      const runs = [root, a, b].map((t) => t.generate({ stop: [], maxTokens: 1500, temperature: 1, signal }));
      // A fork waits behind `a`'s generate call; the cancel must not be held up by it either.
      const forking = a.fork();
      await sleep(50);
      const t0 = performance.now();
      controller.abort();
      const results = await Promise.all(runs);
      const child = await forking;
      await Promise.all([root.release(), a.release(), b.release(), child.release()]);
      cancelMs = performance.now() - t0;
      // sampling at T=1 may end a run on its own end-of-text token before the cancel arrives
      for (const r of results) expect(["aborted", "eos"]).toContain(r.stopReason);
      expect(results.some((r) => r.stopReason === "aborted")).toBe(true);
      expect(policy.liveTrajectories()).toBe(live);
      expect(background.active()).toBe(true);
    } finally {
      await background.stop();
      await base.release();
    }
    expect(policy.liveTrajectories()).toBe(0);
    expect(cancelMs).toBeLessThan(PROMPT_MS);
    // Every sequence is free again: as many trajectories as the context holds start without waiting.
    const all = await Promise.all(Array.from({ length: policy.info.maxSequences }, () => policy.start(prompt)));
    expect(policy.liveTrajectories()).toBe(policy.info.maxSequences);
    await Promise.all(all.map((t) => t.release()));
    expect(policy.liveTrajectories()).toBe(0);
  });
});

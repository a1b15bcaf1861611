/**
 * A decode step of many generating trajectories reaches llama.cpp as one ubatch. With one KV stream
 * per sequence (node-llama-cpp's layout), llama.cpp splits a batch into several ubatches (several
 * graph computations, each reading the weights again) unless its sequence ids run consecutively
 * upwards in batch order. Observed through llama.cpp's own batch log (LLAMA_BATCH_DEBUG), read
 * when the context is created.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLlamaPolicy, type Policy, type PromptSpec, type Trajectory } from "../../src/policy/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

let policy: Policy;
let prompt: PromptSpec;
const log: string[] = [];

beforeAll(async () => {
  await ensureTestModel();
  process.env.LLAMA_BATCH_DEBUG = "1";
  try {
    // the root, its cached prompt prefix and 8 forks: every sequence taken
    policy = await createLlamaPolicy(testPolicyOptions({ sequences: 10, logLevel: "debug", logger: (_level, message) => log.push(message) }));
  } finally {
    delete process.env.LLAMA_BATCH_DEBUG;
  }
  prompt = policy.renderChat([{ role: "user", content: "How many customers are there?" }]);
});

afterAll(async () => {
  await policy?.close();
});

/** The sequence ids of each generation ubatch (one token per sequence) llama.cpp decoded while `run` ran. */
async function ubatches(run: () => Promise<unknown>): Promise<number[][]> {
  log.length = 0;
  await run();
  const out: number[][] = [];
  let added = false;
  let tokens = 0;
  for (const line of log) {
    if (line.includes("added ubatch")) added = true;
    else if (added && /n_tokens\s*=/.test(line)) tokens = Number(line.split("=")[1]);
    else if (added && line.includes("seq_id_unq")) {
      const ids = (line.match(/\[([^\]]*)\]/)?.[1] ?? "").trim().split(/\s+/).map(Number);
      // prompt evaluation (a cached prefix filled meanwhile) is not a generation step
      if (tokens === ids.length) out.push(ids);
      added = false;
    }
  }
  return out;
}

const generateAll = (forks: Trajectory[], maxTokens: number): Promise<unknown> =>
  Promise.all(forks.map((f, i) => f.generate({ stop: [], maxTokens, temperature: 1, seed: i + 1, ignoreEos: true })));

const consecutive = (ids: number[]): boolean => ids.every((id, i) => i === 0 || id === ids[i - 1]! + 1);

it("decodes each step of 8 forks generating together as one ubatch of 8 consecutive sequences, from the first step", async () => {
  const root = await policy.start(prompt);
  const forks: Trajectory[] = [];
  try {
    for (let i = 0; i < 8; i++) forks.push(await root.fork());
    const seen = await ubatches(() => generateAll(forks, 8));
    expect(seen).toHaveLength(8);
    expect(seen[0]).toHaveLength(8);
    expect(consecutive(seen[0]!)).toBe(true);
    for (const ids of seen) expect(ids).toEqual(seen[0]);
  } finally {
    await Promise.all(forks.map((f) => f.release()));
    await root.release();
  }
});

it("gives a fork made after releases the lowest free sequence above its parent, so the generating ones stay consecutive", async () => {
  const root = await policy.start(prompt);
  let forks: Trajectory[] = [];
  try {
    for (let i = 0; i < 8; i++) forks.push(await root.fork());
    const before = [...new Set((await ubatches(() => generateAll(forks, 2))).flat())];
    expect(before).toHaveLength(8);
    // free the highest sequence, then the second lowest: a first-freed-first-used pool would hand out the highest
    await forks[7]!.release();
    await forks[1]!.release();
    forks = [forks[0]!, ...forks.slice(2, 7), await root.fork()];
    const seen = await ubatches(() => generateAll(forks, 4));
    expect(seen.filter((ids) => ids.length === 7).length).toBeGreaterThanOrEqual(2);
    for (const ids of seen) {
      expect(consecutive(ids)).toBe(true);
      expect(Math.max(...ids)).toBeLessThan(Math.max(...before));
    }
  } finally {
    await Promise.all(forks.map((f) => f.release()));
    await root.release();
  }
});

it("gives forks the free sequences just above their parent's, so siblings stay consecutive", async () => {
  // a trajectory released below the root leaves a free id there; the root's forks go above the root
  const below = await policy.start(prompt);
  const root = await policy.start(prompt);
  await below.release();
  const forks: Trajectory[] = [];
  try {
    for (let i = 0; i < 7; i++) forks.push(await root.fork());
    const seen = await ubatches(() => generateAll(forks, 4));
    expect(seen).toHaveLength(4);
    for (const ids of seen) {
      expect(ids).toHaveLength(7);
      expect(consecutive(ids)).toBe(true);
    }
  } finally {
    await Promise.all(forks.map((f) => f.release()));
    await root.release();
  }
});

/**
 * Speculative decoding (`speculative: "ngram"`): drafted tokens are verified in the decode step and
 * change nothing the model writes. Greedy rollouts of the starter and of a real-vocabulary GGUF
 * under a scripted grammar are token for token those of plain decoding; seeded sampling draws the
 * same tokens, and unseeded-alike runs have the same token frequencies; a draft never runs past a
 * stop string the caller must see.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { getLlama, type LlamaContext, type LlamaModel, type Token } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPrompt, PROFILES, type RolloutOptions, rollout, type SegmentGrammars, OWN_ANSWERS, resolveRolloutOptions } from "../../src/agent/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { createLlamaPolicy, type Policy, type PromptSpec, type Trajectory } from "../../src/policy/index.js";
import { exactTextGrammar, type StartOptions } from "../../src/policy/testing.js";
import { ExecutorPool, loadSchema, schemaPrompt } from "../../src/sql/index.js";
import type { ReexEvent } from "../../src/events/index.js";
import { buildRealModel } from "../helpers/real-models.js";
import { chiSquare, chiSquareQuantile } from "../helpers/stats.js";

const STARTER = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const options = { gpu: "cpu" as const, contextSize: 2048, sequences: 6, threads: 1 };
/** A line of the example retail database's schema section, as the prompt spells it. */
const SCHEMA_LINE =
  "table products , columns = [ products.product_id ( integer | primary key | values : 1 , 2 , 3 ) , products.sku ( text | values : SKU-00001 , SKU-00002 , SKU-00003 )";

/** The start of a rollout for "How many customers live in Germany?" that ends inside a final SQL repeating its probe. */
const COPY_CONTEXT =
  "<think>Goal: count customers live in Germany. Tables: customers. First check how customers.country stores Germany.</think>\n" +
  "<intermediate_sql>SELECT COUNT(*) FROM customers WHERE country = 'DE'</intermediate_sql><result>\nCOUNT(*)\n0\n</result>\n" +
  "<think>No rows.</think>\n<final_sql>SELECT COUNT(*) FROM customers WHERE";

let executor: ExecutorPool;

beforeAll(() => {
  executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await executor?.close();
  await odds?.context.dispose();
  await odds?.model.dispose();
});

/** Sums the drafting counters of trajectories' usage. */
function drafted(ts: { usage: Trajectory["usage"] }[]): { drafted: number; accepted: number; saved: number } {
  return ts.reduce(
    (s, t) => ({
      drafted: s.drafted + (t.usage.draftedTokens ?? 0),
      accepted: s.accepted + (t.usage.acceptedTokens ?? 0),
      saved: s.saved + (t.usage.forwardPassesSaved ?? 0),
    }),
    { drafted: 0, accepted: 0, saved: 0 },
  );
}

let odds: { model: LlamaModel; context: LlamaContext } | undefined;

/** Plain decoding's probabilities of tokens `a` and `b` after `history` (node-llama-cpp alone, one token at a time). */
async function nextTokenOdds(history: readonly number[], a: number, b: number): Promise<[number, number]> {
  const p = await nextTokenProbabilities(history);
  return [p.get(a as Token) ?? 0, p.get(b as Token) ?? 0];
}

/** Plain decoding's next-token probabilities after `history`. */
async function nextTokenProbabilities(history: readonly number[]): Promise<Map<Token, number>> {
  if (!odds) {
    const model = await (await getLlama({ gpu: false, build: "never" })).loadModel({ modelPath: STARTER });
    odds = { model, context: await model.createContext({ contextSize: 2048, sequences: 1, threads: 1, flashAttention: false }) };
  }
  const seq = odds.context.getSequence();
  try {
    await seq.evaluateWithoutGeneratingNewTokens(history.slice(0, -1) as Token[]);
    const steps = seq.evaluateWithMetadata([history.at(-1)! as Token], { probabilities: true }, { temperature: 0 });
    const first = (await steps.next()).value as { probabilities: Map<Token, number> };
    await steps.return();
    return first.probabilities;
  } finally {
    seq.dispose();
  }
}

/**
 * Asserts that a drafting rollout wrote what plain decoding wrote, token for token, or up to a
 * token where plain decoding's two choices are a near tie (within 0.05 in probability): llama.cpp
 * computes a token's logits in a batch of several with other kernels and summation orders than
 * alone, and a tie can then go the other way (docs/decoding.md, "Speculative decoding"). A rejected draft left
 * in the KV cache, or any other change to what the model sees, moves far more than that.
 */
async function expectPlainGreedy(
  prompt: readonly number[],
  a: { tokens: number[]; sampled: number[] },
  b: { tokens: number[]; sampled: number[] },
): Promise<"identical" | "tie"> {
  let i = 0;
  while (i < a.tokens.length && a.tokens[i] === b.tokens[i] && a.sampled[i] === b.sampled[i]) i++;
  if (i === a.tokens.length && i === b.tokens.length) return "identical";
  if (i < a.tokens.length && i < b.tokens.length && a.sampled[i] !== b.sampled[i]) {
    // one model wrote here what the other's rollout appended after rewinding its failed final SQL (the same text as a
    // probe): the two models chose differently at this token, which has to be a near tie too
    const s = a.sampled[i] ? a : b;
    const p = await nextTokenProbabilities([...prompt, ...a.tokens.slice(0, i)]);
    const top = Math.max(...p.values());
    const ps = p.get(s.tokens[i]! as Token) ?? 0;
    expect(top - ps, `token ${i}: ${s.tokens[i]} (p ${ps}) written by one, appended by the other; plain decoding's top p ${top}`).toBeLessThan(0.05);
    return "tie";
  }
  // both models wrote this token (or one of them stopped here): their choices must be a near tie
  expect(b.sampled[i]).toBe(a.sampled[i]);
  const [pa, pb] = await nextTokenOdds([...prompt, ...a.tokens.slice(0, i)], a.tokens[i]!, b.tokens[i]!);
  expect(Math.abs(pa - pb), `token ${i}: plain decoding's ${a.tokens[i]} (p ${pa}) against ${b.tokens[i]} (p ${pb})`).toBeLessThan(0.05);
  return "tie";
}

describe("speculative decoding on the starter", () => {
  let plain: Policy;
  /** Drafts sized with assumed step costs, so that how much is drafted depends on the tokens alone. */
  let spec: Policy;
  /** Drafts sized with the step costs as timed on this machine (the default). */
  let measured: Policy;
  let dbPath: string;
  let prompts: PromptSpec[];

  beforeAll(async () => {
    plain = await createLlamaPolicy({ ...options, model: STARTER });
    spec = await createLlamaPolicy({ ...options, model: STARTER, speculative: "ngram", draftCosts: "assumed" });
    measured = await createLlamaPolicy({ ...options, model: STARTER, speculative: "ngram" });
    const set = (await buildExamples())[0]!;
    dbPath = set.path;
    const schema = schemaPrompt(loadSchema(set.path)).text;
    prompts = set.questions.slice(0, 3).map((q) => {
      const built = buildPrompt({ family: "execution-aware", schema, question: q.question, evidence: q.evidence });
      return plain.renderChat(built.messages, { sharedPrefix: built.sharedPrefix });
    });
  });

  afterAll(async () => {
    await plain?.close();
    await spec?.close();
    await measured?.close();
  });

  /** A greedy rollout of example question `i` on `policy`, with the trajectory's usage after it. */
  const greedyRollout = async (policy: Policy, i: number, options: Partial<RolloutOptions> = {}, start: StartOptions = {}) => {
    const t = await policy.start(prompts[i]!, start);
    try {
      const r = await rollout(
        t,
        resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, maxTokens: 200, temperature: 0, path: String(i), maxInteractions: 4, ...options }),
      );
      return { prompt: t.promptTokens, record: r.record, text: r.text, usage: t.usage };
    } finally {
      await t.release();
    }
  };

  it("writes greedy rollouts (probes and injected results included) token for token as plain decoding, with drafts accepted", async () => {
    const counts = [];
    for (const i of prompts.keys()) {
      const a = await greedyRollout(plain, i);
      const b = await greedyRollout(spec, i);
      const m = await greedyRollout(measured, i);
      const same = await expectPlainGreedy(a.prompt, a.record, b.record);
      // with measured step costs how much is drafted depends on the machine's timings; what is written does not
      await expectPlainGreedy(a.prompt, a.record, m.record);
      if (same === "identical") expect(b.text).toBe(a.text);
      // a token's logits computed in a batch of several differ from a lone token's (llama.cpp's
      // batched matrix kernels): by up to 0.04 in log-probability with drafts of up to 9 tokens on v3.1,
      // 0.07 on v3.2; a logit read off the wrong position differs by whole nats
      for (let j = 0; j < a.record.tokens.length && b.record.tokens[j] === a.record.tokens[j]; j++)
        expect(Math.abs(b.record.logprobs[j]! - a.record.logprobs[j]!)).toBeLessThan(0.1);
      expect(a.usage.draftedTokens).toBeUndefined();
      counts.push(b);
    }
    const total = drafted(counts);
    expect(total.accepted).toBeGreaterThan(0);
    expect(total.saved).toBeGreaterThan(0);
    expect(total.accepted).toBeLessThanOrEqual(total.drafted);
    // the decode step timed its steps by size, drafted ones (wider than one token) among them
    const costs = spec.decodeStepCosts?.() ?? [];
    expect(costs[0]).toMatchObject({ tokens: 1 });
    expect(costs.some((c) => c.tokens > 1)).toBe(true);
    expect(costs.map((c) => c.tokens)).toEqual([...costs.map((c) => c.tokens)].sort((x, y) => x - y));
    for (const c of costs) expect(c.ms > 0 && c.steps > 0).toBe(true);
  });

  it("drafts from an earlier answer on the same schema, unless that one was started not to be remembered, and writes what plain decoding writes", async () => {
    const make = (draftHistory?: number) =>
      createLlamaPolicy({ ...options, model: STARTER, speculative: "ngram", draftCosts: "assumed", ...(draftHistory !== undefined ? { draftHistory } : {}) });
    const [remembering, forgetting, without] = await Promise.all([make(), make(), make(0)]);
    try {
      const a = await greedyRollout(plain, 1);
      // each policy answers once, then the same question again; drafts are sized on assumed costs, so they depend on the tokens alone
      await greedyRollout(remembering, 1);
      await greedyRollout(forgetting, 1, {}, { remember: false });
      await greedyRollout(without, 1);
      const again = await greedyRollout(remembering, 1);
      const forgotten = await greedyRollout(forgetting, 1);
      const alone = await greedyRollout(without, 1);
      for (const b of [again, forgotten, alone]) await expectPlainGreedy(a.prompt, a.record, b.record);
      // nothing was kept of a run started with remember: false
      expect(forgotten.usage).toEqual(alone.usage);
      // the remembered answer is drafted from: most of the second one's tokens come from accepted drafts
      expect(again.usage.acceptedTokens!).toBeGreaterThan(alone.usage.acceptedTokens! + 20);
      expect(again.usage.acceptedTokens!).toBeGreaterThan(again.usage.generatedTokens / 2);
    } finally {
      await Promise.all([remembering.close(), forgetting.close(), without.close()]);
    }
  });

  it("with a fixed step shape, evaluates draftMax + 1 tokens in (nearly) every step of a lone answer and writes what plain decoding writes", async () => {
    const fixed = await createLlamaPolicy({ ...options, model: STARTER, speculative: "ngram", draftMax: 4, draftShape: "fixed", draftHistory: 0 });
    try {
      const a = await greedyRollout(plain, 0);
      const b = await greedyRollout(fixed, 0);
      await expectPlainGreedy(a.prompt, a.record, b.record);
      const costs = fixed.decodeStepCosts?.() ?? [];
      const steps = costs.reduce((n, c) => n + c.steps, 0);
      // only a draft cut at a stop string or at the call's end is shorter
      expect(costs.find((c) => c.tokens === 5)?.steps ?? 0).toBeGreaterThan(0.8 * steps);
      expect(costs.every((c) => c.tokens <= 5)).toBe(true);
      expect(b.usage.draftedTokens).toBeGreaterThan(b.usage.acceptedTokens!);
    } finally {
      await fixed.close();
    }
  });

  it("after a failing final SQL is rewound and asked again (finalRetries), still writes what plain decoding writes", async () => {
    let retried = 0;
    const sink = (e: ReexEvent) => {
      if (e.type === "probe" && e.retried) retried++;
    };
    for (const i of prompts.keys()) {
      const a = await greedyRollout(plain, i, { maxTokens: 300, finalRetries: 2 });
      const b = await greedyRollout(spec, i, { maxTokens: 300, finalRetries: 2, sink });
      if ((await expectPlainGreedy(a.prompt, a.record, b.record)) === "identical") expect(b.text).toBe(a.text);
    }
    // the starter's final SQL fails on these questions, so the path under test ran
    expect(retried).toBeGreaterThan(0);
  });

  it("verifies the drafts of several forks in one step: the greedy one writes what plain decoding writes", async () => {
    const run = async (policy: Policy) => {
      const root = await policy.start(prompts[0]!);
      // a forced copy of a schema line first: the drafter, which forks inherit, then trusts its drafts even in a step of four
      await root.generate({ stop: [], maxTokens: 60, grammar: exactTextGrammar(SCHEMA_LINE), temperature: 0 });
      const forks = [root, await root.fork(), await root.fork(), await root.fork()];
      try {
        const results = await Promise.all(
          forks.map((f, i) => f.generate({ stop: [], maxTokens: 48, temperature: i === 0 ? 0 : 0.6, seed: 7 + i, ignoreEos: true })),
        );
        return { tokens: results.map((r) => r.tokens), logprobs: results.map((r) => r.logprobs), counts: drafted(forks) };
      } finally {
        await Promise.all(forks.map((f) => f.release()));
      }
    };
    const a = await run(plain);
    const b = await run(spec);
    expect(b.tokens[0]).toEqual(a.tokens[0]);
    b.logprobs[0]!.forEach((lp, j) => expect(lp).toBeCloseTo(a.logprobs[0]![j]!, 2));
    // the sampled ones draw from logits that may differ from a lone token's in the last digits, so only their length is fixed
    expect(b.tokens.map((t) => t.length)).toEqual([48, 48, 48, 48]);
    expect(b.counts.accepted).toBeGreaterThan(0);
  });

  it("samples each token with plain decoding's frequencies (two-sample chi-square, independent seeds)", async () => {
    // a context the model copies from: a final SQL begun as the probe before it, so that drafts are proposed and judged at
    // T 1 (the starter accepts most of the probe's condition and writes its own ending)
    const N = 240;
    const LEN = 6;
    const sample = async (policy: Policy, seed0: number) => {
      const root = await policy.start(prompts[1]!);
      await root.append(COPY_CONTEXT);
      const out: number[][] = [];
      const used: Trajectory[] = [];
      try {
        for (let i = 0; i < N; i++) {
          const f = await root.fork();
          used.push(f);
          out.push((await f.generate({ stop: [], maxTokens: LEN, temperature: 1, seed: seed0 + i, ignoreEos: true, logprobs: false })).tokens);
          await f.release();
        }
      } finally {
        await root.release();
      }
      return { out, counts: drafted(used) };
    };
    const a = await sample(plain, 1);
    const b = await sample(spec, 100_001);
    expect(b.counts.drafted).toBeGreaterThan(N);
    expect(b.counts.accepted).toBeGreaterThan(0);
    expect(b.counts.accepted).toBeLessThan(b.counts.drafted);
    for (let pos = 0; pos < LEN; pos++) {
      const { statistic, df } = chiSquare(
        a.out.map((t) => t[pos]!),
        b.out.map((t) => t[pos]!),
      );
      // p < 0.001 would fail: six positions, so a false alarm once in about 170 runs
      expect(statistic, `position ${pos}`).toBeLessThan(chiSquareQuantile(df, 0.999));
    }
  });
});

describe("speculative decoding on a real vocabulary (qwen2), scripted by a grammar", () => {
  let dir: string;
  let dbPath: string;
  let plain: Policy;
  let spec: Policy;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "reex-speculative-"));
    dbPath = join(dir, "concerts.sqlite");
    const db = new Database(dbPath);
    db.exec(
      "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER); INSERT INTO singer VALUES (1, 'Ann', 'France', 31), (2, 'Bob', 'France', 42);",
    );
    db.close();
    // "longest-token" weights: under an exact-text grammar greedy decoding writes the text in the
    // longest tokens the vocabulary allows, so a text the model wrote twice is tokenised alike
    const model = await buildRealModel("qwen2", { weights: "longest-token" });
    plain = await createLlamaPolicy({ ...options, contextSize: 4096, sequences: 2, model });
    // assumed step costs: on this random-weight model, sampling from a 152k vocabulary dominates a step, so
    // measured costs may rightly say drafting does not pay, and these tests need drafts
    spec = await createLlamaPolicy({ ...options, contextSize: 4096, sequences: 2, model, speculative: "ngram", draftCosts: "assumed" });
  });

  afterAll(async () => {
    await plain?.close();
    await spec?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("writes a probing SkyRL-SQL rollout token for token as plain decoding, the final SQL drafted from the probe", { timeout: 120_000 }, async () => {
    const profile = PROFILES.find((p) => p.id === "skyrl-sql")!;
    const probe = "SELECT name, age FROM singer WHERE country = 'France'";
    const final = "SELECT COUNT(*) FROM singer WHERE country = 'France'";
    const grammar: SegmentGrammars = {
      first: exactTextGrammar(
        `${profile.think!.open}Which singers are French?${profile.think!.close}\n${profile.probe!.open}${probe}${profile.probe!.close}\n`,
      ),
      segment: exactTextGrammar(`${profile.think!.open}Two of them: ${probe}${profile.think!.close}\n${profile.answer.open}${final}${profile.answer.close}`),
      finalBody: exactTextGrammar(`${final}${profile.answer.close}`),
    };
    const prompt = profile.buildPrompt({
      family: profile.families[0]!,
      schema: "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);",
      question: "How many singers are from France?",
    });
    const results = [];
    for (const policy of [plain, spec]) {
      const t = await policy.start(policy.renderChat(prompt.messages, { sharedPrefix: prompt.sharedPrefix }));
      try {
        const r = await rollout(
          t,
          resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, profile, family: profile.families[0]!, grammar, maxTokens: 300, logprobs: false }),
        );
        results.push({ r, usage: t.usage });
      } finally {
        await t.release();
      }
    }
    const [a, b] = results as [(typeof results)[0], (typeof results)[0]];
    expect(a.r.finalSql).toBe(final);
    expect(b.r.record.tokens).toEqual(a.r.record.tokens);
    expect(b.r.text).toBe(a.r.text);
    expect(b.usage.acceptedTokens).toBeGreaterThan(0);
  });

  it("never drafts past a stop string: the call ends at the closing tag, and the trajectory goes on as without drafting", { timeout: 120_000 }, async () => {
    // the model writes "<sql>…</sql>\n<result>…" twice, then "<sql>" again: the drafts after it run
    // into the closing tag and, but for the stop string, past it
    const block = "<sql>SELECT name FROM singer</sql>\n<result>Ann</result>\n";
    const forced = "SELECT name FROM singer</sql>\n<result>Bob</result>\n";
    const run = async (policy: Policy) => {
      const t = await policy.start(policy.renderChat([{ role: "user", content: "Which singers are French?" }]));
      try {
        await t.generate({ stop: [], maxTokens: 120, grammar: exactTextGrammar(`${block}${block}<sql>`), temperature: 0, logprobs: false });
        const used0 = drafted([t]);
        const r = await t.generate({ stop: ["</sql>"], maxTokens: 40, grammar: exactTextGrammar(forced), temperature: 0, logprobs: false });
        const used = drafted([t]);
        await t.append("\n<result>Ann</result>\n");
        const after = await t.generate({ stop: [], maxTokens: 6, temperature: 0, ignoreEos: true, logprobs: false });
        return { r, after, drafts: used.drafted - used0.drafted, accepted: used.accepted - used0.accepted };
      } finally {
        await t.release();
      }
    };
    const a = await run(plain);
    const b = await run(spec);
    // the stop ends inside Qwen's "ql>\n" token: the text goes on to that token's end
    expect(b.r.text).toMatch(/<\/sql>\n?$/);
    expect(b.r.stopReason).toBe("stop");
    expect(b.r.tokens).toEqual(a.r.tokens);
    expect(b.after.tokens).toEqual(a.after.tokens);
    // the call was drafted, and no drafted token lay past the tag: every one was generated and kept
    // (drafting on into "<result>…" under this grammar would have drafted tokens the call never returned)
    expect(b.drafts).toBeGreaterThan(0);
    expect(b.drafts).toBeLessThanOrEqual(b.r.tokens.length);
    expect(b.accepted).toBe(b.drafts);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, AnswerRequest, Candidate } from "../../src/decoding/types.js";
import { ReexError } from "../../src/errors/index.js";
import { loadDataset, runEval, type EvalItem } from "../../src/eval/index.js";
import { type EvalProgress } from "../../src/eval/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { makeFixture, type Fixture } from "./fixtures.js";

let fx: Fixture;
let items: EvalItem[];
let pool: ExecutorPool;

beforeAll(() => {
  fx = makeFixture();
  items = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot }).items.slice(0, 3);
  pool = new ExecutorPool({ workers: 2 });
});
afterAll(async () => {
  await pool.close();
});

function candidate(index: number, sql: string | null, group: number | null, votes: number, interactions: number): Candidate {
  return { index, path: `t${index}`, sql, answerable: sql !== null, group, votes, interactions, meanLogprob: -0.5, text: "" };
}

function answer(candidates: Candidate[], winner: number | null, generated: number): Answer {
  const w = candidates.find((c) => c.index === winner);
  return {
    sql: w?.sql ?? null,
    answerable: true,
    candidates,
    winner,
    decidedBy: winner === null ? "none" : "majority",
    usage: { promptTokens: 100, evaluatedTokens: generated + 40, generatedTokens: generated },
    timings: { totalMs: 5 },
  };
}

const WRONG_A = "SELECT 0";
const WRONG_B = "SELECT name FROM products WHERE price > 100";

/**
 * Question 0: the right SQL is only the second candidate and two wrong ones outvote it (pass@k ✔,
 * voting ✘, pass@1 ✘). Question 1: right first and winning. Question 2: the decoder fails.
 */
const CANNED: Record<number, () => Answer> = {
  0: () => answer([candidate(0, WRONG_A, 0, 2, 2), candidate(1, "SELECT COUNT(*) FROM products", 1, 1, 3), candidate(2, WRONG_A, 0, 2, 1)], 0, 300),
  1: () =>
    answer(
      [
        candidate(0, "SELECT name FROM products WHERE category = 'fruit' ORDER BY price", 0, 2, 1),
        candidate(1, "SELECT name FROM products WHERE category = 'fruit' ORDER BY price ASC", 0, 2, 4),
        candidate(2, WRONG_B, 1, 1, 0),
      ],
      0,
      500,
    ),
};

function fakeDecode(requests: AnswerRequest[]) {
  return async (req: AnswerRequest): Promise<Answer> => {
    requests.push(req);
    await new Promise((r) => setTimeout(r, 5));
    const item = items.find((i) => i.question === req.question)!;
    const canned = CANNED[item.index];
    if (!canned) throw new ReexError("POLICY_ERROR", "the model fell over");
    return canned();
  };
}

describe("runEval with an injected decoder", () => {
  it("summarises voting accuracy, pass@1 and pass@k separately", async () => {
    const requests: AnswerRequest[] = [];
    const progress: EvalProgress[] = [];
    const run = await runEval({ items, decode: fakeDecode(requests), executor: pool, strategy: "linear", candidates: 3, onProgress: (p) => progress.push(p) });

    expect(requests.map((r) => [r.strategy, r.candidates, r.dbPath])).toEqual(items.map((i) => ["linear", 3, i.dbPath]));
    expect(requests[1]!.evidence).toBe(items[1]!.evidence);
    expect(requests[0]!.evidence).toBeUndefined();

    const s = run.summary;
    expect(s.count).toBe(3);
    expect(s.voting.bird).toBeCloseTo(1 / 3);
    expect(s.ex.bird).toBeCloseTo(1 / 3);
    expect(s.pass1.bird).toBeCloseTo(1 / 3);
    expect(s.passK.bird).toBeCloseTo(2 / 3);
    expect(s.passK.bird).toBeGreaterThan(s.voting.bird);
    expect(s.meanK).toBeCloseTo((3 + 3 + 1) / 3);
    expect(s.errors).toEqual({ decode: 1 });
    expect(s.noSqlRate).toBeCloseTo(1 / 3);
    expect(s.avgInteractions).toBeCloseTo((2 + 1) / 2);
    expect(s.generatedTokensPerItem).toBeCloseTo((300 + 500) / 2);
    expect(s.evaluatedTokensPerItem).toBeCloseTo((340 + 540) / 2);
    expect(s.latencyMs!.mean).toBeGreaterThan(0);
    expect(Object.keys(s.byDifficulty)).toEqual(["simple", "moderate"]);
    expect(s.byDifficulty.simple!.passK.bird).toBe(1);
    expect(s.byDifficulty.simple!.voting.bird).toBe(0.5);

    const [q0, q1, q2] = run.items;
    expect(q0!.candidates.map((c) => c.ex.bird)).toEqual([false, true, false]);
    expect(q0).toMatchObject({ predicted: WRONG_A, k: 3, interactions: 2, tokens: { generated: 300, evaluated: 340 } });
    expect(q1!.ex).toEqual({ bird: true, spider: true, refined: true });
    expect(q2).toMatchObject({ error: "decode", decodeError: { code: "POLICY_ERROR" }, predicted: null });

    expect(run.config).toMatchObject({ label: "linear", source: "decode", strategy: "linear", candidates: 3, concurrency: 1, timeoutMs: 10_000 });
    expect(progress.map((p) => [p.done, p.total, p.correct])).toEqual([
      [1, 3, 0],
      [2, 3, 1],
      [3, 3, 1],
    ]);
  });

  it("keeps item order with several items in flight and honours the limit", async () => {
    const run = await runEval({ items, decode: fakeDecode([]), executor: pool, strategy: "tree", concurrency: 3, limit: 2 });
    expect(run.items.map((i) => i.index)).toEqual([0, 1]);
    expect(run.config).toMatchObject({ concurrency: 3, limit: 2, strategy: "tree" });
  });

  it("stops the run when the decoder reports a failure every item would share", async () => {
    const decode = async (): Promise<Answer> => {
      throw new ReexError("MODEL_NOT_FOUND", "no such model");
    };
    await expect(runEval({ items, decode, executor: pool })).rejects.toMatchObject({ code: "MODEL_NOT_FOUND" });
  });

  it("stops with CANCELLED when aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(runEval({ items, decode: fakeDecode([]), executor: pool, signal: controller.signal })).rejects.toMatchObject({ code: "CANCELLED" });
  });
});

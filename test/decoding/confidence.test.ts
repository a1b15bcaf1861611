import { describe, expect, it } from "vitest";
import { suspectCondition } from "../../src/agent/index.js";
import { SIGNALS, answerStatus, probability, vote, type Answer, type ConfidenceModel } from "../../src/decoding/index.js";
import { CONFIDENCE_MODEL, VOTE_CONFIDENCE_MODEL, assessAnswer, ungroundedShare, type Candidate } from "../../src/decoding/testing.js";
import type { ExecResult } from "../../src/sql/index.js";

const ok = (rows: unknown[][]): ExecResult => ({
  ok: true,
  columns: ["c"],
  rows: rows as never,
  rowCount: rows.length,
  truncated: false,
  empty: rows.length === 0,
  elapsedMs: 0,
});
const failed: ExecResult = { ok: false, error: { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message: "no such column: x" }, elapsedMs: 0 };

function candidate(index: number, sql: string | null, result: ExecResult | undefined, extra: Partial<Candidate> = {}): Candidate {
  return {
    index,
    path: String(index),
    sql,
    answerable: true,
    ...(result ? { result } : {}),
    group: null,
    votes: 0,
    interactions: 0,
    meanLogprob: Number.NaN,
    text: "",
    ...extra,
  };
}

function assess(cands: Candidate[], model?: ConfidenceModel, probes: { result: ExecResult | null }[] = []) {
  const outcome = vote(cands.map((c) => ({ sql: c.sql, meanLogprob: c.meanLogprob, answerable: c.answerable, ...(c.result ? { result: c.result } : {}) })));
  const withGroups = cands.map((c, i) => ({
    ...c,
    group: outcome.groupOf[i] ?? null,
    votes: outcome.groupOf[i] == null ? 0 : outcome.groups[outcome.groupOf[i]!]!.votes,
  }));
  return assessAnswer(
    { question: "How many doctors are there?", candidates: withGroups, outcome, probes, context: "CREATE TABLE doctors (doctor_id INTEGER)" },
    { ...(model ? { model } : {}), threshold: 0.5 },
  );
}

describe("suspectCondition", () => {
  it("flags a comparison used as a value, a self-comparison, constants and one column held to two values", () => {
    expect(suspectCondition("SELECT COUNT(*) FROM orders WHERE printf(order_date LIKE '38-%' AND shipping_fee) = ''")).toMatch(/used as a value/);
    expect(suspectCondition("SELECT * FROM t AS T1 WHERE T1.id = T1.id")).toMatch(/compared with itself/);
    expect(suspectCondition("SELECT * FROM t WHERE 1 = 1")).toMatch(/two constants/);
    expect(suspectCondition("SELECT * FROM t WHERE city = 'Paris' AND city = 'Rome'")).toMatch(/two values/);
  });

  it("leaves ordinary conditions, OR lists, arithmetic and joins alone", () => {
    for (const sql of [
      "SELECT * FROM t WHERE city = 'Paris' OR city = 'Rome'",
      "SELECT * FROM t AS T1 JOIN u AS T2 ON T1.id = T2.id WHERE T1.x >= 3 AND T2.y <> 'q'",
      "SELECT * FROM t WHERE a + 1 = 1",
      "SELECT name FROM t WHERE age > 30 ORDER BY age LIMIT 5",
      "SELECT * FROM t WHERE a = 'x' AND b = 'y'",
    ])
      expect(suspectCondition(sql), sql).toBeNull();
  });
});

describe("ungroundedShare", () => {
  const schema = "CREATE TABLE patients (patient_id INTEGER, first_name TEXT, city TEXT)\nCREATE TABLE visits (visit_date TEXT)";
  it("is the share of content words the schema does not name, stems and camel case matched", () => {
    expect(ungroundedShare("What is the weather in Paris today?", schema)).toBe(1);
    expect(ungroundedShare("How many patients visited in 2020?", schema)).toBe(0);
    expect(ungroundedShare("What are the first names of patients?", schema)).toBe(0);
    expect(ungroundedShare("", schema)).toBe(0);
  });
});

describe("assessAnswer", () => {
  const model: ConfidenceModel = { bias: 1, weights: { emptyResult: -3, single: -0.5 }, fittedOn: "test" };

  it("is 0 with the reason when the winner failed, wrote no SQL or declared the question unanswerable", () => {
    expect(assess([candidate(0, "SELECT x FROM t", failed)], model)).toMatchObject({ value: 0, doubts: ["the final SQL failed"] });
    expect(assess([candidate(0, null, undefined, { answerable: false })], model)).toMatchObject({
      value: 0,
      doubts: ["the model declared the question unanswerable"],
    });
  });

  it("applies the model to the signals and names what lowered it", () => {
    const full = assess([candidate(0, "SELECT COUNT(*) FROM doctors", ok([[12]]))], model);
    const empty = assess([candidate(0, "SELECT COUNT(*) FROM doctors WHERE 0", ok([[0]]))], model);
    expect(full.value).toBeCloseTo(1 / (1 + Math.exp(-0.5)), 6);
    expect(empty.value).toBeCloseTo(1 / (1 + Math.exp(2.5)), 6);
    expect(empty.doubts[0]).toMatch(/empty or only zeros/);
    expect(Object.keys(full.signals!).sort()).toEqual([...SIGNALS].sort());
  });

  it("reads the vote: the winner's share of the candidates and its margin", () => {
    const a = assess([
      candidate(0, "SELECT 1", ok([[1]])),
      candidate(1, "SELECT 1", ok([[1]])),
      candidate(2, "SELECT 2", ok([[2]])),
      candidate(3, "SELECT x", failed),
    ]);
    expect(a.signals).toMatchObject({ voteShare: 0.5, voteMargin: 0.25, single: 0 });
  });

  it("scores a one-path answer with the greedy model and a voted one with the vote's, where agreement raises it", () => {
    const one = assess([candidate(0, "SELECT 1", ok([[1]]))]);
    expect(one.value).toBeCloseTo(probability(CONFIDENCE_MODEL, one.signals!), 9);
    const split = assess([
      candidate(0, "SELECT 1", ok([[1]])),
      candidate(1, "SELECT 2", ok([[2]])),
      candidate(2, "SELECT 3", ok([[3]])),
      candidate(3, "SELECT 4", ok([[4]])),
    ]);
    const agreed = assess([0, 1, 2, 3].map((i) => candidate(i, "SELECT 1", ok([[1]]))));
    expect(agreed.value).toBeCloseTo(probability(VOTE_CONFIDENCE_MODEL, agreed.signals!), 9);
    expect(agreed.value).toBeGreaterThan(split.value);
  });

  it("counts the winning trajectory's failed probes", () => {
    const a = assess([candidate(0, "SELECT 1", ok([[1]]))], model, [{ result: failed }, { result: ok([[1]]) }]);
    expect(a.signals).toMatchObject({ probeErrors: 1 / 3, probes: 2 / 5 });
  });
});

describe("answerStatus with a confidence", () => {
  const base: Answer = {
    sql: "SELECT 1",
    answerable: true,
    result: ok([[1]]),
    candidates: [],
    winner: 0,
    decidedBy: "majority",
    usage: { promptTokens: 0, evaluatedTokens: 0, generatedTokens: 0 },
    timings: { totalMs: 0 },
  };
  it("marks an answer below the threshold not answerable, with the value and the doubts", () => {
    const low = answerStatus({ ...base, confidence: { value: 0.2, threshold: 0.5, doubts: ["the result is empty or only zeros and NULLs"] } });
    expect(low.answerable).toBe(false);
    expect(low.reason).toBe("low confidence (0.200, below 0.5): the result is empty or only zeros and NULLs");
    expect(answerStatus({ ...base, confidence: { value: 0.7, threshold: 0.5, doubts: [] } })).toEqual({ answerable: true });
    expect(answerStatus({ ...base, confidence: { value: 0.2, threshold: 0, doubts: [] } })).toEqual({ answerable: true });
  });
});

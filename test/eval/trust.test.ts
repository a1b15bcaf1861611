import { describe, expect, it } from "vitest";
import { aggregate, parseDataset, scoreItem } from "../../src/eval/testing.js";
import { calibration, trustMetrics, type TrustInput } from "../../src/eval/trust.js";
import { ReexError } from "../../src/errors/index.js";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const item = (correct: boolean, answered: boolean, confidence: number | null, unanswerable = false): TrustInput => ({
  correct,
  answered,
  confidence,
  unanswerable,
});

describe("trustMetrics", () => {
  it("scores right answers +1, wrong ones -c, abstentions 0, and abstaining on an unanswerable question +1", () => {
    const items = [
      item(true, true, 0.9),
      item(false, true, 0.6),
      item(false, false, 0.1),
      item(true, false, 0.3),
      item(false, false, 0.2, true),
      item(false, true, 0.7, true),
    ];
    const m = trustMetrics(items);
    expect(m.reliability.c0).toBeCloseTo((1 + 0 + 0 + 0 + 1 + 0) / 6, 9);
    expect(m.reliability.c1).toBeCloseTo((1 - 1 + 0 + 0 + 1 - 1) / 6, 9);
    expect(m.reliability.c10).toBeCloseTo((1 - 10 + 0 + 0 + 1 - 10) / 6, 9);
    expect(m.answerAll.c1).toBeCloseTo((1 - 1 - 1 + 1 - 1 - 1) / 6, 9);
    expect(m.coverage).toBeCloseTo(3 / 6, 9);
    expect(m.answeredAccuracy).toBeCloseTo(1 / 3, 9);
    expect(m.keptRight).toBeCloseTo(1 / 2, 9);
    expect([m.unanswerable, m.abstainedUnanswerable]).toEqual([2, 1]);
  });

  it("computes the expected calibration error over ten bins, and none without confidences", () => {
    const { ece, bins } = calibration([item(true, true, 0.95), item(true, true, 0.91), item(false, true, 0.15), item(true, true, 0.12)]);
    expect(bins.map((b) => [b.lo, b.count])).toEqual([
      [0.1, 2],
      [0.9, 2],
    ]);
    expect(ece).toBeCloseTo(0.5 * Math.abs(0.5 - 0.135) + 0.5 * Math.abs(1 - 0.93), 9);
    expect(calibration([item(true, true, null)])).toEqual({ ece: null, bins: [] });
  });
});

describe("unanswerable questions in a dataset", () => {
  const root = mkdtempSync(join(tmpdir(), "reex-unans-"));
  mkdirSync(join(root, "shop"));
  writeFileSync(join(root, "shop", "shop.sqlite"), "");

  it("load with no gold SQL when marked answerable: false, and are refused without the mark", () => {
    const ds = parseDataset([{ db_id: "shop", question: "What is the weather?", SQL: null, answerable: false }], { dbRoot: root });
    expect(ds.items[0]).toMatchObject({ goldSql: "", answerable: false });
    const bad = (): unknown => parseDataset([{ db_id: "shop", question: "q", SQL: null }], { dbRoot: root });
    expect(bad).toThrow(ReexError);
    expect(() => parseDataset([{ db_id: "shop", question: "q", SQL: "SELECT 1", answerable: false }], { dbRoot: root })).toThrow(/must be null/);
  });

  it("score as wrong SQL whatever it returns, and as right when abstained on", () => {
    const empty = { ok: true as const, columns: [], rows: [], rowCount: 0, truncated: false, empty: true, elapsedMs: 0 };
    const base = {
      index: 0,
      questionId: 0,
      dbId: "shop",
      question: "q",
      goldSql: "",
      gold: empty,
      candidates: [],
      interactions: null,
      latencyMs: null,
      tokens: null,
      unanswerable: true,
    };
    const answered = scoreItem({ ...base, final: { sql: "SELECT 1 WHERE 0", result: empty }, trust: { confidence: 0.8, answered: true } });
    const abstained = scoreItem({ ...base, final: { sql: "SELECT 1 WHERE 0", result: empty }, trust: { confidence: 0.1, answered: false } });
    expect(answered.ex.bird).toBe(false);
    expect(aggregate([answered]).trust.reliability.c1).toBe(-1);
    expect(aggregate([abstained]).trust.reliability.c1).toBe(1);
  });
});

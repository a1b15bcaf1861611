import { describe, expect, it } from "vitest";
import { ReexError } from "../../src/errors/index.js";
import { pairedDifference, type ItemScore } from "../../src/eval/index.js";

/** Items whose BIRD-rule EX follows `right` (other rules mirror it). */
function run(right: boolean[], dbId = "db"): ItemScore[] {
  return right.map((r, i) => {
    const ex = { bird: r, spider: r, refined: r };
    return {
      index: i,
      questionId: i,
      dbId,
      question: `q${i}`,
      gold: "SELECT 1",
      predicted: "SELECT 1",
      ex,
      voting: ex,
      pass1: ex,
      passK: ex,
      k: 1,
      error: null,
      candidates: [],
      interactions: null,
      latencyMs: null,
      tokens: null,
      confidence: null,
      answered: true,
    };
  });
}

/** 100 questions: both right on 20, only the first on `a`, only the second on `b`. */
function split(a: number, b: number): [boolean[], boolean[]] {
  const first: boolean[] = [];
  const second: boolean[] = [];
  for (let i = 0; i < 100; i++) {
    first.push(i < 20 || (i >= 20 && i < 20 + a));
    second.push(i < 20 || (i >= 20 + a && i < 20 + a + b));
  }
  return [first, second];
}

describe("comparing two runs question by question", () => {
  it("counts the discordant questions and gives the exact McNemar p-value and a 95% interval", () => {
    const [a, b] = split(10, 3);
    const d = pairedDifference(run(a), run(b));
    expect(d).toMatchObject({ rule: "bird", count: 100, firstOnly: 10, secondOnly: 3 });
    expect(d.delta).toBeCloseTo(0.07, 10);
    // 2 · (C(13,0) + C(13,1) + C(13,2) + C(13,3)) / 2^13
    expect(d.pValue).toBeCloseTo((2 * (1 + 13 + 78 + 286)) / 8192, 10);
    const se = Math.sqrt((0.13 - 0.07 ** 2) / 100);
    expect(d.ci95[0]).toBeCloseTo(0.07 - 1.96 * se, 10);
    expect(d.ci95[1]).toBeCloseTo(0.07 + 1.96 * se, 10);
  });

  it("is antisymmetric in the order of the runs", () => {
    const [a, b] = split(4, 9);
    const ab = pairedDifference(run(a), run(b));
    const ba = pairedDifference(run(b), run(a));
    expect(ba.delta).toBeCloseTo(-ab.delta, 12);
    expect(ba.pValue).toBeCloseTo(ab.pValue, 12);
    expect(ba.ci95[0]).toBeCloseTo(-ab.ci95[1], 12);
  });

  it("finds no difference and p = 1 when the runs agree on every question", () => {
    const [a] = split(5, 0);
    const d = pairedDifference(run(a), run(a));
    expect(d).toMatchObject({ delta: 0, firstOnly: 0, secondOnly: 0, pValue: 1, ci95: [0, 0] });
  });

  it("ignores item order and matches questions by database and id", () => {
    const [a, b] = split(6, 1);
    const d = pairedDifference(run(a), run(b).reverse());
    expect(d).toMatchObject({ firstOnly: 6, secondOnly: 1 });
  });

  it("falls back to dataset positions when question ids repeat", () => {
    const [a, b] = split(6, 1);
    const sameId = (items: ItemScore[]): ItemScore[] => items.map((i) => ({ ...i, questionId: 0 }));
    expect(pairedDifference(sameId(run(a)), sameId(run(b)))).toMatchObject({ firstOnly: 6, secondOnly: 1 });
  });

  it("refuses runs over different questions", () => {
    const [a, b] = split(6, 1);
    expect(() => pairedDifference(run(a), run(b, "other"))).toThrow(ReexError);
    expect(() => pairedDifference(run(a), run(b).slice(1))).toThrow(/same questions/);
  });
});

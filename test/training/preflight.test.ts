/** The GRPO pre-flight's figures from per-question outcomes: right means right on both row draws. */
import { describe, expect, it } from "vitest";
import { summarisePreflight, type PreflightOutcome } from "../../src/training/testing.js";

const both = { correct: true, draws: { first: true, second: true } };
const none = { correct: false, draws: { first: false, second: false } };
const firstOnly = { correct: false, draws: { first: true, second: false } };
const secondOnly = { correct: false, draws: { first: false, second: true } };

const outcome = (questionId: number, samples: PreflightOutcome["samples"], greedy: PreflightOutcome["samples"][number]): PreflightOutcome => ({
  questionId,
  samples,
  greedy: { ...greedy, sql: null },
});

describe("summarisePreflight", () => {
  it("counts mixed groups, greedy's misses a sample gets, pass rates and the spurious rate", () => {
    const s = summarisePreflight([
      // mixed; greedy wrong though a sample is right
      outcome(1, [both, none, firstOnly, none], none),
      // right on the first draw only is not right: no sample right, so not mixed
      outcome(2, [firstOnly, firstOnly, secondOnly, none], firstOnly),
      // all right: not mixed; greedy right
      outcome(3, [both, both, both, both], both),
      // mixed; greedy right
      outcome(4, [both, none, none, none], both),
    ]);
    expect(s).toEqual({
      n: 4,
      sampled: 16,
      mixedShare: 0.5,
      greedyWrongSampleRightShare: 0.25,
      meanPassRate: (1 / 4 + 0 + 1 + 1 / 4) / 4,
      greedyEx: 0.5,
      greedyExFirstDraw: 0.75,
      spuriousRate: 4 / 16,
      spuriousOfFirstRight: 4 / 9,
    });
  });

  it("scores a question without a second draw on its one draw and leaves it out of the spurious rate", () => {
    const s = summarisePreflight([outcome(1, [{ correct: true }, { correct: false }], { correct: false })]);
    expect(s).toMatchObject({ mixedShare: 1, greedyWrongSampleRightShare: 1, meanPassRate: 0.5, greedyEx: 0, spuriousRate: null, spuriousOfFirstRight: null });
  });

  it("gives null shares for no questions", () => {
    expect(summarisePreflight([])).toMatchObject({ n: 0, sampled: 0, mixedShare: null, meanPassRate: null, greedyEx: null, spuriousRate: null });
  });
});

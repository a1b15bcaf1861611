/**
 * How speculative decoding sizes its drafts (src/policy/draft.ts): from the acceptance that drafts of
 * the same kind of match had, and from what decode steps of each size cost as measured.
 */
import { describe, expect, it } from "vitest";
import { DraftingState, NgramDrafter, StepCosts } from "../../src/policy/draft.js";

/** Step costs of a machine where each token beyond the first adds `perToken` of a one-token step. */
function linearCosts(perToken: number, sizes = 20): StepCosts {
  const costs = new StepCosts();
  for (let n = 1; n <= sizes; n++) costs.observe(n, 10 * (1 + perToken * (n - 1)));
  return costs;
}

describe("draft sizing", () => {
  it("stops drafting a kind of match whose drafts were rejected, and drafts long where they were accepted", () => {
    const state = new DraftingState({ draftMax: 8 });
    const costs = linearCosts(0.3);
    for (let i = 0; i < 32; i++) {
      state.observe("prompt2", 1, 0);
      state.observe("own6", 8, 8);
    }
    expect(state.length("prompt2", 2, 8, 1, costs)).toBe(0);
    expect(state.length("own6", 6, 8, 1, costs)).toBe(8);
  });

  it("drafts no further than the last position its drafts got through, when the next one is mostly rejected", () => {
    const state = new DraftingState({ draftMax: 8 });
    for (let i = 0; i < 32; i++) state.observe("own3", 4, 3);
    // three accepted, the fourth rejected every time: a fourth drafted token only costs
    expect(state.length("own3", 3, 8, 1, linearCosts(0.3))).toBe(3);
  });

  it("does not draft one token where a two-token step costs twice a one-token step", () => {
    const state = new DraftingState({ draftMax: 8 });
    for (let i = 0; i < 32; i++) state.observe("own2", 1, 1);
    const dear = new StepCosts();
    dear.observe(1, 10);
    dear.observe(2, 20);
    dear.observe(9, 60);
    // always accepted, but one drafted token yields 2 tokens for 2× the cost
    expect(state.length("own2", 2, 1, 1, dear)).toBe(0);
    expect(state.length("own2", 2, 1, 1, linearCosts(0.3))).toBe(1);
    // with assumed costs (0.4 of a step a token) the timings are not consulted
    const assumed = new DraftingState({ draftMax: 8, stepCosts: "assumed" });
    for (let i = 0; i < 32; i++) assumed.observe("own2", 1, 1);
    expect(assumed.length("own2", 2, 1, 1, dear)).toBe(1);
  });

  it("does not draft on a wide step where a batch costs in proportion to its tokens, as it does on one sequence", () => {
    const state = new DraftingState({ draftMax: 8 });
    for (let i = 0; i < 32; i++) state.observe("own4", 2, 1);
    const costs = new StepCosts();
    // a second token is cheap on one sequence; sixteen sequences' steps cost in proportion to their tokens
    for (const [n, ms] of [
      [1, 10],
      [2, 13],
      [3, 20],
      [16, 100],
      [32, 200],
      [48, 300],
    ] as const)
      costs.observe(n, ms);
    expect(state.length("own4", 4, 8, 1, costs)).toBe(1);
    expect(state.length("own4", 4, 8, 16, costs)).toBe(0);
  });

  it("estimates unmeasured step sizes between measured ones, ignores a slow outlier and follows a lasting change", () => {
    const costs = new StepCosts();
    costs.observe(1, 10);
    costs.observe(5, 30);
    expect(costs.cost(3, 0.4)).toBeCloseTo(20, 6);
    // beyond the largest measured size: scaled by the prior 1 + 0.4 (n − 1)
    expect(costs.cost(6, 0.4)).toBeCloseTo((30 * 3) / 2.6, 6);
    costs.observe(1, 1000);
    expect(costs.cost(1, 0.4)).toBe(10);
    // a first step of a size that carried one-off work is forgotten once steady steps follow
    const warm = new StepCosts();
    warm.observe(8, 500);
    warm.observe(8, 14);
    expect(warm.cost(8, 0.4)).toBe(14);
    for (let i = 0; i < 15; i++) warm.observe(8, 20);
    expect(warm.cost(8, 0.4)).toBe(20);
    expect(warm.table()).toEqual([{ tokens: 8, ms: 20, steps: 17 }]);
  });

  it("drafts now and then where measured costs say no, so that a size measured when it was dear is measured again", () => {
    const state = new DraftingState({ draftMax: 4 });
    for (let i = 0; i < 32; i++) state.observe("own6", 4, 4);
    const dear = new StepCosts();
    dear.observe(1, 10);
    for (let n = 2; n <= 5; n++) dear.observe(n, 100);
    const lengths = Array.from({ length: 64 }, () => state.length("own6", 6, 4, 1, dear));
    expect(lengths.filter((k) => k > 0)).toEqual([4, 4]);
    expect(lengths.indexOf(4)).toBe(31);
  });

  it("drafts the continuation of the longest earlier match in the trajectory's own text, then learns from its verification", () => {
    const state = new DraftingState({ draftMax: 4 });
    const prompt = [1, 2, 3, 4, 5, 6];
    // the record repeats 7 8 9 10 11 12 and has begun it again: 7 8 9 matched, 10 11 12 13 follow
    const record = [7, 8, 9, 10, 11, 12, 13, 7, 8, 9];
    const drafter = new NgramDrafter(prompt, record, state);
    expect(drafter.draft(Infinity, 1, linearCosts(0.1))).toEqual([10, 11, 12, 13]);
    for (let i = 0; i < 32; i++) drafter.observe(4, 0);
    expect(drafter.draft(Infinity, 1, linearCosts(0.1))).toEqual([]);
  });
});

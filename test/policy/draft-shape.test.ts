/**
 * A fixed step shape (src/policy/draft.ts, `shape: "fixed"`): a lone generating sequence drafts
 * `draftMax` tokens every step, the lookup's continuation (else what followed its last token the
 * time before) filled up with guesses, so its decode
 * steps keep one size; the filling never counts for the match kind's acceptance, and several
 * sequences still size their drafts.
 */
import { describe, expect, it } from "vitest";
import { DraftingState, NgramDrafter, StepCosts } from "../../src/policy/draft.js";

/** Step costs where every drafted token costs as much as the step: a sized draft never pays. */
function dearSteps(): StepCosts {
  const costs = new StepCosts();
  for (let n = 1; n <= 40; n++) costs.observe(n, 10 * n);
  return costs;
}

describe("fixed draft shape", () => {
  it("drafts draftMax tokens every step of a lone sequence: the match's continuation, then guesses", () => {
    const state = new DraftingState({ draftMax: 6, shape: "fixed", historyTokens: 1000 });
    // an earlier answer wrote 7 8 9 10 11: after 7 8 9, two tokens of continuation, four of filling
    new NgramDrafter([1], [7, 8, 9, 10, 11], state, { scope: "s" }).remember();
    const draft = new NgramDrafter([1], [7, 8, 9], state, { scope: "s" }).draft(Infinity, 1, dearSteps());
    expect(draft).toHaveLength(6);
    expect(draft.slice(0, 2)).toEqual([10, 11]);
    // no n-gram matches 7 5: what followed the last token, 5, the time before (9 6 7 5), then 5 again
    expect(new NgramDrafter([5, 9, 6], [7, 5], state).draft(Infinity, 1, dearSteps())).toEqual([9, 6, 7, 5, 5, 5]);
    // nothing to look up at all: still six tokens
    expect(new NgramDrafter([1, 2], [3], state).draft(Infinity, 1, dearSteps())).toHaveLength(6);
    // never more than the call allows (the end of maxTokens or the context)
    expect(new NgramDrafter([1, 2], [3], state).draft(2, 1, dearSteps())).toHaveLength(2);
  });

  it("sizes drafts as usual when several sequences share the step", () => {
    const fixed = new DraftingState({ draftMax: 6, shape: "fixed" });
    expect(new NgramDrafter([1, 2], [3], fixed).draft(Infinity, 4, dearSteps())).toEqual([]);
    const sized = new DraftingState({ draftMax: 6 });
    expect(new NgramDrafter([7, 8, 9, 10, 11], [7, 8, 9], sized).draft(Infinity, 1, dearSteps())).toEqual([]);
  });

  it("counts only the match's part of a filled-up draft for its kind's acceptance", () => {
    const filled = new DraftingState({ draftMax: 6, shape: "fixed", historyTokens: 1000 });
    new NgramDrafter([1], [7, 8, 9, 10, 11], filled, { scope: "s" }).remember();
    const drafter = new NgramDrafter([1], [7, 8, 9], filled, { scope: "s" });
    const m = drafter.match()!;
    expect(m.tokens).toEqual([10, 11]);
    // both matched tokens accepted, the first guess after them rejected
    drafter.draft(Infinity, 1, dearSteps());
    drafter.observe(3, 2);
    // in sized mode that draft had been the 2 tokens, run out without a rejection
    const sized = new DraftingState({ draftMax: 6 });
    sized.observe(m.kind, 2, 2);
    expect(filled.expectedAccepted(m.kind, m.n, 6)).toEqual(sized.expectedAccepted(m.kind, m.n, 6));
    // a draft of filling alone says nothing of any kind
    const alone = new DraftingState({ draftMax: 6, shape: "fixed" });
    const c = new NgramDrafter([1, 2], [3], alone);
    c.draft(Infinity, 1, dearSteps());
    c.observe(1, 0);
    expect(alone.expectedAccepted("", 2, 6)).toEqual(new DraftingState().expectedAccepted("", 2, 6));
  });
});

/**
 * Drafting from earlier trajectories' text (src/policy/draft.ts, DraftHistory): a trajectory drafts
 * the continuation of text that trajectories before it on the same prompt prefix wrote, never from
 * another prefix's, never across the end of a remembered record, and within a bounded memory.
 */
import { describe, expect, it } from "vitest";
import { DraftHistory, DraftingState, NgramDrafter, StepCosts } from "../../src/policy/draft.js";

/** Step costs where a token beyond the first adds a tenth of a one-token step: long drafts pay. */
function cheapSteps(): StepCosts {
  const costs = new StepCosts();
  for (let n = 1; n <= 20; n++) costs.observe(n, 10 * (1 + 0.1 * (n - 1)));
  return costs;
}

const PROMPT = [1, 2, 3];
/** An earlier answer: "select count ( * ) from customers where …" as made-up token ids. */
const ANSWER = [50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60];

describe("draft history", () => {
  it("drafts what an earlier trajectory of the same scope wrote after the same tokens", () => {
    const state = new DraftingState({ draftMax: 6, historyTokens: 1000 });
    const first = new NgramDrafter(PROMPT, [...ANSWER], state, { scope: "retail" });
    first.remember();
    // a later answer has begun the same way: 50 51 52 matched, 53 … follow in the earlier one
    const later = new NgramDrafter(PROMPT, [50, 51, 52], state, { scope: "retail" });
    expect(later.match()).toMatchObject({ kind: "history3", n: 3, tokens: ANSWER.slice(3) });
    const draft = later.draft(Infinity, 1, cheapSteps());
    expect(draft.length).toBeGreaterThan(0);
    expect(draft).toEqual(ANSWER.slice(3, 3 + draft.length));
  });

  it("never drafts from another scope's text, nor from a trajectory that only reads", () => {
    const state = new DraftingState({ draftMax: 6, historyTokens: 1000 });
    new NgramDrafter(PROMPT, [...ANSWER], state, { scope: "tenant-a" }).remember();
    new NgramDrafter(PROMPT, [...ANSWER], state, { scope: "tenant-b", write: false }).remember();
    expect(new NgramDrafter(PROMPT, [50, 51, 52], state, { scope: "tenant-b" }).match()).toBeUndefined();
    expect(new NgramDrafter(PROMPT, [50, 51, 52], state, { scope: "tenant-a" }).match()?.kind).toBe("history3");
    expect(state.history?.tokens).toBe(ANSWER.length + 1);
  });

  it("prefers the trajectory's own text and its prompt to earlier trajectories' at the same match length", () => {
    const state = new DraftingState({ draftMax: 6, historyTokens: 1000 });
    new NgramDrafter(PROMPT, [7, 8, 90, 91], state, { scope: "s" }).remember();
    const drafter = new NgramDrafter([7, 8, 70, 71], [7, 8], state, { scope: "s" });
    expect(drafter.match()).toMatchObject({ kind: "prompt2", tokens: [70, 71, 7, 8] });
  });

  it("counts a match back past the n-gram it was found by, up to 32 tokens", () => {
    const state = new DraftingState({ historyTokens: 1000 });
    const long = Array.from({ length: 40 }, (_, i) => 100 + i);
    new NgramDrafter(PROMPT, long, state, { scope: "s" }).remember();
    expect(new NgramDrafter(PROMPT, long.slice(0, 12), state, { scope: "s" }).match()).toMatchObject({ n: 12, kind: "history12" });
    expect(new NgramDrafter(PROMPT, long.slice(0, 36), state, { scope: "s" }).match()).toMatchObject({ n: 32, kind: "history20" });
  });

  it("does not draft across the end of a remembered record into the next one", () => {
    const history = new DraftHistory(1000);
    history.add("s", [5, 6, 7]);
    history.add("s", [8, 9, 10]);
    const at = (i: number): number => [5, 6][i]!;
    expect(history.continuation("s", at, 2, 2, 10)?.tokens).toEqual([7]);
    const atEnd = (i: number): number => [6, 7][i]!;
    expect(history.continuation("s", atEnd, 2, 2, 10)).toBeUndefined();
  });

  it("remembers each stretch of a trajectory once, with the tokens its first n-grams need", () => {
    const state = new DraftingState({ historyTokens: 1000 });
    const record = [...ANSWER];
    const drafter = new NgramDrafter(PROMPT, record, state, { scope: "s" });
    drafter.remember();
    drafter.remember();
    expect(state.history?.tokens).toBe(ANSWER.length + 1);
    record.push(61, 62);
    drafter.remember();
    // the new stretch comes with the 8 tokens before it
    expect(state.history?.tokens).toBe(ANSWER.length + 1 + 10 + 1);
    expect(new NgramDrafter(PROMPT, [58, 59, 60], state, { scope: "s" }).match()?.tokens).toEqual([61, 62]);
  });

  it("keeps at most its budget of tokens, forgetting the least recently written scopes and a scope's oldest records first", () => {
    const history = new DraftHistory(40);
    const record = (base: number): number[] => Array.from({ length: 9 }, (_, i) => base + i);
    history.add("old", record(100));
    history.add("new", record(200));
    for (let i = 0; i < 5; i++) history.add("new", record(300 + 10 * i));
    expect(history.tokens).toBeLessThanOrEqual(40);
    const at = (tokens: number[]) => (i: number) => tokens[i]!;
    expect(history.continuation("old", at([100, 101]), 2, 2, 5)).toBeUndefined();
    expect(history.continuation("new", at([200, 201]), 2, 2, 5)).toBeUndefined();
    expect(history.continuation("new", at([340, 341]), 2, 2, 5)?.tokens).toEqual([342, 343, 344, 345, 346]);
  });

  it("keeps nothing with a budget of 0", () => {
    const state = new DraftingState({ historyTokens: 0 });
    expect(state.history).toBeUndefined();
    new NgramDrafter(PROMPT, [...ANSWER], state, { scope: "s" }).remember();
    expect(new NgramDrafter(PROMPT, [50, 51, 52], state, { scope: "s" }).match()).toBeUndefined();
  });
});

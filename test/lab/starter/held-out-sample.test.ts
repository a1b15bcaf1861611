/** The real test questions the pipeline holds out are drawn at random over the split, one database at a time, not the first of each. */
import { describe, expect, it } from "vitest";
import { heldOutSample } from "../../../lab/starter/index.js";

// 50 databases of 6 questions; each database's first question is the "easy" one
const items = Array.from({ length: 300 }, (_, k) => ({ db_id: `t${Math.floor(k / 6)}`, rank: k % 6 }));

describe("heldOutSample", () => {
  it("takes one question per database before a second, from databases all over the split", () => {
    const picked = heldOutSample(items, 40, "reex-eval:wikisql:1");
    expect(picked).toHaveLength(40);
    expect(new Set(picked.map((p) => p.db_id)).size).toBe(40);
    expect(picked.some((p) => Number(p.db_id.slice(1)) >= 40)).toBe(true);
  });

  it("does not favour a database's first question", () => {
    const picked = heldOutSample(items, 50, "reex-eval:wikisql:1");
    const firsts = picked.filter((p) => p.rank === 0).length;
    // one in six expected (about 8 of 50); taking the first of each would give 50
    expect(firsts).toBeLessThan(20);
  });

  it("draws the same sample from the same seed and another from another", () => {
    const a = heldOutSample(items, 30, "reex-eval:wikisql:1");
    expect(heldOutSample(items, 30, "reex-eval:wikisql:1")).toEqual(a);
    expect(heldOutSample(items, 30, "reex-eval:wikisql:2")).not.toEqual(a);
  });
});

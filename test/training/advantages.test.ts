import { describe, expect, it } from "vitest";
import { computeAdvantages } from "../../src/training/testing.js";

const EPS = 1e-6;

describe("group advantages", () => {
  it("standardises each group by its own mean and population std", () => {
    const { advantages, zeroVarianceGroups, groupMeans, groupStds } = computeAdvantages(
      [
        [1, 3],
        [0, 0, 6],
      ],
      "group",
    );
    expect(groupMeans).toEqual([2, 2]);
    expect(groupStds[0]).toBe(1);
    expect(groupStds[1]).toBeCloseTo(Math.sqrt(8), 12);
    expect(advantages[0]![0]).toBeCloseTo(-1 / (1 + EPS), 12);
    expect(advantages[0]![1]).toBeCloseTo(1 / (1 + EPS), 12);
    expect(advantages[1]![2]).toBeCloseTo(4 / (Math.sqrt(8) + EPS), 12);
    expect(zeroVarianceGroups).toBe(0);
  });

  it("gives a zero-variance group advantages of exactly 0 and counts it", () => {
    const r = computeAdvantages([[5, 5, 5], [1, 2], [0]], "group");
    expect(r.advantages[0]).toEqual([0, 0, 0]);
    expect(r.advantages[2]).toEqual([0]);
    expect(r.zeroVarianceGroups).toBe(2);
  });
});

describe("batch advantages", () => {
  it("centres on the group mean and scales by the std of all centred rewards of the batch", () => {
    const r = computeAdvantages(
      [
        [1, 3],
        [0, 4],
        [7, 7],
      ],
      "batch",
    );
    // centred: [-1, 1], [-2, 2], [0, 0]; batch std = sqrt((1 + 1 + 4 + 4 + 0 + 0) / 6)
    const std = Math.sqrt(10 / 6);
    expect(r.advantages[0]![1]).toBeCloseTo(1 / (std + EPS), 12);
    expect(r.advantages[1]![0]).toBeCloseTo(-2 / (std + EPS), 12);
    expect(r.advantages[2]).toEqual([0, 0]);
    expect(r.zeroVarianceGroups).toBe(1);
  });

  it("is all zeros when every group has zero variance", () => {
    const r = computeAdvantages(
      [
        [2, 2],
        [3, 3],
      ],
      "batch",
    );
    expect(r.advantages.flat()).toEqual([0, 0, 0, 0]);
    expect(r.zeroVarianceGroups).toBe(2);
  });
});

describe("no scaling (Dr.GRPO)", () => {
  it("only subtracts the group mean", () => {
    const r = computeAdvantages(
      [
        [1, 3, 8],
        [4, 4],
      ],
      "none",
    );
    expect(r.advantages[0]).toEqual([-3, -1, 4]);
    expect(r.advantages[1]).toEqual([0, 0]);
    expect(r.zeroVarianceGroups).toBe(1);
  });

  it("rejects unknown scalings and non-finite rewards", () => {
    expect(() => computeAdvantages([[1]], "median" as never)).toThrow(/unknown advantage scaling/);
    expect(() => computeAdvantages([[1, Number.NaN]], "group")).toThrow(/finite/);
  });
});

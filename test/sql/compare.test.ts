import { describe, expect, it } from "vitest";
import { cellKey, exBird, exRefined, exSpider, hasOrderBy, resultKey } from "../../src/sql/index.js";

describe("value normalisation", () => {
  it("treats 1, 1.0 and 1n as the same number", () => {
    expect(cellKey(1)).toBe(cellKey(1.0));
    expect(cellKey(1)).toBe(cellKey(1n));
    expect(cellKey(9007199254740993n)).not.toBe(cellKey(9007199254740992n));
    expect(exBird([[1]], [[1n]])).toBe(true);
  });

  it("ignores floating-point noise below 10 significant digits", () => {
    expect(exBird([[0.1 + 0.2]], [[0.3]])).toBe(true);
    expect(exBird([[2.0000000000001]], [[2]])).toBe(true);
    expect(exBird([[0.30001]], [[0.3]])).toBe(false);
  });

  it("never equates a number with a numeric string", () => {
    expect(exBird([[1]], [["1"]])).toBe(false);
    expect(exSpider([[1]], [["1"]])).toBe(false);
    expect(exRefined([[1]], [["1"]])).toBe(false);
  });

  it("compares strings case-sensitively and NULL equal to NULL", () => {
    expect(exBird([["Paris"]], [["paris"]])).toBe(false);
    expect(exBird([[null, "a"]], [[null, "a"]])).toBe(true);
    expect(exBird([[null]], [["null"]])).toBe(false);
  });

  it("compares BLOBs by bytes", () => {
    expect(exBird([[new Uint8Array([1, 2])]], [[Buffer.from([1, 2])]])).toBe(true);
    expect(exBird([[new Uint8Array([1, 2])]], [[new Uint8Array([2, 1])]])).toBe(false);
  });
});

describe("exBird", () => {
  it("ignores row order and duplicate rows", () => {
    expect(exBird([[1], [2], [2]], [[2], [1]])).toBe(true);
  });

  it("does not allow swapped columns", () => {
    expect(exBird([[1, "a"]], [["a", 1]])).toBe(false);
  });

  it("holds for two empty results and fails for empty against non-empty", () => {
    expect(exBird([], [])).toBe(true);
    expect(exBird([], [[1]])).toBe(false);
  });
});

describe("exSpider", () => {
  it("allows a permutation of the predicted columns", () => {
    expect(
      exSpider(
        [
          [1, "a"],
          [2, "b"],
        ],
        [
          ["a", 1],
          ["b", 2],
        ],
      ),
    ).toBe(true);
  });

  it("keeps rows together when permuting columns", () => {
    expect(
      exSpider(
        [
          [1, "a"],
          [2, "b"],
        ],
        [
          ["b", 1],
          ["a", 2],
        ],
      ),
    ).toBe(false);
  });

  it("uses bag semantics: duplicate counts matter", () => {
    expect(exSpider([[1], [1], [2]], [[1], [2], [2]])).toBe(false);
    expect(exSpider([[1], [2], [1]], [[1], [1], [2]])).toBe(true);
  });

  it("checks row order only when asked to", () => {
    expect(exSpider([[1], [2]], [[2], [1]])).toBe(true);
    expect(exSpider([[1], [2]], [[2], [1]], { orderMatters: true })).toBe(false);
    expect(
      exSpider(
        [
          [1, "x"],
          [2, "y"],
        ],
        [
          ["x", 1],
          ["y", 2],
        ],
        { orderMatters: true },
      ),
    ).toBe(true);
  });

  it("fails on different column counts", () => {
    expect(exSpider([[1, 2]], [[1]])).toBe(false);
    expect(exSpider([], [])).toBe(true);
  });

  it("agrees with trying every column permutation on small random tables", () => {
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 48271) % 2147483647;
      return seed % n;
    };
    const permutations = (n: number): number[][] =>
      n === 0 ? [[]] : permutations(n - 1).flatMap((p) => Array.from({ length: n }, (_, i) => [...p.slice(0, i), n - 1, ...p.slice(i)]));
    const bag = (rows: number[][]): string => JSON.stringify(rows.map((r) => JSON.stringify(r)).sort());
    const naive = (pred: number[][], gold: number[][], ordered: boolean): boolean =>
      permutations(3).some((perm) => {
        const moved = pred.map((r) => perm.map((i) => r[i]!));
        return ordered ? JSON.stringify(moved) === JSON.stringify(gold) : bag(moved) === bag(gold);
      });
    let agreeingTrue = 0;
    for (let trial = 0; trial < 400; trial++) {
      const gold = Array.from({ length: 4 }, () => Array.from({ length: 3 }, () => rand(2)));
      const perm = permutations(3)[rand(6)]!;
      let pred = gold.map((r) => perm.map((i) => r[i]!));
      if (rand(2) === 0) pred = [...pred].sort(() => rand(3) - 1);
      if (rand(2) === 0) pred[rand(4)]![rand(3)] = rand(2);
      for (const ordered of [false, true]) {
        const expected = naive(pred, gold, ordered);
        if (expected) agreeingTrue++;
        expect(exSpider(pred, gold, { orderMatters: ordered })).toBe(expected);
      }
    }
    expect(agreeingTrue).toBeGreaterThan(100);
  });

  it("stays fast on wide results with many interchangeable columns", () => {
    const row = Array.from({ length: 12 }, () => 7);
    const gold = Array.from({ length: 200 }, (_, i) => [...row, i]);
    const pred = gold.map((r) => [r[12]!, ...r.slice(0, 12)]);
    const started = Date.now();
    expect(exSpider(pred, gold)).toBe(true);
    expect(
      exSpider(
        pred,
        gold.map((r) => [...r.slice(0, 12), r[12]! + 1]),
      ),
    ).toBe(false);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe("exRefined", () => {
  it("sorts values within rows and rows, but needs the same row count", () => {
    expect(
      exRefined(
        [
          ["a", 1],
          ["b", 2],
        ],
        [
          [2, "b"],
          [1, "a"],
        ],
      ),
    ).toBe(true);
    expect(exRefined([[1], [1]], [[1]])).toBe(false);
    expect(exRefined([], [])).toBe(true);
  });
});

describe("resultKey", () => {
  it("is equal for results equal under BIRD and different otherwise", () => {
    expect(
      resultKey([
        [1, "a"],
        [2, "b"],
        [1, "a"],
      ]),
    ).toBe(
      resultKey([
        [2n, "b"],
        [1.0, "a"],
      ]),
    );
    expect(resultKey([[1, "a"]])).not.toBe(resultKey([["a", 1]]));
    expect(resultKey([[1]])).not.toBe(resultKey([["1"]]));
    expect(resultKey([])).toBe(resultKey([]));
    expect(resultKey([["a,b"]])).not.toBe(resultKey([["a"], ["b"]]));
  });
});

describe("hasOrderBy", () => {
  it("sees a top-level ORDER BY, also after a compound select or a CTE", () => {
    expect(hasOrderBy("SELECT name FROM singer ORDER BY age DESC")).toBe(true);
    expect(hasOrderBy("select a from t union select b from u order by 1")).toBe(true);
    expect(hasOrderBy("WITH x AS (SELECT 1 AS a) SELECT a FROM x ORDER BY a")).toBe(true);
  });

  it("ignores ORDER BY in subqueries, window definitions, strings, identifiers and comments", () => {
    expect(hasOrderBy("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3)")).toBe(false);
    expect(hasOrderBy("SELECT row_number() OVER (ORDER BY a) FROM t")).toBe(false);
    expect(hasOrderBy("SELECT 'order by' FROM t WHERE x = \"ORDER BY\"")).toBe(false);
    expect(hasOrderBy("SELECT a FROM t -- ORDER BY a")).toBe(false);
    expect(hasOrderBy("SELECT a FROM t WHERE b IN (SELECT b FROM u ORDER BY b LIMIT 1)")).toBe(false);
  });
});

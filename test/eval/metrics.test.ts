import { describe, expect, it } from "vitest";
import { compareResults, type ItemScore } from "../../src/eval/index.js";
import { aggregate, scoreItem, sortDifficulties, summarize, type ScoreInput } from "../../src/eval/testing.js";
import type { ExecSuccess, SqlValue } from "../../src/sql/index.js";
import type { ExecFailure } from "../../src/sql/testing.js";

function ok(rows: SqlValue[][], columns = rows[0]?.map((_, i) => `c${i}`) ?? ["c0"], truncated = false): ExecSuccess {
  return { ok: true, columns, rows, rowCount: rows.length, truncated, empty: rows.length === 0, elapsedMs: 1 };
}
const syntax: ExecFailure = { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "near FROM: syntax error" }, elapsedMs: 1 };

function input(over: Partial<ScoreInput>): ScoreInput {
  return {
    index: 0,
    questionId: 0,
    dbId: "db",
    question: "q",
    goldSql: "SELECT a FROM t",
    gold: ok([[1], [2]]),
    final: { sql: "SELECT a FROM t", result: ok([[1], [2]]) },
    candidates: [],
    interactions: null,
    latencyMs: null,
    tokens: null,
    ...over,
  };
}

describe("comparing one prediction under every EX rule", () => {
  it("follows each rule's notion of equality", () => {
    expect(compareResults(ok([[1], [2]]), ok([[2], [1]]), "SELECT a FROM t ORDER BY a")).toEqual({ bird: true, spider: false, refined: true });
    expect(compareResults(ok([[1], [2]]), ok([[2], [1]]), "SELECT a FROM t")).toEqual({ bird: true, spider: true, refined: true });
    expect(compareResults(ok([["x", 1]]), ok([[1, "x"]]), "SELECT a, b FROM t")).toEqual({ bird: false, spider: true, refined: true });
    expect(compareResults(ok([[1]]), ok([[1], [1]]), "SELECT a FROM t")).toEqual({ bird: true, spider: false, refined: false });
  });

  it("scores anything that did not run as wrong", () => {
    expect(compareResults(ok([[1]]), syntax, "SELECT 1")).toEqual({ bird: false, spider: false, refined: false });
    expect(compareResults(syntax, syntax, "SELECT 1")).toEqual({ bird: false, spider: false, refined: false });
    expect(compareResults(ok([[1]]), undefined, "SELECT 1")).toEqual({ bird: false, spider: false, refined: false });
  });
});

describe("scoring one item", () => {
  it("treats a bare prediction as the only candidate and the winner", () => {
    const s = scoreItem(input({}));
    expect(s).toMatchObject({ k: 1, error: null, ex: { bird: true }, voting: { bird: true }, pass1: { bird: true }, passK: { bird: true } });
  });

  it("separates the winner, the first candidate and any candidate", () => {
    const s = scoreItem(
      input({
        final: { sql: "SELECT 9", result: ok([[9]]) },
        candidates: [
          { index: 0, sql: "SELECT 9", result: ok([[9]]) },
          { index: 1, sql: "SELECT a FROM t", result: ok([[2], [1]]) },
          { index: 2, sql: "SELECT (", result: syntax },
        ],
        winner: 0,
      }),
    );
    expect(s.voting.bird).toBe(false);
    expect(s.pass1.bird).toBe(false);
    expect(s.passK.bird).toBe(true);
    expect(s.candidates.map((c) => c.error)).toEqual([null, null, "syntax"]);
  });

  it("flags results cut by the row cap and records a failing gold", () => {
    expect(scoreItem(input({ gold: ok([[1]], ["a"], true) })).truncated).toBe(true);
    const s = scoreItem(input({ gold: syntax }));
    expect(s.goldError).toEqual({ category: "syntax", message: "near FROM: syntax error" });
    expect(s.ex.bird).toBe(false);
  });
});

describe("aggregating item scores", () => {
  const make = (ex: boolean, difficulty: string | undefined, latencyMs: number | null, error: ItemScore["error"] = null): ItemScore =>
    scoreItem(
      input({
        ...(difficulty ? { difficulty } : {}),
        final: error === "no_sql" ? { sql: null } : error ? { sql: "SELECT (", result: syntax } : { sql: "x", result: ex ? ok([[1], [2]]) : ok([[3]]) },
        latencyMs,
        interactions: latencyMs === null ? null : 2,
        tokens: latencyMs === null ? null : { generated: 10, evaluated: 20 },
      }),
    );

  it("computes shares, latency percentiles and per-item averages, ignoring unmeasured items", () => {
    const m = aggregate([
      make(true, "simple", 100),
      make(false, "simple", 300),
      make(true, "moderate", 200),
      make(false, "moderate", null, "syntax"),
      make(false, undefined, null, "no_sql"),
    ]);
    expect(m.count).toBe(5);
    expect(m.ex.bird).toBeCloseTo(2 / 5);
    expect(m.syntaxErrorRate).toBeCloseTo(1 / 5);
    expect(m.executionErrorRate).toBeCloseTo(1 / 5);
    expect(m.noSqlRate).toBeCloseTo(1 / 5);
    expect(m.errors).toEqual({ syntax: 1, no_sql: 1 });
    expect(m.latencyMs).toEqual({ mean: 200, p50: 200, p90: 300, max: 300 });
    expect(m.avgInteractions).toBe(2);
    expect(m.generatedTokensPerItem).toBe(10);
  });

  it("breaks down by difficulty in BIRD order, with unlabeled items under 'unknown'", () => {
    const s = summarize([make(true, "challenging", 1), make(true, "simple", 1), make(false, undefined, 1), make(false, "simple", 1)]);
    expect(Object.keys(s.byDifficulty)).toEqual(["simple", "challenging", "unknown"]);
    expect(s.byDifficulty.simple!.ex.bird).toBe(0.5);
    expect(summarize([make(true, undefined, 1)]).byDifficulty).toEqual({});
    expect(sortDifficulties(["hard", "moderate", "extra", "simple"])).toEqual(["simple", "moderate", "extra", "hard"]);
  });

  it("gives zeros and nulls for an empty set", () => {
    const m = aggregate([]);
    expect(m.ex).toEqual({ bird: 0, spider: 0, refined: 0 });
    expect(m.latencyMs).toBeNull();
    expect(m.avgInteractions).toBeNull();
  });
});

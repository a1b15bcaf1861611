import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadDataset, scorePredictions, selfCheck, type EvalItem } from "../../src/eval/index.js";
import { loadPredictions } from "../../src/eval/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { makeFixture, PREDICTIONS, type Fixture } from "./fixtures.js";

let fx: Fixture;
let items: EvalItem[];
let pool: ExecutorPool;

beforeAll(() => {
  fx = makeFixture();
  items = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot }).items;
  pool = new ExecutorPool({ workers: 2 });
});
afterAll(async () => {
  await pool.close();
});

/** The figures worked out by hand from the comments on PREDICTIONS. */
function expectHandFigures(run: Awaited<ReturnType<typeof scorePredictions>>): void {
  const s = run.summary;
  expect(s.count).toBe(6);
  expect(s.ex.bird).toBeCloseTo(3 / 6);
  expect(s.ex.spider).toBeCloseTo(2 / 6);
  expect(s.ex.refined).toBeCloseTo(3 / 6);
  expect(s.voting).toEqual(s.ex);
  expect(s.pass1).toEqual(s.ex);
  expect(s.passK).toEqual(s.ex);
  expect(s.meanK).toBe(1);
  expect(s.syntaxErrorRate).toBeCloseTo(1 / 6);
  expect(s.executionErrorRate).toBeCloseTo(1 / 6);
  expect(s.errors).toEqual({ syntax: 1 });
  expect(s.goldErrors).toBe(0);
  expect(s.avgInteractions).toBeNull();
  expect(s.latencyMs).toBeNull();
  expect(s.generatedTokensPerItem).toBeNull();

  expect(Object.keys(s.byDifficulty)).toEqual(["simple", "moderate", "challenging"]);
  const { simple, moderate, challenging } = s.byDifficulty;
  expect(simple!.count).toBe(3);
  expect(simple!.ex.bird).toBeCloseTo(2 / 3);
  expect(simple!.ex.spider).toBeCloseTo(1 / 3);
  expect(simple!.ex.refined).toBeCloseTo(2 / 3);
  expect(simple!.syntaxErrorRate).toBeCloseTo(1 / 3);
  expect(moderate!.ex).toEqual({ bird: 0, spider: 0.5, refined: 0.5 });
  expect(challenging!.ex).toEqual({ bird: 1, spider: 0, refined: 0 });

  expect(run.items.map((i) => i.ex)).toEqual([
    { bird: true, spider: true, refined: true },
    { bird: true, spider: false, refined: true },
    { bird: false, spider: false, refined: false },
    { bird: false, spider: true, refined: true },
    { bird: true, spider: false, refined: false },
    { bird: false, spider: false, refined: false },
  ]);
  expect(run.items[5]).toMatchObject({ error: "syntax", predicted: PREDICTIONS[5], gold: items[5]!.goldSql, questionId: 105, difficulty: "simple" });
}

describe("scoring a predictions file", () => {
  it("gives the hand-computed figures from a one-SQL-per-line file with BIRD suffixes", async () => {
    const file = join(fx.dir, "predict.sql");
    writeFileSync(file, PREDICTIONS.map((sql, i) => (i % 2 === 0 ? `${sql}\t----- bird -----\t${items[i]!.dbId}` : sql)).join("\n") + "\n");
    const run = await scorePredictions({ items, predictions: loadPredictions(file, items), executor: pool });
    expect(run.config).toMatchObject({ source: "predictions", label: "predictions", timeoutMs: 10_000 });
    expectHandFigures(run);
  });

  it("gives the same figures from BIRD's predict_dev.json keyed by question index", async () => {
    const file = join(fx.dir, "predict_dev.json");
    const byIndex = Object.fromEntries(PREDICTIONS.map((sql, i) => [String(i), `${sql}\t----- bird -----\t${items[i]!.dbId}`]).reverse());
    writeFileSync(file, JSON.stringify(byIndex, null, 2));
    const run = await scorePredictions({ items, predictions: loadPredictions(file, items), executor: pool, concurrency: 3 });
    expectHandFigures(run);
  });

  it("counts an empty prediction as no SQL and a runaway one as a timeout", async () => {
    const predictions = [...PREDICTIONS];
    predictions[0] = null as unknown as string;
    predictions[2] = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c";
    const run = await scorePredictions({ items, predictions, executor: pool, timeoutMs: 300 });
    expect(run.items[0]!.error).toBe("no_sql");
    expect(run.items[2]!.error).toBe("timeout");
    expect(run.summary.errors).toEqual({ no_sql: 1, timeout: 1, syntax: 1 });
    expect(run.summary.noSqlRate).toBeCloseTo(1 / 6);
    expect(run.summary.executionErrorRate).toBeCloseTo(2 / 6);
    expect(run.summary.ex.bird).toBeCloseTo(2 / 6);
  });
});

describe("the self-check", () => {
  it("scores gold against gold at 100% under every rule and hands the gold results on", async () => {
    const check = await selfCheck(items, { executor: pool });
    expect(check.failures).toEqual([]);
    expect(check.ok).toBe(true);
    expect(check.goldResults.size).toBe(6);
    const gold = [...items];
    const run = await scorePredictions({ items, predictions: gold.map((i) => i.goldSql), executor: pool, goldResults: check.goldResults });
    expect(run.summary.ex).toEqual({ bird: 1, spider: 1, refined: 1 });
  });

  it("fails, naming the question, when a gold query does not run", async () => {
    const broken = items.map((it) => (it.index === 3 ? { ...it, goldSql: "SELECT nope FROM products" } : it));
    const check = await selfCheck(broken, { executor: pool });
    expect(check.ok).toBe(false);
    expect(check.failures).toEqual([expect.objectContaining({ index: 3, dbId: "shop", reason: expect.stringContaining("missing_column") })]);
  });
});

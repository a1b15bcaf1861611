import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool, type ExecResult } from "../../src/sql/index.js";
import { GoldCache, resolveRewardSpec, rewardFromFacts, type RewardFacts } from "../../src/training/index.js";
import {
  REEX_WEIGHT_PRESETS,
  cellPrecision,
  cellRecall,
  columnMatchShare,
  emReward,
  entityReward,
  explorationReward,
  gatedQatch,
  qatchScore,
  scoreResponse,
  sigmoid,
  softFormat,
  strictFormat,
  tupleCardinality,
} from "../../src/training/testing.js";
import { GOLD, makeTrainingFixture, response, type TrainingFixture } from "./fixtures.js";
import { CountingExecutor } from "../helpers/executor.js";

let fx: TrainingFixture;
let pool: ExecutorPool;

beforeAll(() => {
  fx = makeTrainingFixture();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(fx.dir, { recursive: true, force: true });
});

const ok = (columns: string[], rows: (string | number | null)[][]): ExecResult => ({
  ok: true,
  columns,
  rows,
  rowCount: rows.length,
  truncated: false,
  empty: rows.length === 0,
  elapsedMs: 0,
});
const failed: ExecResult = { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "near x" }, elapsedMs: 0 };

/** Facts of a response that is right in every way unless overridden. */
function facts(over: Partial<RewardFacts> = {}): RewardFacts {
  const gold = ok(["name"], [["Ann"], ["Bob"], ["Dee"]]);
  return {
    profile: "reex",
    family: "execution-aware",
    formatOk: true,
    formatProblems: [],
    softFormatOk: true,
    finalSql: GOLD,
    goldSql: GOLD,
    finalResult: gold,
    goldResult: gold,
    executable: true,
    correct: true,
    em: 1,
    entity: 1,
    probes: [{ sql: "SELECT DISTINCT country FROM singer", repeated: false }],
    interactions: 1,
    generatedTokens: 256,
    ...over,
  };
}

describe("Think2SQL cell metrics", () => {
  it("gives cell precision 0.5 when the prediction adds a column of other values (the paper's example)", () => {
    const gold = [["Ann"], ["Bob"]];
    const pred = [
      ["Ann", 31],
      ["Bob", 42],
    ];
    expect(cellPrecision(pred, gold)).toBe(0.5);
    expect(cellRecall(pred, gold)).toBe(1);
    expect(tupleCardinality(pred, gold)).toBe(1);
    expect(qatchScore(pred, gold, false).qatch).toBeCloseTo((0.5 + 1 + 1) / 3, 12);
  });

  it("computes recall and tuple cardinality from a prediction missing rows", () => {
    const gold = [["Ann"], ["Bob"], ["Dee"], ["Eve"]];
    const pred = [["Ann"]];
    expect(cellPrecision(pred, gold)).toBe(1);
    expect(cellRecall(pred, gold)).toBe(0.25);
    expect(tupleCardinality(pred, gold)).toBe(0.25);
    expect(qatchScore(pred, gold, false).qatch).toBeCloseTo(0.5, 12);
  });

  it("normalises cells like EX does (1 = 1.0, '1' ≠ 1)", () => {
    expect(cellPrecision([[1.0]], [[1]])).toBe(1);
    expect(cellPrecision([["1"]], [[1]])).toBe(0);
  });

  it("scores QATCH 1 when EX holds or both results are empty, 0 when exactly one is empty", () => {
    expect(qatchScore([["b"], ["a"]], [["a"], ["b"]], true).qatch).toBe(1);
    expect(qatchScore([], [], false).qatch).toBe(1);
    expect(qatchScore([], [["a"]], false).qatch).toBe(0);
    expect(qatchScore([["a"]], [], false).qatch).toBe(0);
  });

  it("gates QATCH: 0 when not executable, 0.1 floor for executable well-formatted queries, raw otherwise", () => {
    expect(gatedQatch(false, 0.9, true)).toBe(0);
    expect(gatedQatch(true, 0.05, true)).toBe(0.1);
    expect(gatedQatch(true, 0.1, true)).toBe(0.1);
    expect(gatedQatch(true, 0.05, false)).toBe(0.05);
    expect(gatedQatch(true, 0.7, true)).toBe(0.7);
  });
});

describe("ReEx components", () => {
  it("exploration is 0 when any probe repeats, even with a correct answer", () => {
    const probes = [
      { sql: "SELECT name FROM singer", repeated: false },
      { sql: "select  name from singer;", repeated: true },
    ];
    expect(explorationReward(probes, true, 2)).toBe(0);
  });

  it("exploration is 1 for a correct final result and σ(n) of the raw interaction count otherwise", () => {
    expect(explorationReward([], true, 0)).toBe(1);
    expect(
      explorationReward(
        [
          { sql: "a", repeated: false },
          { sql: "b", repeated: false },
          { sql: "c", repeated: false },
        ],
        false,
        3,
      ),
    ).toBeCloseTo(1 / (1 + Math.exp(-3)), 12);
    expect(explorationReward([], false, 0)).toBe(0.5);
    expect(sigmoid(2)).toBeCloseTo(0.8807970779778823, 12);
  });

  it("em ignores whitespace, keyword case and a trailing semicolon but not literals", () => {
    expect(emReward("select name\n FROM singer where country = 'France';", GOLD)).toBe(1);
    expect(emReward("SELECT name FROM singer WHERE country = 'france'", GOLD)).toBe(0);
    expect(emReward(null, GOLD)).toBe(0);
  });

  it("entity reward is the share of gold tables and columns the final SQL references (aliases resolved)", () => {
    const schema = { tables: [{ name: "singer", columns: [{ name: "singer_id" }, { name: "name" }, { name: "country" }, { name: "age" }] }] };
    expect(entityReward("SELECT T1.name FROM singer AS T1 WHERE T1.country = 'Spain'", GOLD, schema)).toBe(1);
    expect(entityReward("SELECT name FROM singer", GOLD, schema)).toBeCloseTo(2 / 3, 12);
    expect(entityReward(null, GOLD, schema)).toBe(0);
  });
});

describe("format checks", () => {
  it("accepts the execution-aware template and rejects text outside tags", () => {
    expect(strictFormat(response(["SELECT 1"], GOLD), "execution-aware").ok).toBe(true);
    expect(strictFormat(`Sure! ${response([], GOLD)}`, "execution-aware").ok).toBe(false);
  });

  it("accepts the papers' two-block templates when asked, and a soft format with extra text", () => {
    const r = "<reasoning>r</reasoning>\n<answer>SELECT 1</answer><|im_end|>";
    expect(strictFormat(r, "standard", "reasoning-answer").ok).toBe(true);
    expect(strictFormat(r, "standard", "think-answer").ok).toBe(false);
    expect(softFormat(`Hello <think>x</think> and then <final_sql>SELECT 1</final_sql> bye`)).toBe(true);
    expect(softFormat("<final_sql>SELECT 1</final_sql>")).toBe(false);
  });
});

describe("ReEx presets", () => {
  const cases: [string, number][] = [
    ["MaxTune", 2 + 1 + 3 * 2 + 1 + 2],
    ["Base", 1.5 + 0.8 + 1.5 * 2 + 0.8 + 0.5],
    ["HighExploration", 1.5 + 0.8 + 1.5 * 2 + 0.8 + 2],
    ["HighFormat-EX", 2 + 0.8 + 3 * 2 + 0.8 + 0.5],
    ["Uniform", 1 + 1 + 2 + 1 + 1],
  ];
  it.each(cases)("%s weighs a perfect response to %d", (preset, total) => {
    const r = rewardFromFacts(facts(), resolveRewardSpec({ preset }));
    expect(r.components).toEqual({ format: 1, em: 1, exec: 2, entity: 1, exploration: 1 });
    expect(r.total).toBeCloseTo(total, 12);
  });

  it("weighs a wrong but valid answer with two probes: exec 1, exploration σ(2)", () => {
    const f = facts({
      finalSql: "SELECT name FROM singer WHERE country = 'Spain'",
      finalResult: ok(["name"], [["Cid"]]),
      correct: false,
      em: 0,
      interactions: 2,
      probes: [
        { sql: "a", repeated: false },
        { sql: "b", repeated: false },
      ],
    });
    const r = rewardFromFacts(f, resolveRewardSpec());
    expect(r.preset).toBe("maxtune");
    expect(r.components.exec).toBe(1);
    expect(r.details.exec_valid).toBe(1);
    expect(r.details.exec_result).toBe(0);
    expect(r.total).toBeCloseTo(2 * 1 + 0 + 3 * 1 + 1 * 1 + 2 * sigmoid(2), 12);
  });

  it("applies custom weights, and turning exploration off zeroes its weight but still logs it", () => {
    const custom = rewardFromFacts(facts(), resolveRewardSpec({ preset: "custom", weights: { exec: 1, format: 0.5 } }));
    expect(custom.total).toBeCloseTo(0.5 + 2, 12);
    const noExpl = rewardFromFacts(facts(), resolveRewardSpec({ exploration: false }));
    expect(noExpl.weights.exploration).toBe(0);
    expect(noExpl.components.exploration).toBe(1);
    expect(noExpl.total).toBeCloseTo(2 + 1 + 6 + 1, 12);
    const overridden = resolveRewardSpec({ preset: "base", weights: { em: 5 } });
    expect(overridden.weights).toEqual({ ...REEX_WEIGHT_PRESETS.base, em: 5 });
  });

  it("rejects unknown presets and weights on presets that have none", () => {
    expect(() => resolveRewardSpec({ preset: "nope" })).toThrow(/unknown reward preset/);
    expect(() => resolveRewardSpec({ preset: "arctic", weights: { em: 1 } })).toThrow(/ReEx presets only/);
  });
});

describe("other papers' rewards", () => {
  it("Think2SQL mixes 0.95 gated QATCH with 0.05 format", () => {
    const f = facts({
      finalResult: ok(
        ["name", "age"],
        [
          ["Ann", 31],
          ["Bob", 42],
          ["Dee", 55],
        ],
      ),
      correct: false,
    });
    const r = rewardFromFacts(f, resolveRewardSpec({ preset: "think2sql" }));
    expect(r.details.cell_precision).toBe(0.5);
    expect(r.components.qatch).toBeCloseTo(2.5 / 3, 12);
    expect(r.total).toBeCloseTo(0.95 * (2.5 / 3) + 0.05, 12);
    const broken = rewardFromFacts(
      facts({ finalResult: failed, executable: false, correct: false, formatOk: false }),
      resolveRewardSpec({ preset: "think2sql" }),
    );
    expect(broken.total).toBe(0);
    const numbers = Array.from({ length: 30 }, (_, k) => [1000 + k]);
    const floor = rewardFromFacts(facts({ finalResult: ok(["x"], numbers), correct: false }), resolveRewardSpec({ preset: "think2sql" }));
    expect(floor.details.qatch_raw).toBeCloseTo((0 + 0 + 3 / 30) / 3, 12);
    expect(floor.components.qatch).toBe(0.1);
  });

  it("SQL-R1: +1 +2 +3 and a length term on a correct answer; −1 format, −2 execution, −3 result", () => {
    const spec = resolveRewardSpec({ preset: "sql-r1", lengthTokens: 512 });
    expect(rewardFromFacts(facts(), spec).total).toBeCloseTo(1 + 2 + 3 + 0.5 * (256 / 512), 12);
    expect(rewardFromFacts(facts({ formatOk: false }), spec).total).toBe(-1);
    expect(rewardFromFacts(facts({ finalResult: failed, executable: false, correct: false }), spec).total).toBe(1 - 2);
    expect(rewardFromFacts(facts({ finalResult: ok(["name"], [["Cid"]]), correct: false }), spec).total).toBe(1 + 2 - 3);
    expect(rewardFromFacts(facts({ generatedTokens: 5000 }), spec).components.length).toBe(0.5);
  });

  it("CogniSQL: format 1, soft format 0.5, correctness 2, −0.5 past k tokens", () => {
    const spec = resolveRewardSpec({ preset: "cognisql", lengthTokens: 100 });
    expect(rewardFromFacts(facts({ generatedTokens: 50 }), spec).total).toBe(3.5);
    expect(rewardFromFacts(facts({ generatedTokens: 101 }), spec).total).toBe(3);
    expect(rewardFromFacts(facts({ formatOk: false, correct: false, generatedTokens: 10 }), spec).total).toBe(0.5);
  });

  it("PaVeRL: 10 when correct, 10·EXf for matched gold columns, 0.5 runs-but-wrong, 0 on error", () => {
    const spec = resolveRewardSpec({ preset: "paverl" });
    const gold = ok(
      ["name", "age"],
      [
        ["Ann", 31],
        ["Bob", 42],
      ],
    );
    expect(rewardFromFacts(facts({ goldResult: gold, finalResult: gold }), spec).total).toBe(10);
    expect(
      columnMatchShare(
        [
          ["Bob", "France"],
          ["Ann", "France"],
        ],
        gold.ok ? gold.rows : [],
      ),
    ).toBe(0.5);
    expect(
      rewardFromFacts(
        facts({
          goldResult: gold,
          finalResult: ok(
            ["name", "country"],
            [
              ["Bob", "France"],
              ["Ann", "France"],
            ],
          ),
          correct: false,
        }),
        spec,
      ).total,
    ).toBe(5);
    expect(rewardFromFacts(facts({ goldResult: gold, finalResult: ok(["x"], [[7]]), correct: false }), spec).total).toBe(0.5);
    expect(rewardFromFacts(facts({ goldResult: gold, finalResult: failed, executable: false, correct: false }), spec).total).toBe(0);
  });

  it("Arctic: 1 correct, 0.1 runs with tags, 0 otherwise", () => {
    const spec = resolveRewardSpec({ preset: "arctic" });
    expect(rewardFromFacts(facts(), spec).total).toBe(1);
    expect(rewardFromFacts(facts({ correct: false }), spec).total).toBe(0.1);
    expect(rewardFromFacts(facts({ correct: false, formatOk: false }), spec).total).toBe(0);
    expect(rewardFromFacts(facts({ correct: false, executable: false, finalResult: failed }), spec).total).toBe(0);
  });
});

describe("scoreResponse over a real SQLite file", () => {
  it("executes final and gold SQL, reads probes and repeats from the response, and scores every component", async () => {
    const executor = new CountingExecutor(pool);
    const goldCache = new GoldCache();
    const text = response(
      ["SELECT DISTINCT country FROM singer", "SELECT name, country FROM singer"],
      "SELECT T1.name FROM singer AS T1 WHERE T1.country = 'France'",
    );
    const { reward, facts: f } = await scoreResponse({ response: text, goldSql: GOLD, dbPath: fx.dbPath }, { preset: "maxtune" }, { executor, goldCache });
    expect(f.correct).toBe(true);
    expect(f.interactions).toBe(2);
    expect(reward.components).toEqual({ format: 1, em: 0, exec: 2, entity: 1, exploration: 1 });
    expect(reward.total).toBe(2 + 0 + 6 + 1 + 2);

    const wrong = response(["SELECT name FROM singer", "select name from singer;"], "SELECT name, age FROM singer WHERE country = 'France'");
    const second = await scoreResponse({ response: wrong, goldSql: GOLD, dbPath: fx.dbPath }, { preset: "think2sql" }, { executor, goldCache });
    expect(second.facts.probes.map((p) => p.repeated)).toEqual([false, true]);
    expect(second.reward.details.cell_precision).toBe(0.5);
    expect(second.reward.components.qatch).toBeCloseTo(2.5 / 3, 12);
    const maxtune = rewardFromFacts(second.facts, resolveRewardSpec());
    expect(maxtune.components.exploration).toBe(0);
    expect(executor.calls.filter((s) => s === GOLD)).toHaveLength(1);
  });

  it("treats a missing final SQL as not executable and a syntax error as invalid", async () => {
    const executor = new CountingExecutor(pool);
    const none = await scoreResponse({ response: "<think>hmm</think>", goldSql: GOLD, dbPath: fx.dbPath }, {}, { executor });
    expect(none.facts.finalSql).toBeNull();
    expect(none.reward.components.exec).toBe(0);
    const bad = await scoreResponse({ response: response([], "SELECT name FROM singer WHERE"), goldSql: GOLD, dbPath: fx.dbPath }, {}, { executor });
    expect(bad.facts.executable).toBe(false);
    expect(bad.reward.components.exec).toBe(0);
    expect(bad.reward.components.exploration).toBe(0.5);
  });
});

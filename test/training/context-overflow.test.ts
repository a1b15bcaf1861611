/**
 * A question whose prompt overflows the policy's context window is skipped, not fatal, wherever the trainer samples
 * groups outside the GRPO step loop: the curriculum screen, rejection sampling and the pre-flight. Scripted policy
 * with an 8,000-token context (one token per character) over the real fixture database.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { parseTrainConfig, runPreflight, runRejectionSampling, runTraining } from "../../src/training/index.js";
import { readMetrics, type LearnerStep } from "../../src/training/testing.js";
import { GOLD, makeTrainingFixture, QUESTIONS, type TrainingFixture } from "./fixtures.js";

let fx: TrainingFixture;
let model: string;
let dataset: string;
const LONG_ID = 4;

beforeAll(() => {
  fx = makeTrainingFixture();
  model = join(fx.dir, "initial.gguf");
  writeFileSync(model, "weights-0");
  dataset = join(fx.dir, "train-long.json");
  const long = {
    question_id: LONG_ID,
    db_id: "concerts",
    question: "How old is Ann?",
    evidence: "Ann is a singer. ".repeat(600),
    SQL: "SELECT age FROM singer WHERE name = 'Ann'",
  };
  writeFileSync(dataset, JSON.stringify([...QUESTIONS, long]));
});
afterAll(() => rmSync(fx.dir, { recursive: true, force: true }));

/** One probe, then a final answer that alternates right and wrong per trajectory, in an 8,000-token context. */
function smallContextPolicy(): ScriptedPolicy {
  const seen = new Map<string, number>();
  return new ScriptedPolicy(
    (ctx) => {
      if (!seen.has(ctx.trajectoryId)) seen.set(ctx.trajectoryId, seen.size);
      if (!ctx.text.includes("</result>")) return "<think>look</think>\n<intermediate_sql>SELECT DISTINCT country FROM singer</intermediate_sql>";
      return `<think>ok</think>\n<final_sql>${seen.get(ctx.trajectoryId)! % 2 === 0 ? GOLD : "SELECT name FROM singer"}</final_sql>`;
    },
    { contextSize: 8000 },
  );
}

const learner: LearnerStep = async (req) => {
  writeFileSync(req.out, `weights-${req.step}`);
  return { kl: null, loss: 0.5, grad_norm: 0.5, clip_frac: 0 };
};

function configFor(runDir: string, extra: Record<string, unknown> = {}) {
  return parseTrainConfig(
    {
      model,
      runDir,
      data: { dataset, dbRoot: fx.dbRoot },
      steps: 1,
      questionsPerStep: 2,
      groupSize: 2,
      maxTokens: 400,
      klBeta: 0,
      reward: { preset: "outcome" },
      ...extra,
    },
    "grpo",
  );
}

describe("a prompt longer than the context window", () => {
  it("is left out of the curriculum with a log line, and the screen keeps the rest", async () => {
    const runDir = join(fx.dir, "run-curriculum");
    const lines: string[] = [];
    await runTraining(configFor(runDir, { curriculum: { samples: 4 } }), {
      mode: "grpo",
      createPolicy: async () => smallContextPolicy(),
      learner,
      progress: null,
      log: (l) => lines.push(l),
    });
    const screened = JSON.parse(readFileSync(join(runDir, "curriculum.json"), "utf8")) as {
      passRates: Record<string, number>;
      kept: number[];
      skipped: number[];
    };
    expect(screened.skipped).toEqual([LONG_ID]);
    expect(Object.keys(screened.passRates).sort()).toEqual(["1", "2", "3"]);
    expect(screened.kept).toEqual([1]);
    expect(lines.join("\n")).toMatch(/curriculum: question 4 skipped: CONTEXT_EXHAUSTED: the prompt has \d+ tokens; the context window holds 8000/);
    expect(readMetrics(join(runDir, "metrics.jsonl"))).toHaveLength(1);
  });

  it("is recorded as a skipped group by rejection sampling, which samples the other groups", async () => {
    const config = configFor(join(fx.dir, "run-rejection"));
    const result = await runRejectionSampling(config, { groups: 4, createPolicy: async () => smallContextPolicy() });
    expect(result.groups.map((g) => g.index)).toEqual([0, 1, 2, 3]);
    const long = result.groups.find((g) => g.questionId === LONG_ID)!;
    expect(long).toMatchObject({ sampled: 0, right: 0, traces: [] });
    expect(long.skipped).toMatch(/^CONTEXT_EXHAUSTED: the prompt has \d+ tokens/);
    const rest = result.groups.filter((g) => g.questionId !== LONG_ID);
    for (const g of rest) {
      expect(g.sampled).toBe(2);
      expect(g.skipped).toBeUndefined();
    }
    expect(rest.find((g) => g.questionId === 1)!.right).toBe(1);
  });

  it("is listed as skipped by the pre-flight and left out of its figures", async () => {
    const config = configFor(join(fx.dir, "run-preflight"));
    const result = await runPreflight(config, { questions: 4, samples: 2, createPolicy: async () => smallContextPolicy() });
    expect(result.skipped.map((k) => k.questionId)).toEqual([LONG_ID]);
    expect(result.skipped[0]!.message).toMatch(/^CONTEXT_EXHAUSTED/);
    expect(result.outcomes.map((o) => o.questionId).sort()).toEqual([1, 2, 3]);
    expect(result.summary.n).toBe(3);
    expect(result.summary.sampled).toBe(6);
  });
});

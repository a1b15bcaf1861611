/**
 * The GRPO signal rules: correctness-first rewards, advantage diagnostics, dynamic sampling, the
 * curriculum, the end of turn in the loss and the learner options, through the training loop with a
 * scripted policy and a fake learner.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { parseTrainConfig, runTraining } from "../../src/training/index.js";
import {
  advantageDiagnostics,
  computeAdvantages,
  correctnessFirst,
  learnerRequestFile,
  readExperience,
  readMetrics,
  type LearnerRequest,
  type LearnerStep,
} from "../../src/training/testing.js";
import { GOLD, makeTrainingFixture, type TrainingFixture } from "./fixtures.js";

let fx: TrainingFixture;
let model: string;
beforeAll(() => {
  fx = makeTrainingFixture();
  model = join(fx.dir, "initial.gguf");
  writeFileSync(model, "weights-0");
});
afterAll(() => rmSync(fx.dir, { recursive: true, force: true }));

describe("correctness-first rewards", () => {
  it("rank every right rollout above every wrong one, whatever the shaping (the MaxTune case of issue #28)", () => {
    // right 12.0; wrong 7.5 (runs), 4.1 (fails), 2.5 (repeated probe); a right one with less shaping, 9.0
    const g = [
      { total: 12, correct: true },
      { total: 9, correct: true },
      { total: 7.5, correct: false },
      { total: 4.1, correct: false },
      { total: 2.5, correct: false },
    ];
    const [s] = correctnessFirst([g], 0.1);
    expect(s![0]).toBeCloseTo(1.1, 12);
    expect(s![1]).toBeCloseTo(1.0, 12);
    expect(s![2]).toBeCloseTo(0.1, 12);
    expect(s![3]).toBeCloseTo((0.1 * 1.6) / 5, 12);
    expect(s![4]).toBe(0);
    expect(Math.min(s![0]!, s![1]!)).toBeGreaterThan(Math.max(s![2]!, s![3]!, s![4]!));
    expect(() => correctnessFirst([g], 1)).toThrow(/shaping scale/);
  });

  it("leave a group whose rollouts tie within each correctness class with pure 0/1 signals", () => {
    expect(
      correctnessFirst([
        [
          { total: 5, correct: true },
          { total: 5, correct: true },
          { total: 1, correct: false },
        ],
      ]),
    ).toEqual([[1, 1, 0]]);
  });
});

describe("advantage diagnostics", () => {
  it("attribute a correct-vs-wrong group's advantage to correctness and a shaping-only group's to shaping", () => {
    const contrast = [
      { total: 1, correct: true },
      { total: 0, correct: false },
    ];
    const shaping = [
      { total: 7.5, correct: false },
      { total: 4.1, correct: false },
    ];
    const flat = [
      { total: 3, correct: false },
      { total: 3, correct: false },
    ];
    const groups = [contrast, shaping, flat];
    const adv = computeAdvantages(
      groups.map((g) => g.map((r) => r.total)),
      "group",
    ).advantages;
    const d = advantageDiagnostics(groups, adv);
    expect(d.informativeShare).toBeCloseTo(2 / 3, 12);
    expect(d.contrastShare).toBeCloseTo(1 / 3, 12);
    expect(d.correctnessShare).toBeCloseTo(0.5, 5); // both groups move |A| = 1 per rollout
    expect(advantageDiagnostics([contrast], computeAdvantages([[1, 0]], "group").advantages).correctnessShare).toBeCloseTo(1, 5);
    expect(advantageDiagnostics([shaping], computeAdvantages([[7.5, 4.1]], "group").advantages).correctnessShare).toBe(0);
    expect(advantageDiagnostics([flat], [[0, 0]]).correctnessShare).toBeNull();
  });
});

/**
 * One probe, then a final answer that alternates per trajectory (`even` for the 1st, 3rd, …); by default GOLD and a
 * wrong answer that runs, so only question 1 is ever answered right.
 */
function policyFor(
  final: (even: boolean, prompt: string) => string = (even) => (even ? GOLD : "SELECT name FROM singer"),
  options: ConstructorParameters<typeof ScriptedPolicy>[1] = {},
): ScriptedPolicy {
  let n = 0;
  const seen = new Map<string, number>();
  return new ScriptedPolicy((ctx) => {
    if (!seen.has(ctx.trajectoryId)) seen.set(ctx.trajectoryId, n++);
    const even = seen.get(ctx.trajectoryId)! % 2 === 0;
    if (!ctx.text.includes("</result>")) return `<think>look</think>\n<intermediate_sql>SELECT DISTINCT country FROM singer</intermediate_sql>`;
    return `<think>ok</think>\n<final_sql>${final(even, ctx.prompt)}</final_sql>`;
  }, options);
}

function fakeLearner(requests: LearnerRequest[]): LearnerStep {
  return async (req) => {
    requests.push(req);
    writeFileSync(req.out, `weights-${req.step}`);
    if (req.master) writeFileSync(req.master, `master-${req.step}`);
    return { kl: null, loss: 0.5, grad_norm: 0.5, clip_frac: 0, old_logprob_abs_diff: 1e-4 * req.step, split_half: { cosine_mean: 0.25 } };
  };
}

/** A one-step GRPO config over the fixture (2 questions a step, groups of 2, outcome reward), with `extra` on top. */
function oneStepConfig(runDir: string, extra: Record<string, unknown>) {
  const base = { model, runDir, data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot }, steps: 1, questionsPerStep: 2, groupSize: 2, maxTokens: 400 };
  return parseTrainConfig({ ...base, reward: { preset: "outcome" }, ...extra }, "grpo");
}

/** One GRPO step over the fixture (2 questions a step, groups of 4, outcome reward) with the fake learner: its metrics row, log lines and experience. */
async function oneDynamicStep(
  name: string,
  o: { dynamicSampling: Record<string, unknown>; data?: Record<string, unknown>; advantage?: string; policy?: () => ScriptedPolicy },
) {
  const runDir = join(fx.dir, name);
  const config = parseTrainConfig(
    {
      model,
      runDir,
      data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, ...o.data },
      steps: 1,
      questionsPerStep: 2,
      groupSize: 4,
      maxTokens: 400,
      klBeta: 0,
      ...(o.advantage ? { advantage: o.advantage } : {}),
      dynamicSampling: o.dynamicSampling,
      reward: { preset: "outcome" },
    },
    "grpo",
  );
  const lines: string[] = [];
  const policy = o.policy ?? (() => policyFor());
  await runTraining(config, { mode: "grpo", createPolicy: async () => policy(), learner: fakeLearner([]), progress: null, log: (l) => lines.push(l) });
  const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
  return { row: readMetrics(join(runDir, "metrics.jsonl"))[0]!, lines, records };
}

describe("the training loop's signal options", () => {
  it("drops groups without a correct-vs-wrong contrast and refills them, and logs where the advantage came from", async () => {
    const runDir = join(fx.dir, "run-dynamic");
    const requests: LearnerRequest[] = [];
    const config = parseTrainConfig(
      {
        model,
        runDir,
        data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot },
        steps: 2,
        questionsPerStep: 2,
        groupSize: 4,
        maxTokens: 400,
        klBeta: 0,
        checkpointEvery: 1,
        advantage: "none",
        dynamicSampling: { on: "correctness", maxExtra: 2 },
        reward: { preset: "reex-explore" },
      },
      "grpo",
    );
    await runTraining(config, { mode: "grpo", createPolicy: async () => policyFor(), learner: fakeLearner(requests), progress: null, log: () => undefined });
    const rows = readMetrics(join(runDir, "metrics.jsonl"));
    for (const r of rows) {
      expect(r.groups).toBe(2);
      expect(r.sampled_groups).toBeGreaterThan(2);
      expect(r.informative_share).toBe(1);
      expect(r.contrast_share).toBe(1);
      expect(r.correctness_share).toBeGreaterThan(0.9);
      expect(r.old_logprob_abs_diff).toBeCloseTo(1e-4 * r.step, 12);
      expect(r.split_half_cosine).toBe(0.25);
    }
    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(new Set(records.map((r) => r.question_id))).toEqual(new Set([1]));
    // correctness-first (auto for reex-explore): right rollouts get signal 1 + shaping, wrong ones 0 + shaping, < 1
    for (const r of records) expect(r.signal).toBeDefined();
    const right = records.filter((r) => r.final_sql === GOLD);
    const wrong = records.filter((r) => r.final_sql !== GOLD);
    expect(Math.min(...right.map((r) => r.advantage))).toBeGreaterThan(Math.max(...wrong.map((r) => r.advantage)));
    // the end of turn closes each answered rollout, in the loss, with no sampling log-prob
    const eot = new ScriptedPolicy(() => "").tokenize("<|im_end|>");
    for (const r of records) {
      expect(r.tokens.slice(-eot.length)).toEqual(eot);
      expect(r.mask.slice(-eot.length)).toEqual(eot.map(() => 1));
      expect(r.old_logprobs!.slice(-eot.length)).toEqual(eot.map(() => null));
    }
    // float32 masters travel with the run and its checkpoints
    expect(requests.every((r) => r.master === join(runDir, "master.pt"))).toBe(true);
    expect(readFileSync(join(runDir, "checkpoints", "step-000002.master"), "utf8")).toBe("master-2");
  });

  it("keeps sampling up to its cap, then logs that the step trains on fewer groups (or, with none informative, on those it sampled first)", async () => {
    const run = (name: string, data: Record<string, unknown>, maxExtra: number) =>
      oneDynamicStep(name, { data, dynamicSampling: { on: "correctness", maxExtra } });
    // three questions, only the first ever answered right: 2 + 0.5 × 2 = 3 groups sampled, 1 informative
    const short = await run("run-dynamic-cap", {}, 0.5);
    expect(short.row.sampled_groups).toBe(3);
    expect(short.row.groups).toBe(1);
    expect(short.lines.join("\n")).toContain(
      "step 1: dynamic sampling reached its cap of 3 groups (questionsPerStep 2 + maxExtra 0.5 × 2) with 1 informative (correctness); training on those 1",
    );
    // the two questions never answered right: 4 sampled, none informative, the first 2 trained on
    const none = await run("run-dynamic-none", { offset: 1 }, 1);
    expect(none.row.sampled_groups).toBe(4);
    expect(none.row.groups).toBe(2);
    expect(none.lines.join("\n")).toContain("with 0 informative (correctness); none: training on the first 2 sampled");
    // a step that fills logs nothing of the kind
    const full = await run("run-dynamic-full", { limit: 1 }, 2);
    expect(full.row.groups).toBe(2);
    expect(full.lines.join("\n")).not.toContain("dynamic sampling reached its cap");
  });

  it("skips a question whose prompt overflows the context window with a log line, and trains on the rest of the step", async () => {
    const dataset = join(fx.dir, "train-long.json");
    const questions = JSON.parse(readFileSync(fx.datasetFile, "utf8")) as Record<string, unknown>[];
    const long = {
      question_id: 4,
      db_id: "concerts",
      question: "How old is Ann?",
      evidence: "Ann is a singer. ".repeat(600),
      SQL: "SELECT age FROM singer WHERE name = 'Ann'",
    };
    writeFileSync(dataset, JSON.stringify([...questions, long]));
    const makePolicy = () => policyFor(undefined, { contextSize: 8000 });
    const { row, lines, records } = await oneDynamicStep("run-skip-long", {
      data: { dataset },
      dynamicSampling: { on: "correctness", maxExtra: 1 },
      policy: makePolicy,
    });
    expect(lines.join("\n")).toMatch(/step 1: question 4 skipped: CONTEXT_EXHAUSTED: the prompt has \d+ tokens; the context window holds 8000/);
    expect(row.skipped_questions).toEqual(["4"]);
    expect(row.sampled_groups).toBe(3);
    expect(records.length).toBeGreaterThan(0);
    expect(records.some((r) => r.question_id === 4)).toBe(false);
  });

  it("with train: signal, also trains on the groups whose rewards differ without a contrast, and samples no more for them", async () => {
    // question 1 alternates right and wrong; the others alternate a wrong answer that runs and one that fails
    const makePolicy = () =>
      policyFor((even, prompt) =>
        prompt.includes("singers from France") ? (even ? GOLD : "SELECT name FROM singer") : even ? "SELECT name FROM singer" : "SELECT nope FROM singer",
      );
    const run = (name: string, train: "informative" | "signal") =>
      oneDynamicStep(name, { dynamicSampling: { on: "correctness", maxExtra: 0.5, train }, advantage: "none", policy: makePolicy });
    const informative = await run("run-train-informative", "informative");
    expect(informative.row.sampled_groups).toBe(3);
    expect(new Set(informative.records.map((r) => r.question_id))).toEqual(new Set([1]));
    const signal = await run("run-train-signal", "signal");
    expect(signal.row.sampled_groups).toBe(3);
    expect(signal.row.groups).toBe(3);
    expect(new Set(signal.records.map((r) => r.question_id))).toEqual(new Set([1, 2, 3]));
    expect(signal.lines.join("\n")).toContain("with 1 informative (correctness); training on those 1 and 2 with a reward signal only");
    // an all-wrong group's advantages rank the answer that runs above the one that fails, and sum to zero
    const q2 = signal.records.filter((r) => r.question_id === 2);
    const runs = q2.filter((r) => r.final_sql === "SELECT name FROM singer");
    const fails = q2.filter((r) => r.final_sql === "SELECT nope FROM singer");
    expect(runs.length).toBeGreaterThan(0);
    expect(fails.length).toBeGreaterThan(0);
    expect(Math.min(...runs.map((r) => r.advantage))).toBeGreaterThan(0);
    expect(Math.max(...fails.map((r) => r.advantage))).toBeLessThan(0);
    expect(q2.reduce((a, r) => a + r.advantage, 0)).toBeCloseTo(0, 12);
  });

  it("screens the questions once with the start policy and trains only on those it sometimes solves", async () => {
    const runDir = join(fx.dir, "run-curriculum");
    const requests: LearnerRequest[] = [];
    const config = oneStepConfig(runDir, { curriculum: { samples: 4 } });
    const lines: string[] = [];
    await runTraining(config, {
      mode: "grpo",
      createPolicy: async () => policyFor(),
      learner: fakeLearner(requests),
      progress: null,
      log: (l) => lines.push(l),
    });
    const screened = JSON.parse(readFileSync(join(runDir, "curriculum.json"), "utf8")) as { passRates: Record<string, number>; kept: number[] };
    expect(screened.passRates).toEqual({ "1": 0.5, "2": 0, "3": 0 });
    expect(screened.kept).toEqual([1]);
    expect(lines.join("\n")).toContain("curriculum kept 1 of 3 questions");
    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(new Set(records.map((r) => r.question_id))).toEqual(new Set([1]));
  });

  it("refuses a curriculum that keeps no question", async () => {
    const config = parseTrainConfig(
      {
        model,
        runDir: join(fx.dir, "run-none"),
        data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, offset: 1 },
        steps: 1,
        groupSize: 2,
        maxTokens: 400,
        curriculum: { samples: 2 },
      },
      "grpo",
    );
    await expect(
      runTraining(config, { mode: "grpo", createPolicy: async () => policyFor(), learner: fakeLearner([]), progress: null, log: () => undefined }),
    ).rejects.toMatchObject({ code: "DATASET_INVALID" });
  });

  it("samples a constrained run's rollouts under the served grammars and leaves their old log-probs to the learner", async () => {
    const records: Record<string, unknown[]> = {};
    for (const constrained of [false, true]) {
      const runDir = join(fx.dir, `run-constrained-${constrained}`);
      const config = oneStepConfig(runDir, { constrained });
      const policy = policyFor();
      await runTraining(config, { mode: "grpo", createPolicy: async () => policy, learner: fakeLearner([]), progress: null, log: () => undefined });
      const grammars = policy.calls.map((c) => c.options.grammar);
      expect(grammars.length).toBeGreaterThan(0);
      if (constrained) for (const g of grammars) expect(g).toMatch(/root ::=/);
      else expect(grammars.every((g) => g === undefined)).toBe(true);
      records[String(constrained)] = (await readExperience(join(runDir, "experience", "step-000001.jsonl"))).map((r) => r.old_logprobs);
    }
    expect(records.true!.length).toBeGreaterThan(0);
    expect(records.true!.every((o) => o === null)).toBe(true);
    expect(records.false!.every((o) => Array.isArray(o))).toBe(true);
  });

  it("adds a step's replay traces to its experience with their fixed advantage, unshuffled in the shuffled arm", async () => {
    const traces = join(fx.dir, "replay.jsonl");
    const answer = (sql: string) => `<think>ok</think>\n<final_sql>${sql}</final_sql>`;
    writeFileSync(
      traces,
      [
        { prompt: "Names of the singers from France?", response: answer(GOLD), question_id: "r1" },
        { prompt: "How many singers are there?", response: answer("SELECT COUNT(*) FROM singer"), question_id: "r2" },
        { prompt: "Concerts in 2015?", response: answer("SELECT concert_name FROM concert WHERE year = 2015"), question_id: "r3" },
      ]
        .map((t) => JSON.stringify(t))
        .join("\n"),
    );
    for (const shuffleAdvantages of [false, true]) {
      const runDir = join(fx.dir, `run-replay-${shuffleAdvantages}`);
      const config = oneStepConfig(runDir, { replay: { traces, perStep: 2, advantage: 0.5 }, shuffleAdvantages });
      await runTraining(config, { mode: "grpo", createPolicy: async () => policyFor(), learner: fakeLearner([]), progress: null, log: () => undefined });
      const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
      const replayed = records.filter((r) => String(r.question_id).startsWith("r"));
      expect(replayed).toHaveLength(2);
      expect(new Set(replayed.map((r) => r.question_id)).size).toBe(2);
      for (const r of replayed) {
        expect(r.advantage).toBe(0.5);
        expect(r.old_logprobs).toBeNull();
        expect(r.mask.every((m) => m === 1)).toBe(true);
      }
      expect(records.length - replayed.length).toBe(4);
      expect(readMetrics(join(runDir, "metrics.jsonl"))[0]!.replay_records).toBe(2);
    }
  });

  it("skips a replay trace whose prompt or whole record overflows the policy's context window, with a log line", async () => {
    const traces = join(fx.dir, "replay-long.jsonl");
    const answer = (sql: string) => `<think>ok</think>\n<final_sql>${sql}</final_sql>`;
    writeFileSync(
      traces,
      [
        { prompt: "How many singers are there?", response: answer("SELECT COUNT(*) FROM singer"), question_id: "r1" },
        { prompt: `${"Which singer? ".repeat(5000)}`, response: answer(GOLD), question_id: "r2" },
        { prompt: "Concerts in 2015?", response: answer(`SELECT concert_name FROM concert WHERE year = 2015 ${"AND 1 = 1 ".repeat(5000)}`), question_id: "r3" },
      ]
        .map((t) => JSON.stringify(t))
        .join("\n"),
    );
    const runDir = join(fx.dir, "run-replay-long");
    const lines: string[] = [];
    const config = oneStepConfig(runDir, { replay: { traces, perStep: 3, advantage: 1 } });
    await runTraining(config, {
      mode: "grpo",
      createPolicy: async () => policyFor(undefined, { contextSize: 8000 }),
      learner: fakeLearner([]),
      progress: null,
      log: (l) => lines.push(l),
    });
    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(records.filter((r) => String(r.question_id).startsWith("r")).map((r) => r.question_id)).toEqual(["r1"]);
    expect(readMetrics(join(runDir, "metrics.jsonl"))[0]!.replay_records).toBe(1);
    expect(lines.filter((l) => /replay trace \d+ skipped/.test(l))).toHaveLength(2);
  });

  it("permutes the step's advantages across its rollouts in a shuffled-advantage control arm", async () => {
    const runs: number[][] = [];
    for (const shuffle of [false, true]) {
      const runDir = join(fx.dir, `run-shuffle-${shuffle}`);
      const config = parseTrainConfig(
        {
          model,
          runDir,
          data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 1 },
          steps: 1,
          questionsPerStep: 2,
          groupSize: 4,
          maxTokens: 400,
          klBeta: 0,
          shuffleAdvantages: shuffle,
        },
        "grpo",
      );
      await runTraining(config, { mode: "grpo", createPolicy: async () => policyFor(), learner: fakeLearner([]), progress: null, log: () => undefined });
      runs.push((await readExperience(join(runDir, "experience", "step-000001.jsonl"))).map((r) => r.advantage));
    }
    const [real, shuffled] = runs as [number[], number[]];
    expect([...shuffled].sort()).toEqual([...real].sort());
    expect(shuffled).not.toEqual(real);
  });

  it("passes the recipe's learner options on the command line", () => {
    const c = parseTrainConfig(
      {
        model,
        runDir: join(fx.dir, "x"),
        data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot },
        clipHigh: 0.28,
        learner: { miniBatch: 16, warmupSteps: 10, splitHalf: 3, weightDecay: 0.1 },
      },
      "grpo",
    );
    const { train, paths } = learnerRequestFile({
      mode: "grpo",
      step: 1,
      model: "a.gguf",
      experience: "e.jsonl",
      out: "b.gguf",
      metricsFile: "m",
      logFile: "l",
      optimizerState: "o",
      master: "w.pt",
      config: c,
    });
    expect(train).toMatchObject({ miniBatch: 16, warmupSteps: 10, splitHalf: 3, maxOldLogprobDiff: 0.05, clip: 0.2, clipHigh: 0.28, weightDecay: 0.1 });
    expect(paths.master).toBe("w.pt");
    // by default the high side is the clip (no flag) and there is no weight decay
    const plain = learnerRequestFile({
      mode: "grpo",
      step: 1,
      model: "a.gguf",
      experience: "e.jsonl",
      out: "b.gguf",
      metricsFile: "m",
      logFile: "l",
      optimizerState: "o",
      config: parseTrainConfig({ model, runDir: join(fx.dir, "x"), data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot } }, "grpo"),
    });
    expect(plain.train.clipHigh).toBeNull();
    expect(plain.train.weightDecay).toBe(0);
  });
});

import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { parseTrainConfig, runTraining, type TrainConfig, type TrainMode } from "../../src/training/index.js";
import {
  latestCheckpoint,
  learnerArgs,
  learnerRequestFile,
  learnerRequestSchema,
  createLearnerStep,
  readExperience,
  readMetrics,
  scheduleFor,
  sftRecord,
  splitInjected,
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

/** Half the rollouts answer right, half wrong, so groups have variance. */
function policyFor(): ScriptedPolicy {
  let n = 0;
  const seen = new Map<string, number>();
  return new ScriptedPolicy((ctx) => {
    if (!seen.has(ctx.trajectoryId)) seen.set(ctx.trajectoryId, n++);
    const right = seen.get(ctx.trajectoryId)! % 2 === 0;
    if (!ctx.text.includes("</result>")) return `<think>look</think>\n<intermediate_sql>SELECT DISTINCT country FROM singer</intermediate_sql>`;
    return `<think>ok</think>\n<final_sql>${right ? GOLD : "SELECT name FROM singer"}</final_sql>`;
  });
}

/** A learner that writes a "model" naming its step, records its requests, and fails at `failAt`. */
function fakeLearner(requests: LearnerRequest[], failAt?: number): LearnerStep {
  return async (req) => {
    requests.push(req);
    if (req.step === failAt) throw Object.assign(new Error("boom"), { code: "LEARNER_FAILED" });
    writeFileSync(req.out, `weights-${req.step}`);
    writeFileSync(req.optimizerState, `adam-${req.step}`);
    return { kl: 0.001 * req.step, loss: 1 / req.step, grad_norm: 0.5, clip_frac: 0.1, mode: req.mode };
  };
}

function config(runDir: string, over: Record<string, unknown> = {}, mode: TrainMode = "grpo"): TrainConfig {
  return parseTrainConfig(
    {
      model,
      runDir,
      data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot },
      eval: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, every: 2, limit: 2 },
      steps: 3,
      questionsPerStep: 2,
      groupSize: 2,
      maxTokens: 400,
      checkpointEvery: 2,
      ...over,
    },
    mode,
  );
}

describe("the training loop (scripted policy, fake learner)", () => {
  it("runs GRPO steps: experience files, learner calls, hot reloads, checkpoints, metrics and the report", async () => {
    const runDir = join(fx.dir, "run-grpo");
    const requests: LearnerRequest[] = [];
    const policies: ScriptedPolicy[] = [];
    const result = await runTraining(config(runDir, { data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 1 } }), {
      mode: "grpo",
      createPolicy: async () => {
        const p = policyFor();
        policies.push(p);
        return p;
      },
      learner: fakeLearner(requests),
      progress: null,
      log: () => undefined,
    });
    expect(result.lastStep).toBe(3);
    expect(result.checkpoints).toEqual([2, 3]);
    expect(requests.map((r) => r.step)).toEqual([1, 2, 3]);
    expect(requests[0]!.model).toBe(model);
    expect(requests[1]!.model).toBe(requests[0]!.out);
    expect(requests[0]!.ref).toBe(model);
    expect(policies).toHaveLength(1);
    expect(policies[0]!.reloads.map((r) => r.model)).toEqual(requests.map((r) => r.out));

    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(records).toHaveLength(4);
    expect(records.every((r) => r.mask.includes(0) && r.mask.includes(1))).toBe(true);
    expect(new Set(records.map((r) => r.reward)).size).toBe(2);

    const rows = readMetrics(join(runDir, "metrics.jsonl"));
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    expect(rows[0]!.heldout_ex).not.toBeNull();
    const s1 = rows[1]!;
    expect(s1.reward_mean).toBeGreaterThan(0);
    expect(Object.keys(s1.components).sort()).toEqual(["em", "entity", "exec", "exploration", "format"]);
    expect(s1.interactions).toBe(1);
    expect(s1.zero_variance_groups).toBe(0);
    expect(s1.kl).toBeCloseTo(0.001);
    expect(s1.loss).toBe(1);
    expect(s1.grad_norm).toBe(0.5);
    expect(s1.clip_frac).toBe(0.1);
    expect(s1.heldout_ex).toBeNull();
    expect(rows[2]!.heldout_ex).not.toBeNull();
    expect(rows[3]!.heldout_ex).not.toBeNull();

    expect(readdirSync(join(runDir, "checkpoints")).sort()).toEqual([
      "step-000002.gguf",
      "step-000002.json",
      "step-000002.optim",
      "step-000003.gguf",
      "step-000003.json",
      "step-000003.optim",
    ]);
    expect(readFileSync(join(runDir, "checkpoints", "step-000002.gguf"), "utf8")).toBe("weights-2");
    expect(readdirSync(join(runDir, "models"))).toEqual(["step-000003.gguf"]);
    const html = readFileSync(join(runDir, "report.html"), "utf8");
    for (const id of ["reward-mean", "reward-components", "heldout-ex", "kl", "loss", "grad-norm", "clip-fraction", "interactions", "zero-variance-groups"]) {
      expect(html).toContain(`id="${id}"`);
    }
    expect(html).toContain("<polyline");
    expect(html).toContain("<th>|Δ old logp|</th>");
  });

  it("refuses to overwrite a run, and resumes after a failed step from the latest checkpoint", async () => {
    const runDir = join(fx.dir, "run-resume");
    const requests: LearnerRequest[] = [];
    const opts = { mode: "grpo" as const, createPolicy: async () => policyFor(), progress: null, log: () => undefined };
    await expect(runTraining(config(runDir, { eval: undefined }), { ...opts, learner: fakeLearner(requests, 3) })).rejects.toThrow(/boom/);
    expect(readMetrics(join(runDir, "metrics.jsonl")).map((r) => r.step)).toEqual([1, 2]);
    expect(latestCheckpoint(runDir)).toMatchObject({ step: 2 });

    await expect(runTraining(config(runDir, { eval: undefined }), { ...opts, learner: fakeLearner([]) })).rejects.toThrow(/--resume/);

    const again: LearnerRequest[] = [];
    let loaded = "";
    const result = await runTraining(config(runDir, { eval: undefined, steps: 4 }), {
      ...opts,
      resume: true,
      createPolicy: async (m) => {
        loaded = m;
        return policyFor();
      },
      learner: fakeLearner(again),
    });
    expect(result.resumedFrom).toBe(2);
    expect(loaded).toBe(join(runDir, "checkpoints", "step-000002.gguf"));
    expect(again.map((r) => r.step)).toEqual([3, 4]);
    expect(again[0]!.model).toBe(loaded);
    expect(readMetrics(join(runDir, "metrics.jsonl")).map((r) => r.step)).toEqual([1, 2, 3, 4]);
    expect(readFileSync(join(runDir, "checkpoints", "step-000004.optim"), "utf8")).toBe("adam-4");
  });

  it("trains a LoRA adapter: the policy reloads each step's adapter on the unchanged base, checkpoints hold it, and --resume continues from it", async () => {
    const runDir = join(fx.dir, "run-lora");
    const start = join(fx.dir, "start.lora.gguf");
    writeFileSync(start, "adapter-0");
    const lora = { rank: 4, in: start };
    const requests: LearnerRequest[] = [];
    const loads: { model: string; lora: string[] }[] = [];
    const policies: ScriptedPolicy[] = [];
    const createPolicy = async (m: string, _c: TrainConfig, l: string[]): Promise<ScriptedPolicy> => {
      loads.push({ model: m, lora: l });
      const p = policyFor();
      policies.push(p);
      return p;
    };
    const opts = { mode: "grpo" as const, createPolicy, progress: null, log: () => undefined };
    const result = await runTraining(config(runDir, { eval: undefined, learner: { lora } }), { ...opts, learner: fakeLearner(requests) });

    const adapter = (step: number): string => join(runDir, "models", `step-00000${step}.lora.gguf`);
    expect(loads).toEqual([{ model, lora: [start] }]);
    expect(requests.map((r) => r.model)).toEqual([model, model, model]);
    expect(requests.map((r) => r.out)).toEqual([1, 2, 3].map(adapter));
    expect(requests.map((r) => r.loraIn)).toEqual([start, adapter(1), adapter(2)]);
    expect(requests.every((r) => r.ref === undefined && r.master === undefined)).toBe(true);
    expect(policies[0]!.reloads).toEqual([1, 2, 3].map((s) => ({ lora: [adapter(s)] })));
    expect(readFileSync(model, "utf8")).toBe("weights-0");
    expect(readdirSync(join(runDir, "models"))).toEqual(["step-000003.lora.gguf"]);
    expect(
      readdirSync(join(runDir, "checkpoints"))
        .filter((f) => f.includes("gguf"))
        .sort(),
    ).toEqual(["step-000002.lora.gguf", "step-000003.lora.gguf"]);
    expect(readFileSync(join(runDir, "checkpoints", "step-000002.lora.gguf"), "utf8")).toBe("weights-2");
    expect(result).toMatchObject({ model, lora: adapter(3) });

    const again: LearnerRequest[] = [];
    await runTraining(config(runDir, { eval: undefined, steps: 4, learner: { lora } }), { ...opts, resume: true, learner: fakeLearner(again) });
    const resumed = join(runDir, "checkpoints", "step-000003.lora.gguf");
    expect(loads.at(-1)).toEqual({ model, lora: [resumed] });
    expect(again.map((r) => [r.step, r.model, r.loraIn])).toEqual([[4, model, resumed]]);
    expect(policies.at(-1)!.reloads).toEqual([{ lora: [adapter(4)] }]);
    expect(existsSync(resumed)).toBe(true);

    await expect(runTraining(config(runDir, { eval: undefined, steps: 5 }), { ...opts, resume: true, learner: fakeLearner([]) })).rejects.toThrow(
      /LoRA adapter; resume it with `learner.lora`/,
    );
  });

  it("trains SFT on traces with the injected <result> text masked out", async () => {
    const runDir = join(fx.dir, "run-sft");
    const traces = join(fx.dir, "traces.jsonl");
    const resp = "<think>t</think>\n<intermediate_sql>SELECT 1</intermediate_sql><result>\n1\n</result>\n<final_sql>SELECT 1</final_sql>";
    writeFileSync(
      traces,
      [
        { prompt: "Q: one?\n", response: resp, question_id: "a" },
        { messages: [{ role: "user", content: "two?" }], response: "<final_sql>SELECT 2</final_sql>" },
      ]
        .map((t) => JSON.stringify(t))
        .join("\n"),
    );
    const requests: LearnerRequest[] = [];
    const result = await runTraining(config(runDir, { data: undefined, eval: undefined, sft: { traces, endOfTurn: "<E>" }, steps: 2 }, "sft"), {
      mode: "sft",
      createPolicy: async () => policyFor(),
      learner: fakeLearner(requests),
      progress: null,
      log: () => undefined,
    });
    expect(result.lastStep).toBe(2);
    expect(requests.every((r) => r.mode === "sft" && r.ref === undefined)).toBe(true);
    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    const withResult = records.find((r) => r.question_id === "a")!;
    const text = String.fromCodePoint(...withResult.tokens);
    expect(text).toBe(`${resp}<E>`);
    const injected = "<result>\n1\n</result>\n";
    const at = text.indexOf(injected);
    withResult.mask.forEach((m, i) => expect(m).toBe(i >= at && i < at + injected.length ? 0 : 1));
    expect(String.fromCodePoint(...withResult.prompt_tokens)).toBe("Q: one?\n");
    expect(readMetrics(join(runDir, "metrics.jsonl")).map((r) => r.loss)).toEqual([1, 0.5]);
  });
});

describe("training helpers", () => {
  it("schedules each pass over the data as a seeded shuffle, the same on every call", () => {
    const all = [1, 2, 3].flatMap((s) => scheduleFor(s, 2, 6, 7));
    expect([...all].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(scheduleFor(2, 2, 6, 7)).toEqual(all.slice(2, 4));
    expect(scheduleFor(1, 6, 6, 8)).not.toEqual(scheduleFor(1, 6, 6, 7));
  });

  it("splits a trace into model text and injected result blocks", () => {
    expect(splitInjected("a<result>\nx\n</result>\nb")).toEqual([
      { text: "a", sampled: 1 },
      { text: "<result>\nx\n</result>\n", sampled: 0 },
      { text: "b", sampled: 1 },
    ]);
  });

  it("builds SFT records whose prompt tokens are the ones a rollout starts from", async () => {
    const p = new ScriptedPolicy([]);
    const rec = await sftRecord(p, { messages: [{ role: "user", content: "hi" }], response: "<final_sql>SELECT 1</final_sql>" }, "", 3);
    const spec = p.renderChat([{ role: "user", content: "hi" }]);
    expect(String.fromCodePoint(...rec.prompt_tokens)).toBe(spec.prefix + spec.suffix);
    expect(rec.question_id).toBe(3);
    expect(rec.mask.every((m) => m === 1)).toBe(true);
  });

  it("passes the loop's settings to the learner in one request file, and only its path on the command line", () => {
    const c = config(join(fx.dir, "x"), { klBeta: 0.01, maskTruncated: true, learner: { device: "cpu", shuffle: true } });
    const req = {
      mode: "grpo" as const,
      step: 5,
      model: "a.gguf",
      experience: "e.jsonl",
      out: "b.gguf",
      ref: "r.gguf",
      metricsFile: "m.json",
      logFile: "l",
      optimizerState: "o.pt",
      config: c,
    };
    expect(learnerArgs(req)).toEqual(["-m", "reex_learner", "step", "--request", "m.request.json"]);
    const file = learnerRequestFile(req);
    expect(learnerRequestSchema.parse(file)).toEqual(file);
    expect(file.paths).toMatchObject({ model: "a.gguf", ref: "r.gguf", out: "b.gguf", master: null });
    expect(file.train).toMatchObject({ klBeta: 0.01, lr: 2e-6, maskTruncated: true, shuffle: true, seed: 5, progress: 1 });
    expect([1, 2].map((step) => learnerRequestFile({ ...req, step }).train.progress)).toEqual([0, 1 / c.steps]);
    expect(file.runtime.device).toBe("cpu");
    expect(file.lora).toBeNull();
  });

  it("passes a LoRA run's base model and adapters to the learner, never a whole-model output, master weights or reference", () => {
    const c = config(join(fx.dir, "x"), { klBeta: 0.01, learner: { lora: { rank: 8, targets: "all" } } });
    const req = {
      mode: "grpo" as const,
      model,
      experience: "e.jsonl",
      metricsFile: "m.json",
      logFile: "l",
      optimizerState: "o.pt",
      master: "master.pt",
      ref: "r.gguf",
      config: c,
    };
    const first = learnerRequestFile({ ...req, step: 1, out: "step-1.lora.gguf" });
    const later = learnerRequestFile({ ...req, step: 2, out: "step-2.lora.gguf", loraIn: "step-1.lora.gguf" });
    for (const file of [first, later]) {
      expect(file.paths).toMatchObject({ model, out: null, master: null, ref: null });
      expect(file.train.klBeta).toBe(0.01);
      expect(file.lora?.outType).toBe("f32");
    }
    expect(first.lora).toMatchObject({ rank: 8, alpha: 16, targets: "all", in: null, out: "step-1.lora.gguf" });
    expect(later.lora).toMatchObject({ in: "step-1.lora.gguf", out: "step-2.lora.gguf" });
  });

  it("fails with LEARNER_FAILED and the install hint when the learner package is missing", async () => {
    const root = join(fx.dir, "empty-root");
    mkdirSync(root, { recursive: true });
    const step = createLearnerStep({ root });
    const c = config(join(fx.dir, "y"));
    await expect(
      step({ mode: "grpo", step: 1, model, experience: "e", out: "o", metricsFile: "m", logFile: join(fx.dir, "l"), optimizerState: "o.pt", config: c }),
    ).rejects.toMatchObject({
      code: "LEARNER_FAILED",
      message: expect.stringContaining("bash scripts/install-learner-deps.sh"),
    });
    expect(existsSync(join(root, "src"))).toBe(false);
  });

  it("fails with LEARNER_FAILED and the install hint when the interpreter lacks a module", async () => {
    const root = join(fx.dir, "fake-root");
    mkdirSync(join(root, "src", "training", "learner", "reex_learner"), { recursive: true });
    writeFileSync(join(root, "src", "training", "learner", "reex_learner", "__init__.py"), "import reex_missing_dependency_xyz\n");
    const step = createLearnerStep({ root });
    const c = config(join(fx.dir, "z"), { learner: { python: "python3" } });
    await expect(
      step({
        mode: "grpo",
        step: 1,
        model,
        experience: "e",
        out: "o",
        metricsFile: join(fx.dir, "m2"),
        logFile: join(fx.dir, "l2"),
        optimizerState: "o.pt",
        config: c,
      }),
    ).rejects.toMatchObject({
      code: "LEARNER_FAILED",
      message: expect.stringMatching(/reex_missing_dependency_xyz[\s\S]*install-learner-deps/),
    });
  });
});

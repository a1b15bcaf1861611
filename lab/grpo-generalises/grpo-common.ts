/** Shared by lab/grpo-generalises/grpo-learns.ts and lab/grpo-generalises/grpo-generalises.ts: the question loader, the pass-rate sampler and the paired bootstrap. */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { reexProfile } from "../../src/agent/index.js";
import { createPromptBuilder } from "../../src/decoding/index.js";
import { createLlamaPolicy } from "../../src/policy/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { birdRecord, generateSynth } from "../synth/index.js";
import { GoldCache, parseTrainConfig, resolveRewardSpec, runGroup, runTraining, type TrainingQuestion, type TrainResult } from "../../src/training/index.js";

/** One BIRD-format record. */
export interface Bird {
  question_id: number;
  db_id: string;
  question: string;
  evidence?: string;
  SQL: string;
}

/**
 * Train questions from a BIRD-format `dataset` with its `dbRoot`, or else the starter's synthetic data, generated once
 * under `<work>/synth` (a later run, or a second arm beside the first, reads it back instead of rewriting databases in use).
 */
export function loadQuestions(o: { work: string; dataset?: string; dbRoot?: string; seed: number; dbs: number }): { all: Bird[]; dbRoot: string } {
  if (o.dataset !== undefined) {
    if (o.dbRoot === undefined) throw new Error("--dataset needs --db-root");
    return { all: JSON.parse(readFileSync(resolve(o.dataset), "utf8")) as Bird[], dbRoot: resolve(o.dbRoot) };
  }
  const synthDir = join(o.work, "synth");
  const saved = join(synthDir, "train.json");
  if (existsSync(saved)) return { all: JSON.parse(readFileSync(saved, "utf8")) as Bird[], dbRoot: join(synthDir, "databases") };
  const synth = generateSynth(synthDir, { seed: o.seed, dbs: o.dbs, devEvery: 7 });
  return { all: synth.train.map((it, k) => ({ ...birdRecord(it), question_id: k })), dbRoot: join(synthDir, "databases") };
}

/** Every `all.length / n`-th record, n at most: a spread of candidates whose set grows by refinement as n doubles. */
export function spread(all: Bird[], n: number): Bird[] {
  const step = Math.max(1, Math.floor(all.length / n));
  return all.filter((_, k) => k % step === 0).slice(0, n);
}

/** The training question of a BIRD record under `dbRoot`. */
export function asQuestion(r: Bird, dbRoot: string): TrainingQuestion {
  return {
    questionId: r.question_id,
    dbPath: join(dbRoot, r.db_id, `${r.db_id}.sqlite`),
    question: r.question,
    ...(r.evidence ? { evidence: r.evidence } : {}),
    goldSql: r.SQL,
  };
}

/** Pass rate of each question over `samples` rollouts of `gguf` at T 1.0 (seeds fixed by question and `salt`), on CPU. */
export async function passRates(
  gguf: string,
  qs: TrainingQuestion[],
  samples: number,
  salt: number,
  o: { contextSize: number; threads: number; indexDir: string; log: (l: string) => void },
): Promise<Map<string | number, number>> {
  const policy = await createLlamaPolicy({ model: gguf, gpu: "cpu", contextSize: o.contextSize, sequences: 16, threads: o.threads });
  const executor = new ExecutorPool({ workers: 2, timeoutMs: 5000, maxRows: 1000 });
  const prompts = createPromptBuilder({ indexDir: o.indexDir });
  const spec = resolveRewardSpec({ preset: "outcome" });
  const out = new Map<string | number, number>();
  try {
    for (const [i, q] of qs.entries()) {
      const g = await runGroup(q, {
        policy,
        executor,
        promptFor: prompts.promptFor,
        profile: reexProfile,
        groupSize: samples,
        temperature: 1,
        maxInteractions: 4,
        maxTokens: 400,
        concurrency: 16,
        seed: salt * 100_000 + Number(q.questionId) * 64,
        reward: spec,
        rewardEnv: { executor, goldCache: new GoldCache() },
      });
      out.set(q.questionId, g.rollouts.filter((r) => r.reward.correct).length / samples);
      if ((i + 1) % 10 === 0) o.log(`  ${i + 1}/${qs.length} questions`);
    }
  } finally {
    prompts.close();
    await policy.close();
    await executor.close();
  }
  return out;
}

/** 95% percentile interval of the mean of `diffs` over `n` bootstrap resamples (fixed seed). */
export function bootstrap(diffs: number[], n = 10_000): [number, number] {
  let s = 12345;
  const rnd = (): number => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 4294967296;
  const means: number[] = [];
  for (let b = 0; b < n; b++) {
    let t = 0;
    for (let i = 0; i < diffs.length; i++) t += diffs[Math.floor(rnd() * diffs.length)]!;
    means.push(t / diffs.length);
  }
  means.sort((a, b) => a - b);
  return [means[Math.floor(0.025 * n)]!, means[Math.floor(0.975 * n)]!];
}

/** Progress line on stderr with the wall-clock time. */
export const log = (l: string): void => void process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${l}\n`);

/**
 * Runs one arm of the recipe (examples/training/grpo-recipe.json, less its eval and curriculum) on CPU: `shuffled` gives it
 * shuffled advantages. Resumes a run folder that already has a run.json.
 */
export async function runRecipeArm(o: {
  model: string;
  runDir: string;
  trainFile: string;
  dbRoot: string;
  steps: number;
  shuffled: boolean;
  checkpointEvery: number;
  contextSize: number;
  threads: number;
}): Promise<TrainResult> {
  const recipe = JSON.parse(readFileSync("examples/training/grpo-recipe.json", "utf8")) as Record<string, unknown>;
  const { eval: _eval, curriculum: _c, description: _d, ...rest } = recipe;
  const config = parseTrainConfig(
    {
      ...rest,
      model: o.model,
      runDir: o.runDir,
      data: { dataset: o.trainFile, dbRoot: o.dbRoot },
      steps: o.steps,
      shuffleAdvantages: o.shuffled,
      checkpointEvery: o.checkpointEvery,
      policy: { gpu: "cpu", contextSize: o.contextSize, sequences: 16, threads: o.threads },
      learner: { ...(rest.learner as object), device: "cpu", threads: o.threads },
    },
    "grpo",
  );
  return runTraining(config, { mode: "grpo", resume: existsSync(join(o.runDir, "run.json")), progress: null, log });
}

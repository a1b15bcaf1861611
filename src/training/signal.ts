/**
 * The GRPO signal check: does the trainer learn a reward it can learn, and better than the same run
 * with the advantages shuffled? Real parts only: rollouts sampled by the llama.cpp policy with their
 * log-probs, the Python learner (f32 masters, warm-up, old-log-prob guard), the exported GGUF hot
 * reloaded into the policy each step. The reward is the share of sampled tokens in a fixed half of
 * the vocabulary (a token-level habit any policy can pick up), measured before and after on fixed
 * sampling seeds. Used by test/training/grpo-signal.test.ts and `npx tsx bench/grpo-signal.ts`.
 */
import { copyFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { createLlamaPolicy, type Policy, type PromptSpec } from "../policy/index.js";
import { seededRandom, shuffleInPlace } from "../util/index.js";
import { computeAdvantages, type AdvantageScaling } from "./advantages.js";
import { trainConfigSchema, type TrainConfig } from "./config.js";
import { experiencePath, sanitizeLogprobs, stepLabel, writeExperience, type ExperienceRecord } from "./experience.js";
import { createLearnerStep, type LearnerStep } from "./learner.js";

/** How the signal check runs; every field but `model` and `workDir` has a default. */
export interface SignalCheckOptions {
  /** The GGUF both arms start from. */
  model: string;
  /** Folder for the arms' experience, weights and learner files. */
  workDir: string;
  /** GRPO steps per arm. Default 8. */
  steps?: number;
  /** Prompts (user messages); each step samples a group for every one. Default four short questions. */
  prompts?: string[];
  /** Rollouts per prompt and step. Default 8. */
  groupSize?: number;
  /** Tokens sampled per rollout. Default 12. */
  maxTokens?: number;
  /** Default 1.0. */
  temperature?: number;
  /** Adam learning rate. Default 3e-3 (the tiny random test model; a real model wants ~1e-5). */
  learningRate?: number;
  /** Linear lr warm-up, optimizer steps. Default 2. */
  warmupSteps?: number;
  /** Rollouts per optimizer step (several clipped updates per batch; 0 = one). Default 16. */
  miniBatch?: number;
  /** Default "group". */
  advantage?: AdvantageScaling;
  /** Rollouts per prompt in the before/after measurement (fixed seeds). Default 16. */
  evalSamples?: number;
  /** Seed of the sampling, the target tokens and the shuffle. Default 0. */
  seed?: number;
  /** What the "real" arm trains on: its own advantages, or shuffled ones (a control that should fail). Default "real". */
  realArm?: "real" | "shuffled";
  /** Python with torch. Default "/usr/bin/python3". */
  python?: string;
  /** llama.cpp and torch threads. Default 1. */
  threads?: number;
  /** Default {@link createLearnerStep}. */
  learner?: LearnerStep;
  /** Progress lines. Default none. */
  log?: (line: string) => void;
}

/** One arm of the check. */
export interface SignalArm {
  arm: "real" | "shuffled";
  /** Mean reward on the fixed evaluation samples before step 1 and after the last step. */
  start: number;
  end: number;
  gain: number;
  /** Mean reward of each step's own rollouts. */
  curve: number[];
  /** The learner's mean |logp − old_logp| per step. */
  oldLogprobAbsDiff: number[];
}

/** Both arms. */
export interface SignalCheckResult {
  real: SignalArm;
  shuffled: SignalArm;
  seconds: number;
}

const DEFAULT_PROMPTS = ["How many singers are there?", "List the names of all customers.", "What is the average price?", "Which city has the most stores?"];

/** Whether token `id` is one the check's reward counts: a seeded half of the vocabulary. */
export function isTargetToken(id: number, seed = 0): boolean {
  let h = (Math.imul(id + 1, 0x9e3779b1) ^ Math.imul(seed + 1, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  return ((h ^ (h >>> 15)) & 1) === 1;
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

interface Sample {
  prompt: number;
  promptTokens: number[];
  tokens: number[];
  logprobs: number[];
  reward: number;
}

async function sample(
  policy: Policy,
  specs: readonly PromptSpec[],
  perPrompt: number,
  o: Required<Pick<SignalCheckOptions, "maxTokens" | "temperature" | "seed">>,
  seedBase: number,
): Promise<Sample[]> {
  const out: Sample[] = [];
  for (const [p, spec] of specs.entries()) {
    const group = await Promise.all(
      Array.from({ length: perPrompt }, async (_, i) => {
        const t = await policy.start(spec);
        try {
          const g = await t.generate({ stop: [], maxTokens: o.maxTokens, temperature: o.temperature, topP: 1, seed: seedBase + p * 1000 + i });
          const hits = g.tokens.filter((id) => isTargetToken(id, o.seed)).length;
          return {
            prompt: p,
            promptTokens: t.promptTokens.slice(),
            tokens: g.tokens,
            logprobs: g.logprobs,
            reward: g.tokens.length ? hits / g.tokens.length : 0,
          };
        } finally {
          await t.release();
        }
      }),
    );
    out.push(...group);
  }
  return out;
}

async function runArm(
  arm: "real" | "shuffled",
  shuffle: boolean,
  o: Required<Omit<SignalCheckOptions, "learner" | "log" | "prompts">> & { prompts: string[]; learner: LearnerStep; log: (l: string) => void },
  start: number,
): Promise<SignalArm> {
  const dir = join(o.workDir, arm);
  for (const sub of ["experience", "learner", "models"]) await mkdir(join(dir, sub), { recursive: true });
  const config = trainConfigSchema.parse({
    model: o.model,
    runDir: dir,
    learningRate: o.learningRate,
    klBeta: 0,
    temperature: o.temperature,
    seed: o.seed,
    learner: {
      python: o.python,
      device: "cpu",
      microBatch: 8,
      miniBatch: o.miniBatch,
      warmupSteps: o.warmupSteps,
      sharePrefix: true,
      threads: o.threads,
    },
  }) as TrainConfig;
  let model = join(dir, "models", "step-000000.gguf");
  await copyFile(o.model, model);
  const policy = await createLlamaPolicy({ model, gpu: "cpu", contextSize: 1024, sequences: Math.min(o.groupSize, 16), threads: o.threads });
  const curve: number[] = [];
  const diffs: number[] = [];
  const shuffler = seededRandom(o.seed + (arm === "real" ? 31 : 17) || 1).uniform;
  try {
    const specs = o.prompts.map((p) => policy.renderChat([{ role: "user", content: p }]));
    for (let step = 1; step <= o.steps; step++) {
      const samples = await sample(policy, specs, o.groupSize, o, 1_000_000 * step + o.seed);
      const groups = o.prompts.map((_, p) => samples.filter((s) => s.prompt === p).map((s) => s.reward));
      const adv = computeAdvantages(groups, o.advantage).advantages.flat();
      if (shuffle) shuffleInPlace(adv, shuffler);
      const records: ExperienceRecord[] = samples.map((s, i) => {
        const mask = s.tokens.map(() => 1 as const);
        return {
          prompt_tokens: s.promptTokens,
          tokens: s.tokens,
          mask,
          old_logprobs: sanitizeLogprobs(s.logprobs, mask),
          advantage: adv[i]!,
          reward: s.reward,
          components: { target_share: s.reward },
          truncated: false,
          interactions: 0,
          question_id: s.prompt,
        };
      });
      curve.push(mean(samples.map((s) => s.reward)));
      const experience = experiencePath(dir, step);
      await writeExperience(experience, records);
      const out = join(dir, "models", `step-${stepLabel(step)}.gguf`);
      const m = await o.learner({
        mode: "grpo",
        step,
        model,
        experience,
        out,
        metricsFile: join(dir, "learner", `step-${stepLabel(step)}.json`),
        logFile: join(dir, "learner", `step-${stepLabel(step)}.log`),
        optimizerState: join(dir, "optimizer.pt"),
        master: join(dir, "master.pt"),
        config,
      });
      if (typeof m.old_logprob_abs_diff === "number") diffs.push(m.old_logprob_abs_diff);
      await policy.reload!({ model: out });
      model = out;
      o.log(`${arm} step ${step}/${o.steps}: mean reward ${curve.at(-1)!.toFixed(3)}`);
    }
    const end = mean((await sample(policy, specs, o.evalSamples, o, 7_000_000 + o.seed)).map((s) => s.reward));
    return { arm, start, end, gain: end - start, curve, oldLogprobAbsDiff: diffs };
  } finally {
    await policy.close();
  }
}

/** Runs the real and the shuffled arm from the same model and seeds; see the module comment. */
export async function runSignalCheck(options: SignalCheckOptions): Promise<SignalCheckResult> {
  const t0 = performance.now();
  const o = {
    model: options.model,
    workDir: options.workDir,
    steps: options.steps ?? 8,
    prompts: options.prompts ?? DEFAULT_PROMPTS,
    groupSize: options.groupSize ?? 8,
    maxTokens: options.maxTokens ?? 12,
    temperature: options.temperature ?? 1.0,
    learningRate: options.learningRate ?? 3e-3,
    warmupSteps: options.warmupSteps ?? 2,
    miniBatch: options.miniBatch ?? 16,
    advantage: options.advantage ?? "group",
    evalSamples: options.evalSamples ?? 16,
    seed: options.seed ?? 0,
    realArm: options.realArm ?? "real",
    python: options.python ?? "/usr/bin/python3",
    threads: options.threads ?? 1,
    learner: options.learner ?? createLearnerStep(),
    log: options.log ?? (() => undefined),
  };
  const base = await createLlamaPolicy({ model: o.model, gpu: "cpu", contextSize: 1024, sequences: Math.min(o.evalSamples, 16), threads: o.threads });
  let start: number;
  try {
    const specs = o.prompts.map((p) => base.renderChat([{ role: "user", content: p }]));
    start = mean((await sample(base, specs, o.evalSamples, o, 7_000_000 + o.seed)).map((s) => s.reward));
  } finally {
    await base.close();
  }
  const real = await runArm("real", o.realArm === "shuffled", o, start);
  const shuffled = await runArm("shuffled", true, o, start);
  return { real, shuffled, seconds: (performance.now() - t0) / 1000 };
}

/**
 * The GRPO stage of the starter policy: `reex train grpo` (the trainer's `runTraining`) on the
 * synthetic train split, from the SFT model, with the settings of lab/starter/starter-grpo.json
 * and the work folder's paths (greedy held-out EX on `<work>/val_seen.json` every few steps when the
 * settings ask for an eval). Also runs the no-exploration-reward ablation beside it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../../src/paths/index.js";
import { listCheckpoints, parseTrainConfig, runTraining, type MetricsRow, type TrainConfig } from "../../src/training/index.js";

/** The shipped GRPO settings file (paths in it are replaced by the work folder's). */
export const STARTER_GRPO_CONFIG = "lab/starter/starter-grpo.json";

/** The work folder's validation file that the settings' `eval` reads (the pipeline writes it). */
export const STARTER_VAL_FILE = "val_seen.json";

/** One GRPO run of the starter pipeline. */
export interface StarterGrpoOptions {
  /** Work folder holding `synth/` (train.json, databases). */
  workDir: string;
  /** The SFT model to start from. */
  model: string;
  /** Run folder. Default `<workDir>/grpo` (`<workDir>/grpo-no-exploration` without the exploration reward). */
  runDir?: string;
  /** Keep the MaxTune exploration reward. Default true. */
  exploration?: boolean;
  /** Steps. Default the config file's. */
  steps?: number;
  /** llama.cpp and torch threads. Default the config file's policy.threads. */
  threads?: number;
  /** Settings file. Default {@link STARTER_GRPO_CONFIG} under the package root. */
  configFile?: string;
  /**
   * Which model the run returns: its last step's, the checkpoint with the highest held-out EX (steps ≥ 1; a tie
   * goes to the later step), or "best-or-start": that, or the start model when it scores at least as high. Default
   * "best-heldout", which is "last" when the settings evaluate nothing.
   */
  pick?: StarterGrpoPick;
  /** Score the start model before step 1 too. Default the settings file's; the ablation beside a full run passes false (same model). */
  evalAtStart?: boolean;
  /** Status lines. */
  log?: (line: string) => void;
}

/**
 * How a starter GRPO run chooses the model it returns: the last step's, the checkpoint with the highest held-out
 * EX, or that unless the start model (step 0) scores at least as high, in which case the start model.
 */
export type StarterGrpoPick = "last" | "best-heldout" | "best-or-start";

/** What a starter GRPO run did, for the model card. */
export interface StarterGrpoSummary {
  runDir: string;
  model: string;
  exploration: boolean;
  steps: number;
  seconds: number;
  config: Pick<TrainConfig, "questionsPerStep" | "groupSize" | "temperature" | "maxInteractions" | "maxTokens" | "learningRate" | "clip" | "klBeta">;
  /** Per step: mean reward, train EX, interactions per rollout, zero-variance groups, seconds. */
  curve: { step: number; reward: number | null; trainEx: number | null; interactions: number | null; zeroVarianceGroups: number | null; seconds: number }[];
  /** Greedy EX on the validation file at step 0 (before training, unless skipped) and at each eval step; empty without an eval. */
  heldout: { step: number; ex: number }[];
  /** The step whose model is `model`, its held-out EX, and the rule that chose it. */
  picked: { step: number; heldoutEx: number | null; rule: StarterGrpoPick };
}

/** The step `rule` chooses from a run's held-out curve among its checkpointed steps; null means the last step. */
export function pickStep(
  heldout: readonly { step: number; ex: number }[],
  checkpointed: readonly number[],
  rule: StarterGrpoPick,
): { step: number; ex: number } | null {
  if (rule === "last") return null;
  let best: { step: number; ex: number } | null = null;
  for (const h of heldout) if (h.step >= 1 && checkpointed.includes(h.step) && (!best || h.ex >= best.ex)) best = h;
  const start = heldout.find((h) => h.step === 0);
  if (rule === "best-or-start" && start && (!best || start.ex >= best.ex)) return start;
  return best;
}

/** The trainer configuration of one starter GRPO run. */
export function starterGrpoConfig(options: StarterGrpoOptions): TrainConfig {
  const file = options.configFile ?? join(packageRoot(), STARTER_GRPO_CONFIG);
  // biome-ignore lint/suspicious/noExplicitAny: an untyped JSON file, checked by the trainer config schema that parses the result
  const raw = JSON.parse(readFileSync(file, "utf8")) as Record<string, any>;
  const exploration = options.exploration ?? true;
  const synth = join(options.workDir, "synth");
  const input = {
    ...raw,
    description: `${raw.description ?? "starter GRPO"}${exploration ? "" : " Ablation: exploration reward off."}`,
    model: options.model,
    runDir: options.runDir ?? join(options.workDir, exploration ? "grpo" : "grpo-no-exploration"),
    data: { ...raw.data, dataset: join(synth, "train.json"), dbRoot: join(synth, "databases") },
    ...(raw.eval
      ? {
          eval: {
            ...raw.eval,
            dataset: join(options.workDir, STARTER_VAL_FILE),
            dbRoot: join(synth, "databases"),
            ...(options.evalAtStart === false ? { atStart: false } : {}),
          },
        }
      : {}),
    ...(options.steps !== undefined ? { steps: options.steps } : {}),
    reward: { ...raw.reward, exploration },
    policy: { ...raw.policy, ...(options.threads !== undefined ? { threads: options.threads } : {}) },
    learner: {
      ...raw.learner,
      ...(options.threads !== undefined ? { threads: options.threads } : {}),
    },
  };
  return parseTrainConfig(input, "grpo", process.cwd());
}

function curveOf(rows: readonly MetricsRow[]): StarterGrpoSummary["curve"] {
  return rows
    .filter((r) => r.step > 0)
    .map((r) => ({
      step: r.step,
      reward: r.reward_mean,
      trainEx: r.train_ex,
      interactions: r.interactions,
      zeroVarianceGroups: r.zero_variance_groups,
      seconds: r.seconds,
    }));
}

/** Runs one starter GRPO run to its last step; returns the model its pick rule chooses, with the run's curves. */
export async function runStarterGrpo(options: StarterGrpoOptions): Promise<StarterGrpoSummary> {
  const t0 = Date.now();
  const config = starterGrpoConfig(options);
  const log = options.log ?? (() => undefined);
  const result = await runTraining(config, { mode: "grpo", progress: null, log });
  const heldout = result.metrics.flatMap((r) => (r.heldout_ex === null ? [] : [{ step: r.step, ex: r.heldout_ex }]));
  const rule = options.pick ?? "best-heldout";
  const checkpoints = listCheckpoints(config.runDir);
  const chosen = pickStep(
    heldout,
    checkpoints.map((c) => c.step),
    rule,
  );
  const step = chosen?.step ?? result.lastStep;
  if (chosen) log(`picked step ${step} of ${result.lastStep} (held-out EX ${(chosen.ex * 100).toFixed(1)}%)`);
  return {
    runDir: config.runDir,
    model: chosen ? (step === 0 ? config.model : checkpoints.find((c) => c.step === step)!.model) : result.model,
    exploration: config.reward.exploration,
    steps: result.lastStep,
    seconds: (Date.now() - t0) / 1000,
    config: {
      questionsPerStep: config.questionsPerStep,
      groupSize: config.groupSize,
      temperature: config.temperature,
      maxInteractions: config.maxInteractions,
      maxTokens: config.maxTokens,
      learningRate: config.learningRate,
      clip: config.clip,
      klBeta: config.klBeta,
    },
    curve: curveOf(result.metrics),
    heldout,
    picked: { step, heldoutEx: heldout.find((h) => h.step === step)?.ex ?? null, rule },
  };
}

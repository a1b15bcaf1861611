/**
 * `reex train sft|grpo --config FILE`: fine-tunes the policy with the Python learner, from SFT
 * traces or with GRPO over executor-in-the-loop rollouts (docs/training.md).
 */
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { PROFILE_IDS } from "../agent/index.js";
import { ReexError } from "../errors/index.js";
import { loadTrainConfig, runTraining, type TrainConfigInput, type TrainMode } from "../training/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "fine-tune the policy: SFT on traces or GRPO with executor-in-the-loop rollouts";

const HELP = `usage: reex train sft|grpo --config FILE [--resume] [--run DIR] [--steps N] [--profile ID] [--quiet]

Runs the training loop of docs/training.md: per step, collect experience (GRPO: G rollouts per
question, rewards and advantages; SFT: traces with the injected feedback blocks masked out), run
one step of the Python learner (python3 -m reex_learner), and reload the new weights (with
"learner.lora", a LoRA adapter on the unchanged base). Rollouts, format rewards and masks follow
the model profile (the config's "profile", default detected from the model), so a model keeps its
own protocol (e.g. skyrl-sql: <sql> → <observation>, <solution>).
Writes checkpoints, metrics.jsonl and report.html into the run folder. Example configs:
examples/training/*.json.

options:
  --config FILE   training configuration (JSON; relative paths resolve against its folder)
  --resume        continue the run in runDir from its latest checkpoint
  --run DIR       run folder (overrides the config's runDir)
  --steps N       total steps (overrides the config's steps)
  --profile ID    model profile: auto | ${PROFILE_IDS.join(" | ")} (overrides the config's profile)
  --quiet         no progress bar
  -h, --help      show this help`;

const OPTIONS = {
  config: { type: "string" },
  resume: { type: "boolean" },
  run: { type: "string" },
  steps: { type: "string" },
  profile: { type: "string" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/** Runs `reex train`; returns the exit code (0 done, 2 bad arguments; failures throw ReexError). */
export async function run(argv: string[]): Promise<number> {
  let values: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: true }));
  } catch (err) {
    console.error(`reex train: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  let mode: TrainMode;
  let steps: number | undefined;
  try {
    const [m, ...rest] = positionals;
    if (m !== "sft" && m !== "grpo") throw new ReexError("BAD_REQUEST", `the first argument must be sft or grpo${m ? `, got "${m}"` : ""}`);
    if (rest.length > 0) throw new ReexError("BAD_REQUEST", `unexpected argument "${rest[0]}"`);
    if (!values.config) throw new ReexError("BAD_REQUEST", "--config FILE is required");
    mode = m;
    if (values.steps !== undefined) {
      steps = Number(values.steps);
      if (!Number.isInteger(steps) || steps < 1) throw new ReexError("BAD_REQUEST", `--steps must be a positive integer, got "${values.steps}"`);
    }
  } catch (err) {
    console.error(`reex train: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }

  const config = loadTrainConfig(resolve(values.config), mode, {
    ...(values.run ? { runDir: resolve(values.run) } : {}),
    ...(steps !== undefined ? { steps } : {}),
    // the merged config is parsed by its schema, which names the known profiles when this is none
    ...(values.profile !== undefined ? { profile: values.profile as TrainConfigInput["profile"] } : {}),
  });
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once("SIGINT", onSigint);
  try {
    const result = await runTraining(config, {
      mode,
      resume: values.resume ?? false,
      signal: controller.signal,
      ...(values.quiet ? { progress: null } : {}),
    });
    const last = result.metrics.filter((r) => r.step > 0).at(-1);
    console.log(`trained ${result.mode} ${result.resumedFrom > 0 ? `from step ${result.resumedFrom} ` : ""}to step ${result.lastStep} in ${result.runDir}`);
    if (last) {
      const parts = [
        last.reward_mean !== null ? `reward ${last.reward_mean.toFixed(4)}` : null,
        last.loss !== null ? `loss ${last.loss.toFixed(4)}` : null,
        last.kl !== null ? `kl ${last.kl.toExponential(2)}` : null,
        last.heldout_ex !== null ? `held-out EX ${(last.heldout_ex * 100).toFixed(1)}%` : null,
      ].filter(Boolean);
      if (parts.length) console.log(`last step: ${parts.join(", ")}`);
    }
    console.log(`model: ${result.model}`);
    if (result.lora) console.log(`lora: ${result.lora}`);
    console.log(`wrote ${resolve(result.runDir, "metrics.jsonl")}`);
    console.log(`wrote ${result.report}`);
    return 0;
  } finally {
    process.off("SIGINT", onSigint);
  }
}

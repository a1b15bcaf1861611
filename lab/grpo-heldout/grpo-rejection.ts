/**
 * The rejection-sampling arm of issue #61 (STaR / expert iteration; docs/experiments/2026-12-05-grpo-heldout.md):
 * sample groups exactly as a GRPO config's run samples them, keep the answers right on both row draws, one SFT pass
 * over them from the same start model.
 *
 *   npx tsx lab/grpo-heldout/grpo-rejection.ts --config lab/grpo-heldout/grpo-heldout.json --groups N
 *       [--out .reex/runs/grpo-heldout-rs] [--lr 2e-5] [--per-step 16] [--sample-only]
 *
 * --groups: groups to sample (of the config's groupSize), for the same compute the GRPO run's sampled groups (the sum of
 * `sampled_groups` in its metrics.jsonl). Sampling appends one line per group to OUT/samples.jsonl and resumes from it;
 * then OUT/traces.jsonl and OUT/sft.json are written and `reex train sft` runs in OUT/sft (resumed when it exists).
 * OUT/rejection.json holds the counts.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadTrainConfig, type RejectionGroup, runRejectionSampling, runTraining } from "../../src/training/index.js";

const USAGE = "usage: npx tsx lab/grpo-heldout/grpo-rejection.ts --config FILE --groups N [--out DIR] [--lr 2e-5] [--per-step 16] [--sample-only]";

const { values } = parseArgs({
  options: {
    config: { type: "string" },
    groups: { type: "string" },
    out: { type: "string", default: ".reex/runs/grpo-heldout-rs" },
    lr: { type: "string", default: "2e-5" },
    "per-step": { type: "string", default: "16" },
    "sample-only": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const groups = Number(values.groups);
const lr = Number(values.lr);
const perStep = Number(values["per-step"]);
if (!values.config || !Number.isInteger(groups) || groups < 1 || !(lr > 0) || !Number.isInteger(perStep) || perStep < 1) {
  console.error(`--config and --groups (an integer >= 1) are required; --lr > 0, --per-step an integer >= 1\n${USAGE}`);
  process.exit(1);
}

async function main(): Promise<void> {
  const configFile = resolve(values.config!);
  const config = loadTrainConfig(configFile, "grpo");
  const out = resolve(values.out);
  mkdirSync(out, { recursive: true });
  const samplesFile = join(out, "samples.jsonl");
  // A pass killed mid-append leaves a torn last line: it is cut off, and its group sampled again.
  const read = (): RejectionGroup[] => {
    if (!existsSync(samplesFile)) return [];
    const lines = readFileSync(samplesFile, "utf8")
      .split("\n")
      .filter((l) => l.trim());
    const groups: RejectionGroup[] = [];
    for (const [i, line] of lines.entries()) {
      try {
        groups.push(JSON.parse(line) as RejectionGroup);
      } catch (err) {
        if (i < lines.length - 1) throw new Error(`${samplesFile}: line ${i + 1} is not JSON: ${(err as Error).message}`);
        writeFileSync(samplesFile, groups.map((g) => `${JSON.stringify(g)}\n`).join(""));
      }
    }
    return groups;
  };
  const done = read().length;
  if (done < groups) {
    console.log(`rejection sampling: ${config.model}, groups ${done + 1}..${groups} of ${config.groupSize} at T ${config.temperature} → ${samplesFile}`);
    await runRejectionSampling(config, {
      groups,
      start: done,
      onGroup: (g, n) => {
        appendFileSync(samplesFile, `${JSON.stringify(g)}\n`);
        console.log(
          `[${done + n}/${groups}] question ${g.questionId}: ${g.skipped ? `skipped: ${g.skipped}` : `${g.right}/${g.sampled} right, ${g.traces.length} kept`}`,
        );
      },
    });
  }
  const lines = read().slice(0, groups);
  const traces = lines.flatMap((l) => l.traces);
  writeFileSync(join(out, "traces.jsonl"), traces.map((t) => JSON.stringify(t)).join("\n") + "\n");
  const sampled = lines.reduce((a, l) => a + l.sampled, 0);
  const counts = {
    config: configFile,
    model: config.model,
    groups: lines.length,
    groupSize: config.groupSize,
    temperature: config.temperature,
    sampled,
    right: lines.reduce((a, l) => a + l.right, 0),
    oneDraw: lines.reduce((a, l) => a + l.oneDraw, 0),
    kept: traces.length,
    questionsKept: lines.filter((l) => l.traces.length > 0).length,
    skipped: lines.filter((l) => l.skipped).map((l) => l.questionId),
    sft: { learningRate: lr, perStep, steps: Math.ceil(traces.length / perStep) },
  };
  writeFileSync(join(out, "rejection.json"), `${JSON.stringify(counts, null, 2)}\n`);
  console.log(
    `rejection sampling: ${counts.right} of ${sampled} sampled answers right on both draws (${counts.oneDraw} on one only); ${traces.length} distinct traces from ${counts.questionsKept} of ${lines.length} questions${counts.skipped.length > 0 ? `; ${counts.skipped.length} skipped (prompt longer than the context window)` : ""}`,
  );
  if (values["sample-only"] || traces.length === 0) return;
  const sft = {
    description: `Issue #61's rejection-sampling arm: one SFT pass over the answers lab/grpo-heldout/grpo-rejection.ts kept from ${config.model} (config ${configFile}).`,
    model: config.model,
    runDir: join(out, "sft"),
    sft: { traces: join(out, "traces.jsonl"), endOfTurn: "auto" },
    steps: counts.sft.steps,
    questionsPerStep: perStep,
    learningRate: lr,
    seed: config.seed,
    checkpointEvery: config.checkpointEvery,
    policy: config.policy,
    // the start's held-out EX is the GRPO run's step 0; four points of the curve are enough for one pass
    ...(config.eval ? { eval: { ...config.eval, atStart: false, every: Math.max(config.eval.every, Math.ceil(counts.sft.steps / 4)) } } : {}),
    learner: {
      device: config.learner.device,
      dtype: config.learner.dtype,
      microBatch: config.learner.microBatch,
      masterWeights: config.learner.masterWeights,
      warmupSteps: Math.min(config.learner.warmupSteps, counts.sft.steps),
    },
  };
  const sftFile = join(out, "sft.json");
  writeFileSync(sftFile, `${JSON.stringify(sft, null, 2)}\n`);
  const result = await runTraining(loadTrainConfig(sftFile, "sft"), { mode: "sft", resume: existsSync(join(out, "sft")) });
  console.log(`rejection sampling: SFT done at step ${result.lastStep}: ${result.model}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

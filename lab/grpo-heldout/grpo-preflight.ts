/**
 * The GRPO pre-flight of issue #61 (docs/experiments/2026-12-05-grpo-heldout.md, "Pre-flight"): before a long run, how many
 * of the config's questions would give a group a contrast.
 *
 *   npx tsx lab/grpo-heldout/grpo-preflight.ts --config FILE [--questions N] [--samples N] [--seed N] [--leave-out N] [--leave-out-seed S] [--out FILE]
 *
 * Draws N questions (seeded; default 16) from the config's `data`, after leaving out the `--leave-out`
 * questions (default 400) `heldOutSample` draws from the whole file with `--leave-out-seed` (default
 * "reex-eval:wikisql:1", the starter pipeline's draw of its 400 held-out WikiSQL questions); samples
 * `--samples` rollouts of each (default the config's groupSize) as `reex train grpo` samples a group,
 * and one greedy answer as the run's held-out evaluation decodes it; prints a line per question and the
 * summary, and writes both as JSON to --out.
 */
import { writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadDataset } from "../../src/eval/index.js";
import { heldOutSample } from "../starter/index.js";
import { loadTrainConfig, runPreflight } from "../../src/training/index.js";

const USAGE =
  "usage: npx tsx lab/grpo-heldout/grpo-preflight.ts --config FILE [--questions N] [--samples N] [--seed N] [--leave-out N] [--leave-out-seed S] [--out FILE]";

/** The integer of option `name`, at least `min`; undefined when not given. */
function int(values: Record<string, string | boolean | undefined>, name: string, min: number): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}\n${USAGE}`);
  return n;
}

function parse(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      config: { type: "string" },
      questions: { type: "string" },
      samples: { type: "string" },
      seed: { type: "string" },
      "leave-out": { type: "string" },
      "leave-out-seed": { type: "string", default: "reex-eval:wikisql:1" },
      out: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  if (!values.config) throw new Error(`--config is required\n${USAGE}`);
  return {
    config: resolve(values.config),
    questions: int(values, "questions", 1) ?? 16,
    samples: int(values, "samples", 1),
    seed: int(values, "seed", 0),
    leaveOut: int(values, "leave-out", 0) ?? 400,
    leaveOutSeed: values["leave-out-seed"]!,
    out: values.out ? resolve(values.out) : undefined,
  };
}

const pct = (x: number | null): string => (x === null ? "–" : `${(x * 100).toFixed(1)}%`);

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  const config = loadTrainConfig(args.config, "grpo");
  const data = config.data!;
  const items = loadDataset(data.dataset, { dbRoot: data.dbRoot, layout: data.layout }).items;
  const keyed = items.map((it) => ({ db_id: it.dbId, id: String(it.questionId) }));
  const exclude = new Set(heldOutSample(keyed, args.leaveOut, args.leaveOutSeed).map((k) => k.id));
  console.log(
    `pre-flight: ${config.model} on ${data.dataset}; left out ${exclude.size} (heldOutSample, seed "${args.leaveOutSeed}"); ${args.questions} questions × ${args.samples ?? config.groupSize} samples at T ${config.temperature} + greedy`,
  );
  const result = await runPreflight(config, {
    questions: args.questions,
    ...(args.samples !== undefined ? { samples: args.samples } : {}),
    ...(args.seed !== undefined ? { seed: args.seed } : {}),
    exclude,
    onQuestion: (o, done, total) => {
      const right = o.samples.filter((s) => s.correct).length;
      const oneDraw = o.samples.filter((s) => s.draws && s.draws.first !== s.draws.second).length;
      console.log(
        `[${done}/${total}] question ${o.questionId}: ${right}/${o.samples.length} samples right, ${oneDraw} right on one draw only; greedy ${o.greedy.correct ? "right" : "wrong"}`,
      );
    },
  });
  const s = result.summary;
  const count = (share: number | null): string => (share === null ? "" : ` (${Math.round(share * s.n)})`);
  console.log(
    [
      `n                                  ${s.n} questions (of ${result.pool} after leaving out ${result.excluded}), ${s.sampled} sampled answers, profile ${result.profile}, ${result.seconds.toFixed(0)} s`,
      `mixed outcomes                     ${pct(s.mixedShare)}${count(s.mixedShare)}`,
      `greedy wrong, some sample right    ${pct(s.greedyWrongSampleRightShare)}${count(s.greedyWrongSampleRightShare)}`,
      `mean pass rate                     ${pct(s.meanPassRate)}`,
      `greedy EX                          ${pct(s.greedyEx)} (first draw alone ${pct(s.greedyExFirstDraw)})`,
      `spurious rate                      ${pct(s.spuriousRate)} of sampled answers right on one draw only (${pct(s.spuriousOfFirstRight)} of those right on the first)`,
      ...(result.skipped.length > 0
        ? [
            `skipped                            ${result.skipped.length} drawn question(s) whose prompt overflows the context window: ${result.skipped.map((k) => k.questionId).join(", ")}`,
          ]
        : []),
    ].join("\n"),
  );
  if (args.out) {
    const report = {
      config: args.config,
      model: config.model,
      dataset: data.dataset,
      temperature: config.temperature,
      leftOut: { questions: result.excluded, rule: `heldOutSample(items, ${args.leaveOut}, "${args.leaveOutSeed}")` },
      pool: result.pool,
      profile: result.profile,
      seconds: result.seconds,
      summary: s,
      outcomes: result.outcomes,
      skipped: result.skipped,
    };
    await writeFile(args.out, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`wrote ${args.out}`);
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

/**
 * `reex train sft|grpo --config FILE`: fine-tunes the policy with the Python learner, from SFT
 * traces or with GRPO over executor-in-the-loop rollouts (docs/training.md).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { getProfile, PROFILE_IDS } from "../agent/index.js";
import { loadConfig } from "../config/index.js";
import { createPromptBuilder } from "../decoding/index.js";
import { ReexError } from "../errors/index.js";
import { ExampleStore } from "../sql/index.js";
import { exampleFamily, exampleTrace, loadTrainConfig, runTraining, type TrainConfig, type TrainConfigInput, type TrainMode } from "../training/index.js";
import { resolveDatabase } from "./examples.js";

/** One-line description shown by `reex --help`. */
export const summary = "fine-tune the policy: SFT on traces or GRPO with executor-in-the-loop rollouts";

const HELP = `usage: reex train sft|grpo --config FILE [--resume] [--run DIR] [--steps N] [--profile ID] [--quiet]
       reex train sft --from-examples DB --config FILE [...]

Runs the training loop of docs/training.md: per step, collect experience (GRPO: G rollouts per
question, rewards and advantages; SFT: traces with the injected feedback blocks masked out), run
one step of the Python learner (python3 -m reex_learner), and reload the new weights (with
"learner.lora", a LoRA adapter on the unchanged base). Rollouts, format rewards and masks follow
the model profile (the config's "profile", default detected from the model), so a model keeps its
own protocol (e.g. skyrl-sql: <sql> → <observation>, <solution>).
Writes checkpoints, metrics.jsonl and report.html into the run folder. Example configs:
examples/training/*.json.

With --from-examples DB, SFT trains on the verified examples of database DB (every key's; see
reex examples --help and docs/teaching.md) instead of the config's sft.traces: each becomes a
trace whose prompt is the one the server builds for its question (in the profile's layout and
its direct family where it has one) and whose response is the profile's answer with the
example's SQL. The traces are written to <sql.dataDir>/examples/<db id>.sft.jsonl first.

options:
  --config FILE   training configuration (JSON; relative paths resolve against its folder)
  --resume        continue the run in runDir from its latest checkpoint
  --run DIR       run folder (overrides the config's runDir)
  --steps N       total steps (overrides the config's steps)
  --profile ID    model profile: auto | ${PROFILE_IDS.join(" | ")} (overrides the config's profile)
  --from-examples DB  sft: train on database DB's verified examples (id, name or SQLite path)
  --quiet         no progress bar
  -h, --help      show this help`;

const OPTIONS = {
  config: { type: "string" },
  resume: { type: "boolean" },
  run: { type: "string" },
  steps: { type: "string" },
  profile: { type: "string" },
  "from-examples": { type: "string" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/**
 * Writes the verified examples of database `db` as SFT traces in `config`'s profile (reex when it
 * is "auto") to `<sql.dataDir>/examples/<id>.sft.jsonl` and returns `config` training on them.
 */
async function withExampleTraces(config: TrainConfig, db: string): Promise<TrainConfig> {
  const settings = loadConfig({ env: process.env });
  const entry = await resolveDatabase(settings, db);
  const examples = new ExampleStore({ dataDir: settings.sql.dataDir, maxPerDatabase: settings.teach.maxExamples }).list(entry.id);
  if (examples.length === 0)
    throw new ReexError(
      "BAD_REQUEST",
      `no verified examples on ${entry.name} (${entry.id}): add some with reex examples add or POST /v1/databases/:id/examples`,
    );
  const profile = getProfile(config.profile === "auto" ? "reex" : config.profile);
  const family = exampleFamily(profile);
  const prompts = createPromptBuilder({
    indexDir: join(settings.sql.dataDir, "indexes"),
    schemaTokenBudget: Math.max(256, Math.floor(settings.policy.contextSize / 4)),
  });
  const lines: string[] = [];
  try {
    for (const e of examples) {
      const built = await prompts.promptFor(entry.path, e.question, e.evidence, family, profile);
      lines.push(JSON.stringify(exampleTrace(e, built.messages, profile, family)));
    }
  } finally {
    prompts.close();
  }
  const file = join(settings.sql.dataDir, "examples", `${entry.id}.sft.jsonl`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${lines.join("\n")}\n`);
  console.log(`wrote ${examples.length} ${profile.id} traces (${family}) from the verified examples of ${entry.name} to ${file}`);
  return { ...config, sft: { endOfTurn: config.sft?.endOfTurn ?? "auto", traces: file } };
}

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
    if (values["from-examples"] !== undefined && m !== "sft") throw new ReexError("BAD_REQUEST", "--from-examples trains SFT: use reex train sft");
    mode = m;
    if (values.steps !== undefined) {
      steps = Number(values.steps);
      if (!Number.isInteger(steps) || steps < 1) throw new ReexError("BAD_REQUEST", `--steps must be a positive integer, got "${values.steps}"`);
    }
  } catch (err) {
    console.error(`reex train: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }

  const fromExamples = values["from-examples"];
  const loaded = loadTrainConfig(resolve(values.config), mode, {
    ...(values.run ? { runDir: resolve(values.run) } : {}),
    ...(steps !== undefined ? { steps } : {}),
    // the merged config is parsed by its schema, which names the known profiles when this is none
    ...(values.profile !== undefined ? { profile: values.profile as TrainConfigInput["profile"] } : {}),
    // the traces are written next, from the examples; a config without sft.traces is fine then
    ...(fromExamples !== undefined ? { sft: { traces: "(verified examples)" } } : {}),
  });
  const config = fromExamples !== undefined ? await withExampleTraces(loaded, fromExamples) : loaded;
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

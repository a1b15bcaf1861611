/**
 * `reex eval`: scores a BIRD or Spider dataset, either by decoding every question with the policy
 * (one run per strategy) or from a file of predictions, after a self-check that the comparison is
 * sane; writes a JSON record and an HTML report.
 */
import { setMaxListeners } from "node:events";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { z } from "zod";
import { PROFILE_IDS, familyFor, getProfile, resolveProfile, type ProfileChoice, type PromptFamily } from "../agent/index.js";
import { ReexError } from "../errors/index.js";
import { isModelUri } from "../paths/index.js";
import type { Strategy } from "../decoding/index.js";
import { PROMPT_FAMILIES, STRATEGIES, splitSettings, type Config } from "../config/index.js";
import type { PostgresSource } from "../pg/index.js";
import type { Runtime } from "../runtime/index.js";
import { ExecutorPool, type ExecResult, type Executor } from "../sql/index.js";
import {
  DEFAULT_EVAL_MAX_ROWS,
  DEFAULT_EVAL_TIMEOUT_MS,
  EX_RULES,
  createProgressBar,
  createReport,
  describeSelfCheck,
  examplesFromPool,
  loadDataset,
  parsePredictions,
  alignPredictions,
  runEval,
  scorePredictions,
  selfCheck,
  writeReport,
  type DatasetLayout,
  type EvalExecOptions,
  type EvalItem,
  type EvalRun,
  type ExRule,
  type RunEvalOptions,
} from "../eval/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "score a BIRD/Spider dataset (decoding strategies or a predictions file) and write a report";

const HELP = `usage: reex eval --dataset FILE --db-root DIR --strategy S[,S2…] [--candidates K] [--profile ID] [--limit N] [--out DIR] [--model PATH]
       reex eval --dataset FILE --db-root DIR --runs FILE [--limit N] [--out DIR]
       reex eval --dataset FILE --db-root DIR --predictions FILE [--limit N] [--out DIR]

Scores every question of a BIRD (question, evidence, SQL, db_id, difficulty) or Spider
(question, query, db_id) JSON file against <db-root>/<db_id>/<db_id>.sqlite (or <db-root>/<db_id>.sqlite).
First runs a self-check (gold vs gold must score 100% under every EX rule) and stops if it fails.
Writes <out>/report.json and <out>/report.html, after each run as well as at the end.

options:
  --dataset FILE       questions (BIRD or Spider layout, told apart by \`SQL\` / \`query\`)
  --db-root DIR        folder of the databases
  --layout L           bird | spider | auto (default auto)
  --postgres URL       run gold and predicted SQL on PostgreSQL instead: the URL names each
                       question's database with {db_id}, e.g. postgres://reader:\${PW}@host/reex_{db_id}
                       (the SQLite files under --db-root still list the databases)
  --strategy S[,S2…]   ${STRATEGIES.join(" | ")}; several run one after the other
  --candidates K       candidates for linear/tree strategies (default: config decoding.candidates)
  --profile ID         model profile of the --strategy runs: ${PROFILE_IDS.join(", ")}
                       (default: config policy.profile, else detected from the model)
  --runs FILE          several labelled runs in one report, each with its own model, profile,
                       prompt family and strategy: JSON [{"label", "model"?, "lora"? (adapter files),
                       "profile"?, "promptFamily"?, "strategy", "candidates"?, "constrained"?, "schemaHints"?,
                       "temperature"?, "topP"?, "seed"?, "examples"?}] (a model is loaded once for its consecutive runs;
                       relative model and adapter paths are from the file; a seed gives every question the
                       same seed, so two runs draw alike)
  --examples-from FILE questions with their SQL (same layouts as --dataset, e.g. a training split) that
                       a question's prompt is offered as verified examples, as the server offers a
                       user's: the K most similar on the question's own database, never its own question
  --examples K         examples per question from --examples-from (default: config teach.examples; a --runs entry's
                       "examples" sets its own, 0 for none)
  --predictions FILE   score predictions instead of decoding: one SQL per line (BIRD's
                       "sql\\t----- bird -----\\tdb_id" suffix allowed) or JSON {"0": "SELECT …"}
  --limit N            only the first N questions
  --concurrency N      questions decoded / scored at once (default 1)
  --timeout-ms MS      limit per evaluation query (default ${DEFAULT_EVAL_TIMEOUT_MS})
  --max-rows N         rows kept per evaluation result (default ${DEFAULT_EVAL_MAX_ROWS})
  --out DIR            output folder (default eval-out/<timestamp>)
  --model PATH         GGUF model (same as --policy.model)
  --config FILE        configuration file; any --section.key VALUE config flag is accepted too
  --quiet              no progress bar
  -h, --help           show this help`;

const OPTIONS = {
  dataset: { type: "string" },
  "db-root": { type: "string" },
  postgres: { type: "string" },
  layout: { type: "string" },
  strategy: { type: "string" },
  candidates: { type: "string" },
  predictions: { type: "string" },
  "examples-from": { type: "string" },
  examples: { type: "string" },
  runs: { type: "string" },
  limit: { type: "string" },
  concurrency: { type: "string" },
  "timeout-ms": { type: "string" },
  "max-rows": { type: "string" },
  out: { type: "string" },
  model: { type: "string" },
  profile: { type: "string" },
  config: { type: "string" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function positiveInt(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new ReexError("BAD_REQUEST", `--${name} must be a positive integer, got "${raw}"`);
  return n;
}

function timestamp(d = new Date()): string {
  return d.toISOString().replace(/\..*$/, "").replace(/:/g, "-");
}

function pct(x: number): string {
  return (x * 100).toFixed(1).padStart(6);
}

function printSummary(runs: EvalRun[], rule: ExRule): void {
  const head = [
    "run".padEnd(12),
    "profile".padEnd(12),
    "n".padStart(5),
    ...EX_RULES.map((r) => `EX ${r}`.padStart(10)),
    "voting".padStart(7),
    "pass@1".padStart(7),
    "pass@k".padStart(7),
    "syntax err".padStart(10),
    "exec err".padStart(8),
    "copy%".padStart(6),
    "s/item".padStart(7),
    "gen tok".padStart(8),
  ];
  console.log(head.join(" "));
  for (const run of runs) {
    const s = run.summary;
    console.log(
      [
        run.config.label.padEnd(12),
        (run.config.profile ?? "–").padEnd(12),
        String(s.count).padStart(5),
        ...EX_RULES.map((r) => pct(s.ex[r]).padStart(10)),
        pct(s.voting[rule]).padStart(7),
        pct(s.pass1[rule]).padStart(7),
        pct(s.passK[rule]).padStart(7),
        pct(s.syntaxErrorRate).padStart(10),
        pct(s.executionErrorRate).padStart(8),
        (s.copyRate === null ? "–" : pct(s.copyRate)).padStart(6),
        (s.latencyMs ? (s.latencyMs.mean / 1000).toFixed(2) : "–").padStart(7),
        (s.generatedTokensPerItem === null ? "–" : s.generatedTokensPerItem.toFixed(0)).padStart(8),
      ].join(" "),
    );
  }
  for (const run of runs) {
    const t = run.summary.trust;
    const f = (v: number): string => v.toFixed(3);
    console.log(
      `${run.config.label}: answered ${pct(t.coverage).trim()}%, right among answered ${t.answeredAccuracy === null ? "–" : pct(t.answeredAccuracy).trim()}%, right answers kept ${t.keptRight === null ? "–" : pct(t.keptRight).trim()}%; reliability c=0/1/10 ${f(t.reliability.c0)} / ${f(t.reliability.c1)} / ${f(t.reliability.c10)} (answering all ${f(t.answerAll.c0)} / ${f(t.answerAll.c1)} / ${f(t.answerAll.c10)}); ECE ${t.ece === null ? "–" : f(t.ece)}${t.unanswerable > 0 ? `; unanswerable abstained ${t.abstainedUnanswerable} of ${t.unanswerable}` : ""}`,
    );
  }
  for (const run of runs) {
    const e = run.config.examples;
    if (e && run.summary.exampleTokensPerItem !== null)
      console.log(
        `${run.config.label}: up to ${e.k} verified examples from ${e.source} took ${run.summary.exampleTokensPerItem.toFixed(0)} prompt tokens a question`,
      );
  }
  for (const run of runs) {
    const s = run.summary;
    if (!s.exBothDraws) continue;
    const spurious = s.spuriousRate?.[rule];
    console.log(
      `${run.config.label}: two row draws (${rule}): EX ${pct(s.ex[rule]).trim()}% on the first, ${pct(s.exBothDraws[rule]).trim()}% on both; spurious rate ${spurious === null || spurious === undefined ? "–" : `${pct(spurious).trim()}%`} (right on the first draw only ÷ right on the first)`,
    );
  }
  console.log(
    `(percentages; syntax err / exec err are error rates: items whose final SQL failed with a syntax error / failed to run for any reason; copy%: share of the final SQL's table and column names that exist in the schema; voting / pass@k under the ${rule} rule)`,
  );
}

/** Predictions lined up with the (limited) items; predictions past `--limit` are ignored. */
function readPredictions(file: string, items: readonly EvalItem[], limit: number | undefined): (string | null)[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read predictions file ${file}: ${(err as Error).message}`);
  }
  const parsed = parsePredictions(text, file).filter((p) => limit === undefined || p.index < limit);
  return alignPredictions(items, parsed, file);
}

const runSpecSchema = z
  .object({
    label: z.string().min(1).max(40),
    model: z.string().min(1).optional(),
    /** LoRA adapter files applied on the model (paths from the runs file); default none. */
    lora: z.array(z.string().min(1)).optional(),
    /** A built-in profile id; default the config's policy.profile, else detected from the model. */
    profile: z.string().min(1).optional(),
    promptFamily: z.enum(PROMPT_FAMILIES).optional(),
    strategy: z.enum(STRATEGIES),
    candidates: z.number().int().positive().optional(),
    constrained: z.boolean().optional(),
    schemaHints: z.boolean().optional(),
    /** Verified examples per question from `--examples-from`; default `--examples`. */
    examples: z.number().int().min(0).max(20).optional(),
    temperature: z.number().min(0).max(2).optional(),
    topP: z.number().gt(0).max(1).optional(),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .optional(),
  })
  .strict();

/** One labelled run of `--runs`. */
export type RunSpec = z.infer<typeof runSpecSchema>;

/** Reads and validates a `--runs` file (BAD_REQUEST naming the entry and field on a problem); model paths resolved against the file. */
export function readRunSpecs(file: string): RunSpec[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read runs file ${file}: ${(err as Error).message}`);
  }
  const parsed = z.array(runSpecSchema).min(1).safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ReexError("BAD_REQUEST", `${file}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  const labels = new Set<string>();
  parsed.data.forEach((r, i) => {
    if (labels.has(r.label)) throw new ReexError("BAD_REQUEST", `${file}: label "${r.label}" is used twice`);
    labels.add(r.label);
    if (r.profile === undefined) return;
    try {
      familyFor(getProfile(r.profile), r.promptFamily);
    } catch (err) {
      throw new ReexError("BAD_REQUEST", `${file}: ${i} (${r.label}): ${(err as Error).message}`);
    }
  });
  const here = (p: string): string => resolve(dirname(file), p);
  return parsed.data.map((r) => ({
    ...r,
    ...(r.model && !isModelUri(r.model) ? { model: here(r.model) } : {}),
    ...(r.lora ? { lora: r.lora.map(here) } : {}),
  }));
}

/** The runtime as `reex eval` uses it. */
type EvalRuntime = Pick<Runtime, "decode" | "close" | "policy" | "constrained">;

/**
 * The profile a run decodes with, chosen as the decoder would (the run's, else the config's
 * `policy.profile`, else detection from the loaded model), checked against the run's prompt family
 * before any question is decoded (BAD_REQUEST), so a bad pair fails the run instead of every item.
 */
function runProfile(
  runtime: EvalRuntime,
  config: Config | undefined,
  explicit: string | undefined,
  family: PromptFamily | undefined,
  source: string,
): ProfileChoice {
  const choice = explicit !== undefined ? resolveProfile(explicit, {}, source) : resolveProfile(config?.policy.profile, runtime.policy.info.metadata ?? {});
  familyFor(choice.profile, family);
  return choice;
}

/** Reads the configuration for the decoding path (before the self-check, so a bad flag fails fast). */
async function readConfig(flags: Record<string, string>, configFile: string | undefined): Promise<Config> {
  const { loadConfig } = await import("../config/index.js");
  return loadConfig({ env: process.env, flags, ...(configFile ? { file: configFile } : {}) });
}

/** Starts the runtime (policy + decoder); imported only on the decoding path, so scoring predictions never loads llama.cpp. */
async function openRuntime(config: Config): Promise<EvalRuntime> {
  const { createRuntime } = await import("../runtime/index.js");
  return createRuntime(config);
}

/** The parsed flags of `reex eval`. */
type EvalValues = { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };

/** The command line, parsed and checked. */
interface EvalArgs {
  values: EvalValues & { dataset: string; "db-root": string };
  /** `--section.key` settings, plus `policy.model` from `--model`. */
  configFlags: Record<string, string>;
  runSpecs?: RunSpec[];
  strategies: Strategy[];
  limit?: number;
  concurrency: number;
  candidates?: number;
  timeoutMs: number;
  maxRows: number;
  layout: DatasetLayout | "auto";
  /** Examples per question from `--examples-from`; undefined: the config's `teach.examples`. */
  examples: number | undefined;
}

/** Parses and checks the command line; an exit code (0 after --help, 2 on bad usage, message printed) instead when it cannot run. */
function parseEvalArgs(argv: string[]): EvalArgs | number {
  let values: EvalValues;
  let configFlags: Record<string, string>;
  try {
    const split = splitSettings(argv);
    configFlags = split.flags;
    if (split.file !== undefined) split.rest.push("--config", split.file);
    ({ values } = parseArgs({ args: split.rest, options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (err) {
    console.error(`reex eval: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  try {
    const { dataset, "db-root": dbRoot } = values;
    if (!dataset || !dbRoot) throw new ReexError("BAD_REQUEST", "--dataset and --db-root are required");
    if ([values.strategy, values.predictions, values.runs].filter(Boolean).length !== 1)
      throw new ReexError("BAD_REQUEST", "give exactly one of --strategy, --runs or --predictions");
    let runSpecs: RunSpec[] | undefined;
    if (values.runs) {
      if (values.candidates || values.model || values.profile)
        throw new ReexError("BAD_REQUEST", "--candidates, --model and --profile go inside the --runs file");
      runSpecs = readRunSpecs(values.runs);
    }
    let strategies: Strategy[] = [];
    if (values.strategy) {
      strategies = values.strategy
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean) as Strategy[];
      const bad = strategies.filter((s) => !STRATEGIES.includes(s));
      if (bad.length > 0 || strategies.length === 0)
        throw new ReexError("BAD_REQUEST", `unknown strategy ${bad.join(", ") || "(none)"}; use ${STRATEGIES.join(", ")}`);
      if (new Set(strategies).size !== strategies.length) throw new ReexError("BAD_REQUEST", "a strategy is listed twice");
    }
    if (values.predictions && (values.candidates || values.model || values.profile))
      throw new ReexError("BAD_REQUEST", "--candidates, --model and --profile only apply to --strategy");
    if (values.profile !== undefined) getProfile(values.profile);
    const examples = values.examples === undefined ? undefined : Number(values.examples);
    if (examples !== undefined && (!Number.isInteger(examples) || examples < 0 || examples > 20))
      throw new ReexError("BAD_REQUEST", `--examples must be an integer from 0 to 20, got "${values.examples}"`);
    if (!values["examples-from"] && (values.examples !== undefined || runSpecs?.some((r) => r.examples !== undefined)))
      throw new ReexError("BAD_REQUEST", '--examples and a run\'s "examples" need --examples-from FILE');
    if (values["examples-from"] && values.predictions) throw new ReexError("BAD_REQUEST", "--examples-from does not apply to --predictions");
    const layout = values.layout ?? "auto";
    if (layout !== "auto" && layout !== "bird" && layout !== "spider")
      throw new ReexError("BAD_REQUEST", `--layout must be bird, spider or auto, got "${layout}"`);
    if (values.model) configFlags["policy.model"] = values.model;
    return {
      values: { ...values, dataset, "db-root": dbRoot },
      configFlags,
      ...(runSpecs ? { runSpecs } : {}),
      strategies,
      limit: positiveInt("limit", values.limit),
      concurrency: positiveInt("concurrency", values.concurrency) ?? 1,
      candidates: positiveInt("candidates", values.candidates),
      timeoutMs: positiveInt("timeout-ms", values["timeout-ms"]) ?? DEFAULT_EVAL_TIMEOUT_MS,
      maxRows: positiveInt("max-rows", values["max-rows"]) ?? DEFAULT_EVAL_MAX_ROWS,
      layout,
      examples,
    };
  } catch (err) {
    console.error(`reex eval: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
}

/**
 * Points every item at a Postgres database named by `url` (with `{db_id}`), pushing each source
 * it opens onto `sources` for the caller to close; leaves out questions whose gold SQL PostgreSQL
 * does not accept. An exit code instead on a bad URL.
 */
async function onPostgres(
  url: string,
  items: EvalItem[],
  sources: PostgresSource[],
  limits: { timeoutMs: number; maxRows: number },
): Promise<EvalItem[] | number> {
  const { isPostgresUrl, openPostgresSource } = await import("../pg/index.js");
  if (!isPostgresUrl(url) || !url.includes("{db_id}")) {
    console.error("reex eval: --postgres must be a postgres:// URL with {db_id} where the database name goes");
    return 2;
  }
  const keys = new Map<string, string>();
  for (const dbId of new Set(items.map((i) => i.dbId))) {
    const source = await openPostgresSource({ url: url.replaceAll("{db_id}", dbId), name: dbId, snapshotDir: join(".reex", "pg") });
    sources.push(source);
    keys.set(dbId, source.key);
  }
  let mapped = items.map((i) => ({ ...i, dbPath: keys.get(i.dbId)! }));
  // gold SQL written for SQLite (strftime, date modifiers, …) may not run on PostgreSQL: those questions cannot be scored there
  const rejected: EvalItem[] = [];
  for (const item of mapped) {
    const gold = await sources.find((s) => s.key === item.dbPath)!.execute(item.goldSql, limits);
    if (!gold.ok && gold.error.category !== "timeout") rejected.push(item);
  }
  if (rejected.length > 0) {
    mapped = mapped.filter((i) => !rejected.includes(i));
    console.error(
      `reex eval: left out ${rejected.length} questions whose gold SQL PostgreSQL does not accept: ${rejected.map((i) => i.questionId).join(", ")}`,
    );
  }
  console.error(`reex eval: running on PostgreSQL (${sources.length} databases, ${mapped.length} questions)`);
  return mapped;
}

/** Runs one pass over the items with the shared execution settings and its own progress bar. */
type Pass = <T>(label: string, work: (opts: EvalExecOptions) => Promise<T>) => Promise<T>;

/** What the decoding runs share; `runtime` is the one open runtime, which the caller closes. */
interface DecodeRunsContext {
  args: EvalArgs;
  items: EvalItem[];
  config: Config;
  pass: Pass;
  holder: { runtime?: EvalRuntime };
  /** Called with the runs so far after each run ends, so a long evaluation keeps what it finished. */
  finished: (runs: EvalRun[]) => void;
  /** `--examples-from`'s questions, when given. */
  pool?: { items: EvalItem[]; source: string };
}

/** The examples option of a run offered `k` examples per question from the pool (none without a pool or with k = 0). */
function examplesOption(pool: DecodeRunsContext["pool"], k: number): Pick<RunEvalOptions, "examples"> {
  if (!pool || k === 0) return {};
  return { examples: { k, source: pool.source, of: examplesFromPool(pool.items, k) } };
}

/** The `--runs` file's runs, in order; a model is loaded once for its consecutive runs. */
async function decodeRunSpecs(ctx: DecodeRunsContext, runSpecs: RunSpec[]): Promise<EvalRun[]> {
  const { args, items, config, pass, holder } = ctx;
  const runs: EvalRun[] = [];
  let loaded: string | undefined;
  let runConfig = config;
  for (const spec of runSpecs) {
    const model = spec.model ?? args.configFlags["policy.model"];
    const lora = spec.lora?.join(",");
    const key = `${model ?? ""}\u0000${lora ?? ""}`;
    if (!holder.runtime || key !== loaded) {
      const previous = holder.runtime;
      holder.runtime = undefined; // closed here, so the caller must not close it again
      await previous?.close();
      const flags = { ...args.configFlags, ...(model ? { "policy.model": model } : {}), ...(lora !== undefined ? { "policy.lora": lora } : {}) };
      runConfig = await readConfig(flags, args.values.config);
      holder.runtime = await openRuntime(runConfig);
      loaded = key;
    }
    const runtime = holder.runtime;
    const choice = runProfile(runtime, runConfig, spec.profile, spec.promptFamily, `the runs file's "${spec.label}" entry`);
    console.error(`reex eval: run ${spec.label}: profile ${choice.profile.id} (${choice.reason})`);
    const k = spec.strategy === "greedy" ? undefined : (spec.candidates ?? config.decoding.candidates);
    const request = {
      ...(spec.promptFamily ? { promptFamily: spec.promptFamily } : {}),
      constrained: spec.constrained ?? runtime.constrained,
      ...(spec.schemaHints !== undefined ? { schemaHints: spec.schemaHints } : {}),
      ...(spec.temperature !== undefined ? { temperature: spec.temperature } : {}),
      ...(spec.topP !== undefined ? { topP: spec.topP } : {}),
      ...(spec.seed !== undefined ? { seed: spec.seed } : {}),
    };
    runs.push(
      await pass(spec.label, (opts) =>
        runEval({
          ...opts,
          items,
          decode: runtime.decode,
          strategy: spec.strategy,
          label: spec.label,
          request,
          profile: choice.profile.id,
          ...(runConfig.policy.lora.length ? { lora: runConfig.policy.lora } : {}),
          ...examplesOption(ctx.pool, spec.examples ?? args.examples ?? config.teach.examples),
          ...(k !== undefined ? { candidates: k } : {}),
          ...(args.limit !== undefined ? { limit: args.limit } : {}),
        }),
      ),
    );
    ctx.finished(runs);
  }
  return runs;
}

/** The `--strategy` runs, one after the other, on one runtime. */
async function decodeStrategies(ctx: DecodeRunsContext): Promise<EvalRun[]> {
  const { args, items, config, pass, holder } = ctx;
  holder.runtime = await openRuntime(config);
  const runtime = holder.runtime;
  const choice = runProfile(runtime, config, args.values.profile, undefined, "--profile");
  console.error(`reex eval: profile ${choice.profile.id} (${choice.reason})`);
  const runs: EvalRun[] = [];
  for (const strategy of args.strategies) {
    const k = strategy === "greedy" ? undefined : (args.candidates ?? config.decoding.candidates);
    runs.push(
      await pass(strategy, (opts) =>
        runEval({
          ...opts,
          items,
          decode: runtime.decode,
          strategy,
          request: { constrained: runtime.constrained },
          profile: choice.profile.id,
          ...examplesOption(ctx.pool, args.examples ?? config.teach.examples),
          ...(k !== undefined ? { candidates: k } : {}),
          ...(args.limit !== undefined ? { limit: args.limit } : {}),
        }),
      ),
    );
    ctx.finished(runs);
  }
  return runs;
}

/** Runs the command; returns the exit code (0 ok, 1 self-check or run failure, 2 bad arguments). */
export async function run(argv: string[]): Promise<number> {
  const args = parseEvalArgs(argv);
  if (typeof args === "number") return args;
  const { values, configFlags, runSpecs, limit, concurrency, timeoutMs, maxRows } = args;

  const datasetFile = resolve(values.dataset);
  const dbRoot = resolve(values["db-root"]);
  const dataset = loadDataset(datasetFile, { dbRoot, layout: args.layout });
  let items = limit === undefined ? dataset.items : dataset.items.slice(0, limit);
  const postgres: PostgresSource[] = [];
  if (values.postgres !== undefined) {
    let mapped: EvalItem[] | number;
    try {
      mapped = await onPostgres(values.postgres, items, postgres, { timeoutMs, maxRows });
    } catch (err) {
      await Promise.allSettled(postgres.map((s) => s.close()));
      throw err;
    }
    if (typeof mapped === "number") return mapped;
    items = mapped;
  }
  const poolFile = values["examples-from"] ? resolve(values["examples-from"]) : undefined;
  const pool = poolFile ? { items: loadDataset(poolFile, { dbRoot, layout: "auto" }).items, source: poolFile } : undefined;
  if (pool) console.error(`reex eval: ${pool.items.length} example questions from ${poolFile}`);
  const primaryRule: ExRule = dataset.layout === "spider" ? "spider" : "bird";
  const predictions = values.predictions ? readPredictions(values.predictions, items, limit) : undefined;
  console.error(`reex eval: ${items.length} questions (${dataset.layout} layout) from ${datasetFile}`);

  const config = predictions ? undefined : await readConfig(configFlags, values.config);
  // A configured profile is known before any model loads: check the runs that use it now, not after the runs before them.
  const configured = config?.policy.profile;
  if (runSpecs && configured !== undefined && configured !== "auto") {
    for (const spec of runSpecs) if (spec.profile === undefined) familyFor(getProfile(configured), spec.promptFamily);
  }
  const quiet = values.quiet ?? false;
  const controller = new AbortController();
  setMaxListeners(0, controller.signal); // every in-flight decode and query listens on it; not a leak
  const onSigint = (): void => controller.abort();
  process.once("SIGINT", onSigint);
  const holder: { runtime?: EvalRuntime } = {};
  const executor: Executor = new ExecutorPool({ workers: Math.max(2, Math.min(concurrency, 8)), timeoutMs, maxRows });
  try {
    const golds = new Map<number, ExecResult>();
    const pass: Pass = async (label, work) => {
      const bar = quiet ? undefined : createProgressBar({ total: items.length, label: label.padEnd(10) });
      try {
        return await work({
          executor,
          timeoutMs,
          maxRows,
          goldResults: golds,
          concurrency,
          signal: controller.signal,
          onProgress: (p) => bar?.update(p.done, p.correct === undefined ? undefined : `EX ${((p.correct / p.done) * 100).toFixed(1)}%`),
        });
      } finally {
        bar?.finish();
      }
    };

    const check = await pass("self-check", (opts) => selfCheck(items, { ...opts, concurrency: Math.max(concurrency, 4) }));
    if (!check.ok) {
      console.error("reex eval: SELF-CHECK FAILED: the EX comparison does not score gold against itself as correct (or gold SQL does not run).");
      console.error("No figures are reported, since they would not mean anything. Problems:");
      for (const line of describeSelfCheck(check)) console.error(`  - ${line}`);
      return 1;
    }
    console.error(`reex eval: self-check passed (${check.checked} gold queries, every rule 100%)`);

    const outDir = resolve(values.out ?? join("eval-out", timestamp()));
    const save = (runs: EvalRun[]) =>
      writeReport(
        createReport({
          runs,
          dataset: { file: datasetFile, dbRoot, layout: dataset.layout, count: items.length },
          primaryRule,
          selfCheck: { ok: check.ok, checked: check.checked, failures: check.failures },
        }),
        outDir,
      );
    const total = runSpecs?.length ?? args.strategies.length;
    const finished = (runs: EvalRun[]): void => {
      if (runs.length < total) console.error(`reex eval: ${runs.length} of ${total} runs done; the report so far is in ${save(runs).json}`);
    };
    const ctx = { args, items, config: config!, pass, holder, finished, ...(pool ? { pool } : {}) };
    let runs: EvalRun[];
    if (predictions) runs = [await pass("predictions", (opts) => scorePredictions({ ...opts, items, predictions }))];
    else if (runSpecs) runs = await decodeRunSpecs(ctx, runSpecs);
    else runs = await decodeStrategies(ctx);
    const written = save(runs);
    printSummary(runs, primaryRule);
    console.log(`wrote ${written.json}`);
    console.log(`wrote ${written.html}`);
    return 0;
  } finally {
    process.off("SIGINT", onSigint);
    await holder.runtime?.close();
    await executor.close();
    await Promise.allSettled(postgres.map((s) => s.close()));
  }
}

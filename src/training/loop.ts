/**
 * The training loop of `reex train sft|grpo`: per step, collect experience (GRPO: G rollouts per
 * question through the server's agent code, rewards, advantages; SFT: tokenised traces with the
 * injected feedback text masked out), all in one model profile's protocol (the config's `profile`,
 * or the one detected from the model), write it to `<run>/experience/`, run one step of the Python
 * learner, and hot-reload the new weights (with `learner.lora`, the new adapter on the unchanged
 * base) into the rollout policy. Checkpoints every K steps (and after the last), `--resume` from
 * the latest one, held-out evaluation through src/eval's `runEval`, metrics as JSONL and an HTML
 * report.
 *
 * Run folder: run.json, metrics.jsonl, report.html, experience/step-N.jsonl, learner/step-N.json
 * (+ .log), models/step-N.gguf or step-N.lora.gguf (current weights only),
 * checkpoints/step-N.{gguf|lora.gguf,json,optim}, optimizer.pt (AdamW state carried between
 * learner processes), eval/step-N.json, indexes/.
 */
import { existsSync, readFileSync } from "node:fs";
import { appendFile, copyFile, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { REWRITES_OFF, familyFor, resolveProfile, type ModelProfile, type PromptFamily } from "../agent/index.js";
import { createDecoder, createPromptBuilder, createServedGrammarFor, type PromptFor } from "../decoding/index.js";
import { ReexError, toReexError } from "../errors/index.js";
import { createProgressBar, loadDataset, runEval, type EvalItem, type ProgressBar, type ProgressStream } from "../eval/index.js";
import { createLlamaPolicy } from "../policy/index.js";
import type { Policy } from "../policy/index.js";
import { ExecutorPool, type ExecResult, type Executor } from "../sql/index.js";
import { createLearnerStep, type LearnerStep } from "./learner.js";
import { parseTraces, sftRecord, type SftTrace } from "./traces.js";
import { latestCheckpoint, saveCheckpoint, type Checkpoint } from "./checkpoints.js";
import { permutation, scheduleFor } from "./schedule.js";
import { checkGold, screenQuestions } from "./curriculum.js";
import { fnv1a32 } from "../util/index.js";
import type { TrainConfig, TrainMode } from "./config.js";
import { experiencePath, stepLabel, writeExperience, type ExperienceRecord } from "./experience.js";
import { assignAdvantages, isInformative, runGroup, sampleIfFits, toExperienceRecord, type RolloutGroup, type TrainingQuestion } from "./groups.js";
import { readMetrics, writeTrainingReport, type MetricsRow, type ReportInfo } from "./report.js";
import { CORRECTNESS_FIRST_PRESETS, GoldCache, resolveRewardSpec, type ResolvedRewardSpec, type RewardBreakdown, type RewardEnv } from "./rewards.js";

/** How {@link runTraining} runs; everything but `mode` has a working default. */
export interface TrainOptions {
  mode: TrainMode;
  /** Continue from the latest checkpoint of `runDir`. Default false (an existing run is refused). */
  resume?: boolean;
  /** Loads the rollout policy: `model` with the `lora` adapters on it (a LoRA run's current adapter, else []). Default `createLlamaPolicy` with the config's `policy` section. */
  createPolicy?: (model: string, config: TrainConfig, lora: string[]) => Promise<Policy>;
  /** Default {@link createLearnerStep}. */
  learner?: LearnerStep;
  /** Default an ExecutorPool with the config's `executor` section (closed at the end). */
  executor?: Executor;
  /** Where the progress bar goes; null for none. Default process.stderr. */
  progress?: ProgressStream | null;
  /** Status lines. Default: written to stderr. */
  log?: (line: string) => void;
  signal?: AbortSignal;
}

/** What a finished run leaves behind. */
export interface TrainResult {
  runDir: string;
  mode: TrainMode;
  /** The step the run started after (0 fresh, else the checkpoint resumed). */
  resumedFrom: number;
  lastStep: number;
  /** The final weights; with `learner.lora` the base, unchanged. */
  model: string;
  /** With `learner.lora`: the final adapter, to load beside `model` (null while the run has none). Else null. */
  lora: string | null;
  checkpoints: number[];
  metrics: MetricsRow[];
  report: string;
}

/** A configured end-of-turn text, with "auto" read off the policy's model (`<|im_end|>` where it names none). */
function endOfTurnText(setting: string, policy: Policy): string {
  return setting === "auto" ? (policy.info.endOfTurn ?? "<|im_end|>") : setting;
}

function mean(xs: readonly number[]): number | null {
  return xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

function meanOfKeys(maps: readonly Record<string, number>[]): Record<string, number> {
  const sums = new Map<string, { s: number; n: number }>();
  for (const m of maps) {
    for (const [k, v] of Object.entries(m)) {
      const e = sums.get(k) ?? { s: 0, n: 0 };
      e.s += v;
      e.n++;
      sums.set(k, e);
    }
  }
  return Object.fromEntries([...sums].map(([k, e]) => [k, e.s / e.n]));
}

/** The rollout policy of the config's `policy` section: `model` with the `lora` adapters on it. */
export async function defaultPolicy(model: string, config: TrainConfig, lora: string[]): Promise<Policy> {
  return createLlamaPolicy({
    model,
    ...(lora.length > 0 ? { lora } : {}),
    gpu: config.policy.gpu,
    contextSize: config.policy.contextSize,
    sequences: config.policy.sequences,
    ...(config.policy.threads !== undefined ? { threads: config.policy.threads } : {}),
  });
}

/** The run folder's bookkeeping: where the run starts, what it resumes, and how run.json is rewritten. */
interface RunFolder {
  start: number;
  checkpoint: Checkpoint | null;
  /** The profile a resumed run recorded, if any. */
  recorded: { id: string; reason: string } | undefined;
  metricsFile: string;
  reportFile: string;
  optimizerState: string;
  masterFile: string;
  writeRunFile(profile?: { id: string; reason: string }): Promise<void>;
}

/** Checks the run folder (refusing to overwrite a run unless resuming it) and readies it: on resume, metrics cut to the checkpoint's step and its optimizer state restored. */
async function openRunFolder(config: TrainConfig, options: TrainOptions, log: (line: string) => void): Promise<RunFolder> {
  const { mode } = options;
  const runDir = config.runDir;
  const metricsFile = join(runDir, "metrics.jsonl");
  const runFile = join(runDir, "run.json");
  let recorded: { id: string; reason: string } | undefined;
  if (existsSync(runFile)) {
    const previous = JSON.parse(readFileSync(runFile, "utf8")) as { mode?: string; profile?: { id: string; reason: string } };
    recorded = previous.profile;
    if (!options.resume) throw new ReexError("BAD_REQUEST", `${runDir} already holds a training run; pass --resume to continue it or choose another runDir`);
    if (previous.mode && previous.mode !== mode) throw new ReexError("BAD_REQUEST", `${runDir} holds a ${previous.mode} run; cannot resume it as ${mode}`);
  }
  if (!existsSync(config.model)) throw new ReexError("MODEL_NOT_FOUND", `model file not found: ${config.model}`);
  const loraIn = config.learner.lora?.in;
  if (loraIn && !existsSync(loraIn)) throw new ReexError("MODEL_NOT_FOUND", `LoRA adapter file not found: ${loraIn}`);
  for (const sub of ["experience", "learner", "models", "checkpoints", "eval"]) await mkdir(join(runDir, sub), { recursive: true });

  const checkpoint = options.resume ? latestCheckpoint(runDir) : null;
  if (checkpoint && checkpoint.lora !== Boolean(config.learner.lora))
    throw new ReexError(
      "BAD_REQUEST",
      `the checkpoint of step ${checkpoint.step} in ${runDir} is ${checkpoint.lora ? "a LoRA adapter" : "a whole model"}; resume it ${checkpoint.lora ? "with" : "without"} \`learner.lora\``,
    );
  const start = checkpoint?.step ?? 0;
  const optimizerState = join(runDir, "optimizer.pt");
  const masterFile = join(runDir, "master.pt");
  await rm(masterFile, { force: true });
  if (options.resume) {
    const kept = readMetrics(metricsFile).filter((r) => r.step <= start);
    await writeFile(metricsFile, kept.map((r) => JSON.stringify(r) + "\n").join(""));
    await rm(optimizerState, { force: true });
    for (const name of await readdir(join(runDir, "models"))) await rm(join(runDir, "models", name), { force: true });
    if (checkpoint?.optimizer) await copyFile(checkpoint.optimizer, optimizerState);
    if (checkpoint?.master) await copyFile(checkpoint.master, masterFile);
    log(checkpoint ? `reex train: resuming ${runDir} from the checkpoint of step ${start}` : `reex train: no checkpoint in ${runDir}; starting at step 0`);
  } else {
    await writeFile(metricsFile, "");
  }
  const writeRunFile = (profile?: { id: string; reason: string }): Promise<void> =>
    writeFile(runFile, `${JSON.stringify({ mode, config, ...(profile ? { profile } : {}), updatedAt: new Date().toISOString() }, null, 2)}\n`);
  await writeRunFile(options.resume ? recorded : undefined);
  return { start, checkpoint, recorded, metricsFile, reportFile: join(runDir, "report.html"), optimizerState, masterFile, writeRunFile };
}

/** What the HTML report says about the run's settings. */
function reportInfoOf(config: TrainConfig, mode: TrainMode, spec: ResolvedRewardSpec, rule: string): ReportInfo {
  return {
    mode,
    runDir: config.runDir,
    model: config.model,
    ...(config.description ? { description: config.description } : {}),
    ...(mode === "grpo" ? { rewardPreset: spec.preset } : {}),
    settings: {
      steps: config.steps,
      questionsPerStep: config.questionsPerStep,
      ...(mode === "grpo"
        ? {
            groupSize: config.groupSize,
            temperature: config.temperature,
            maxInteractions: config.maxInteractions,
            advantage: config.advantage,
            reward: spec,
            rule,
            ...(config.shuffleAdvantages ? { shuffleAdvantages: true } : {}),
            ...(config.dynamicSampling ? { dynamicSampling: config.dynamicSampling } : {}),
            ...(config.curriculum ? { curriculum: config.curriculum } : {}),
          }
        : {}),
      learningRate: config.learningRate,
      clip: config.clip,
      ...(mode === "grpo" && config.clipHigh !== undefined ? { clipHigh: config.clipHigh } : {}),
      klBeta: config.klBeta,
      ...(config.learner.lora ? { lora: config.learner.lora } : {}),
    },
  };
}

/** A run's data: GRPO questions (gold SQL checked) or SFT traces, and the held-out set. */
interface TrainingData {
  questions: TrainingQuestion[];
  /** SFT's traces, or GRPO's `replay` traces. */
  traces: SftTrace[];
  heldout: { items: EvalItem[]; layout: "bird" | "spider" } | undefined;
}

/** The GRPO questions of the config's `data` (its `offset` and `limit` applied), gold SQL not yet run; DATASET_INVALID when none. */
export function trainingQuestions(config: TrainConfig): TrainingQuestion[] {
  const data = config.data;
  if (!data) throw new ReexError("CONFIG_INVALID", "grpo training needs `data` (dataset and dbRoot)");
  const ds = loadDataset(data.dataset, { dbRoot: data.dbRoot, layout: data.layout });
  const questions = ds.items.slice(data.offset, data.limit ? data.offset + data.limit : undefined).map((it) => ({
    questionId: it.questionId,
    dbPath: it.dbPath,
    ...(it.dbPath2 ? { dbPath2: it.dbPath2 } : {}),
    question: it.question,
    ...(it.evidence ? { evidence: it.evidence } : {}),
    goldSql: it.goldSql,
  }));
  if (questions.length === 0) throw new ReexError("DATASET_INVALID", `${data.dataset}: no training questions`);
  return questions;
}

/** Loads the run's data before the model, so a bad file fails first. */
async function loadTrainingData(config: TrainConfig, mode: TrainMode, executor: Executor, goldCache: GoldCache): Promise<TrainingData> {
  let questions: TrainingQuestion[] = [];
  let traces: SftTrace[] = [];
  if (mode === "grpo") {
    questions = trainingQuestions(config);
    await checkGold(questions, executor, goldCache, config.reward.timeoutMs, config.data!.dataset);
    if (config.replay) traces = await readTraces(config.replay.traces);
  } else {
    traces = await readTraces(config.sft!.traces);
  }
  let heldout: TrainingData["heldout"];
  if (config.eval) {
    const ds = loadDataset(config.eval.dataset, { dbRoot: config.eval.dbRoot, layout: config.eval.layout });
    const e = config.eval;
    heldout = { items: ds.items.slice(e.offset, e.limit ? e.offset + e.limit : undefined), layout: ds.layout };
    if (heldout.items.length === 0) throw new ReexError("DATASET_INVALID", `${e.dataset}: no held-out questions after offset ${e.offset}`);
  }
  return { questions, traces, heldout };
}

async function readTraces(file: string): Promise<SftTrace[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read traces file ${file}: ${(err as Error).message}`);
  }
  return parseTraces(text, file);
}

/** One step's experience and the metrics it contributes. */
interface StepExperience {
  records: ExperienceRecord[];
  stats: Partial<MetricsRow>;
}

/**
 * A GRPO step's experience: a group of rollouts per scheduled question (dynamic sampling keeps sampling
 * the step's schedule until it has `questionsPerStep` informative groups or has sampled its cap, which it
 * logs), advantages assigned (shuffled for the signal check). A question whose prompt does not fit the
 * context window is skipped with a log line instead of ending the run.
 */
async function grpoExperience(
  step: number,
  config: TrainConfig,
  questions: readonly TrainingQuestion[],
  sampleGroup: GroupSampler,
  rule: "correctness-first" | "as-is",
  endOfTurn: number[],
  tick: () => void,
  log: (line: string) => void,
): Promise<StepExperience> {
  const perStep = config.questionsPerStep;
  const kept: RolloutGroup[] = [];
  const sampled: RolloutGroup[] = [];
  const ds = config.dynamicSampling;
  const budget = ds ? perStep + Math.floor(perStep * ds.maxExtra) : perStep;
  const order = scheduleFor(step, budget, questions.length, config.seed);
  const skipped: string[] = [];
  for (const [j, qi] of order.entries()) {
    if (kept.length >= perStep) break;
    const q = questions[qi]!;
    const group = await sampleIfFits(() => sampleGroup(q, config.groupSize, fnv1a32(`${config.seed}:${step}:${j}`) & 0x3fffffff));
    if (group instanceof ReexError) {
      skipped.push(String(q.questionId));
      log(`reex train: step ${step}: question ${q.questionId} skipped: ${group.code}: ${group.message}`);
      if (j < perStep) tick();
      continue;
    }
    sampled.push(group);
    if (!ds || isInformative(group, ds.on)) kept.push(group);
    if (j < perStep) tick();
  }
  const trained = ds?.train === "signal" ? sampled.filter((g) => kept.includes(g) || isInformative(g, "reward")) : kept;
  const signalOnly = trained.length - kept.length;
  if (ds && kept.length < perStep)
    log(
      `reex train: step ${step}: dynamic sampling reached its cap of ${budget} groups (questionsPerStep ${perStep} + maxExtra ${ds.maxExtra} × ${perStep}) with ${kept.length} informative (${ds.on}); ${trained.length > 0 ? `training on those ${kept.length}${signalOnly > 0 ? ` and ${signalOnly} with a reward signal only` : ""}` : `none: training on the first ${Math.min(perStep, sampled.length)} sampled`}`,
    );
  const groups = trained.length > 0 ? trained : sampled.slice(0, perStep);
  const { zeroVarianceGroups, diagnostics } = assignAdvantages(groups, config.advantage, { rule, shapingScale: config.reward.shapingScale });
  const all = groups.flatMap((g) => g.rollouts);
  if (config.shuffleAdvantages) {
    const shuffled = permutation(all.length, `shuffle:${config.seed}:${step}`);
    const advs = all.map((r) => r.advantage);
    all.forEach((r, i) => (r.advantage = advs[shuffled[i]!]!));
  }
  const records = all.map((r) => toExperienceRecord(r, endOfTurn));
  const totals = all.map((r) => r.reward.total);
  const m = mean(totals) ?? 0;
  const stats: Partial<MetricsRow> = {
    rollouts: all.length,
    reward_mean: m,
    reward_std: Math.sqrt(mean(totals.map((x) => (x - m) ** 2)) ?? 0),
    components: meanOfKeys(all.map((r) => r.reward.components)),
    details: meanOfKeys(all.map((r) => r.reward.details)),
    train_ex: mean(all.map((r) => ((r.reward.draws?.first ?? r.reward.correct) ? 1 : 0))),
    ...drawStats(all),
    response_tokens: mean(records.map((r) => r.mask.reduce<number>((a, b) => a + b, 0))) ?? 0,
    interactions: mean(all.map((r) => r.rollout.interactions)),
    truncated: mean(all.map((r) => (r.rollout.truncated ? 1 : 0))),
    zero_variance_groups: zeroVarianceGroups,
    groups: groups.length,
    sampled_groups: sampled.length,
    ...(skipped.length > 0 ? { skipped_questions: skipped } : {}),
    informative_share: diagnostics.informativeShare,
    contrast_share: diagnostics.contrastShare,
    correctness_share: diagnostics.correctnessShare,
  };
  return { records, stats };
}

/** Adds a GRPO step's `replay` traces (a seeded walk, its own order) to its experience, each with the fixed advantage; a trace that overflows the policy's context window is skipped with a log line. */
async function withReplay(
  step: number,
  exp: StepExperience,
  policy: Policy,
  traces: readonly SftTrace[],
  config: TrainConfig,
  profile: ModelProfile,
  log: (line: string) => void,
): Promise<StepExperience> {
  const replay = config.replay;
  if (!replay) return exp;
  const picks = scheduleFor(step, replay.perStep, traces.length, fnv1a32(`replay:${config.seed}`));
  const eot = endOfTurnText("auto", policy);
  const records: ExperienceRecord[] = [];
  for (const ti of picks) {
    const rec = await sampleIfFits(() => sftRecord(policy, traces[ti]!, eot, ti, profile));
    const skip = `reex train: step ${step}: replay trace ${ti} skipped`;
    if (rec instanceof ReexError) {
      log(`${skip}: ${rec.code}: ${rec.message}`);
      continue;
    }
    const length = rec.prompt_tokens.length + rec.tokens.length;
    if (length > policy.info.contextSize) {
      log(`${skip}: its ${length} tokens overflow the context window (${policy.info.contextSize})`);
      continue;
    }
    records.push({ ...rec, advantage: replay.advantage });
  }
  return { records: [...exp.records, ...records], stats: { ...exp.stats, replay_records: records.length } };
}

/** Where rollouts were scored on two row draws: EX on both (what the reward counts) and the spurious rate (right on exactly one draw ÷ right on the first). */
function drawStats(rollouts: readonly { reward: RewardBreakdown }[]): Pick<MetricsRow, "train_ex_both_draws" | "spurious_rate"> {
  const drawn = rollouts.filter((r) => r.reward.draws);
  if (drawn.length === 0) return {};
  const first = drawn.filter((r) => r.reward.draws!.first).length;
  return {
    train_ex_both_draws: mean(rollouts.map((r) => (r.reward.correct ? 1 : 0))),
    spurious_rate: first === 0 ? null : drawn.filter((r) => r.reward.draws!.first !== r.reward.draws!.second).length / first,
  };
}

/** An SFT step's experience: the scheduled traces tokenized, injected text masked out. */
async function sftExperience(
  picks: readonly number[],
  policy: Policy,
  traces: readonly SftTrace[],
  config: TrainConfig,
  profile: ModelProfile,
  tick: () => void,
): Promise<StepExperience> {
  const records: ExperienceRecord[] = [];
  for (const ti of picks) {
    records.push(await sftRecord(policy, traces[ti]!, endOfTurnText(config.sft!.endOfTurn, policy), ti, profile));
    tick();
  }
  return { records, stats: { rollouts: records.length, response_tokens: mean(records.map((r) => r.mask.reduce<number>((a, b) => a + b, 0))) ?? 0 } };
}

/** Runs the learner on a step's experience file and returns its metrics; the new weights (with `learner.lora`, the adapter continued from `loraIn`) are at `out`. */
async function learnStep(
  learner: LearnerStep,
  config: TrainConfig,
  mode: TrainMode,
  step: number,
  weights: { model: string; loraIn: string | null },
  experience: string,
  out: string,
  folder: RunFolder,
  signal: AbortSignal | undefined,
): Promise<Record<string, unknown>> {
  const runDir = config.runDir;
  const lora = config.learner.lora !== undefined;
  const learned = await learner(
    {
      mode,
      step,
      model: weights.model,
      experience,
      out,
      ...(weights.loraIn ? { loraIn: weights.loraIn } : {}),
      ...(mode === "grpo" && config.klBeta > 0 && !lora ? { ref: config.model } : {}),
      metricsFile: join(runDir, "learner", `step-${stepLabel(step)}.json`),
      logFile: join(runDir, "learner", `step-${stepLabel(step)}.log`),
      optimizerState: folder.optimizerState,
      ...(config.learner.masterWeights && !lora ? { master: folder.masterFile } : {}),
      config,
    },
    signal,
  );
  if (!existsSync(out)) throw new ReexError("LEARNER_FAILED", `the learner step ${step} reported success but wrote no ${lora ? "adapter" : "model"} at ${out}`);
  return learned;
}

/** A step's metrics row: its experience stats and the learner's numbers. */
function stepRow(step: number, mode: TrainMode, seconds: number, ex: number | null, stats: Partial<MetricsRow>, learned: Record<string, unknown>): MetricsRow {
  return {
    ...emptyRow(step, mode, seconds, ex),
    ...stats,
    kl: num(learned.kl),
    loss: num(learned.loss),
    grad_norm: num(learned.grad_norm),
    clip_frac: num(learned.clip_frac),
    ...(mode === "grpo"
      ? {
          old_logprob_abs_diff: num(learned.old_logprob_abs_diff),
          split_half_cosine: num((learned.split_half as { cosine_mean?: unknown } | undefined)?.cosine_mean),
        }
      : {}),
    learner: learned,
  };
}

/** Samples one question's group of rollouts. */
export type GroupSampler = (q: TrainingQuestion, groupSize: number, seed: number) => Promise<RolloutGroup>;

/** The reward spec of the config's `reward` section. */
export function rewardSpecOf(config: TrainConfig): ResolvedRewardSpec {
  return resolveRewardSpec({ ...config.reward, ...(config.reward.weights ? { weights: config.reward.weights } : {}) });
}

/** The rollout-group settings the training config fixes for every group of the run. */
function groupSettings(config: TrainConfig, family: PromptFamily, reward: ResolvedRewardSpec, signal: AbortSignal | undefined) {
  return {
    temperature: config.temperature,
    maxInteractions: config.maxInteractions,
    maxTokens: config.maxTokens,
    family,
    feedback: config.feedback,
    feedbackRows: config.feedbackRows,
    schemaHints: config.schemaHints,
    concurrency: config.rolloutConcurrency,
    reward,
    ...(signal ? { signal } : {}),
  };
}

/** What a run's groups are sampled with besides the config. */
export interface GroupDeps {
  policy: Policy;
  executor: Executor;
  promptFor: PromptFor;
  profile: ModelProfile;
  family: PromptFamily;
  reward: ResolvedRewardSpec;
  rewardEnv: RewardEnv;
  signal: AbortSignal | undefined;
  /** The prompt builder's value-index folder, which a `constrained` run's grammars read the question's literals from. */
  indexDir: string;
}

/** Samples groups as `reex train grpo` does: {@link runGroup} with the config's group settings (under the served grammars when `constrained`). */
export function groupSampler(config: TrainConfig, deps: GroupDeps): GroupSampler {
  const grammarFor = config.constrained ? createServedGrammarFor({ indexDir: deps.indexDir }) : undefined;
  return (q, groupSize, seed) =>
    runGroup(q, {
      ...groupSettings(config, deps.family, deps.reward, deps.signal),
      policy: deps.policy,
      executor: deps.executor,
      promptFor: deps.promptFor,
      profile: deps.profile,
      groupSize,
      seed,
      rewardEnv: deps.rewardEnv,
      ...(grammarFor ? { grammarFor } : {}),
    });
}

/** The decoder of the run's held-out evaluation: the policy's own answers as the rollouts decode them (no final retries, no server rewrites, constrained only when the run is) at the config's rollout limits. */
export function heldoutDecoder(
  config: TrainConfig,
  deps: { policy: Policy; executor: Executor; indexDir: string; profile: string; family: PromptFamily },
): ReturnType<typeof createDecoder> {
  return createDecoder({
    policy: deps.policy,
    executor: deps.executor,
    indexDir: deps.indexDir,
    profile: deps.profile,
    defaults: {
      maxInteractions: config.maxInteractions,
      maxTokens: config.maxTokens,
      promptFamily: deps.family,
      feedback: config.feedback,
      feedbackRows: config.feedbackRows,
      // the policy's own answers, as the rollouts decode: no final retries, no server rewrites, the run's grammar or none
      finalRetries: 0,
      constrained: config.constrained ? "on" : "off",
      ...REWRITES_OFF,
    },
  });
}

/** Held-out evaluation during a run. */
interface HeldoutEvaluator {
  /** Held-out EX at a step (null without `eval`), its run written to eval/step-N.json. */
  evaluate(step: number): Promise<number | null>;
  /** Closes the decoder, if one was made. */
  close(): void;
}

/** Evaluates the held-out set with the run's policy through src/eval's runEval; the decoder is made on first use, gold results cached across steps. */
function heldoutEvaluator(
  config: TrainConfig,
  heldout: TrainingData["heldout"],
  deps: { policy: Policy; executor: Executor; indexDir: string; profile: string; family: PromptFamily; signal: AbortSignal | undefined },
): HeldoutEvaluator {
  const evalGold = new Map<number, ExecResult>();
  let decoder: ReturnType<typeof createDecoder> | undefined;
  const { signal } = deps;
  return {
    async evaluate(step) {
      if (!heldout || !config.eval) return null;
      decoder ??= heldoutDecoder(config, deps);
      const run = await runEval({
        items: heldout.items,
        decode: decoder,
        executor: deps.executor,
        strategy: config.eval.strategy,
        ...(config.eval.candidates !== undefined ? { candidates: config.eval.candidates } : {}),
        goldResults: evalGold,
        ...(signal ? { signal } : {}),
        label: `step ${step}`,
      });
      await writeFile(
        join(config.runDir, "eval", `step-${stepLabel(step)}.json`),
        `${JSON.stringify({ step, config: run.config, summary: run.summary }, null, 2)}\n`,
      );
      return run.summary.ex[heldout.layout === "spider" ? "spider" : "bird"];
    },
    close: () => decoder?.close(),
  };
}

/** The log line of a finished step (without a progress bar). */
function stepLine(row: MetricsRow, steps: number, ex: number | null): string {
  const f = (x: number | null, d = 3): string => (x === null ? "–" : x.toFixed(d));
  return `reex train: step ${row.step}/${steps} ${row.seconds.toFixed(1)} s reward ${f(row.reward_mean)} train EX ${f(row.train_ex, 2)} interactions ${f(row.interactions, 2)} loss ${f(row.loss, 4)}${ex !== null ? ` held-out EX ${f(ex, 3)}` : ""}`;
}

/** What each step of a run works with; `model`, `done` and `checkpoints` advance as the steps finish. */
interface StepRun {
  config: TrainConfig;
  mode: TrainMode;
  folder: RunFolder;
  learner: LearnerStep;
  /** The rollout policy, hot-reloaded with each step's weights. */
  policy: Policy;
  /** Collects a step's experience (GRPO rollouts or SFT traces), calling `tick` per question or trace done. */
  collect: (step: number, tick: () => void) => Promise<StepExperience>;
  evaluate: (step: number) => Promise<number | null>;
  /** Appends a row to metrics.jsonl and rewrites the report. */
  appendRow: (row: MetricsRow) => Promise<void>;
  bar: ProgressBar | undefined;
  log: (line: string) => void;
  signal: AbortSignal | undefined;
  /** The current weights: the start model, then the latest step's; with `learner.lora` the base throughout. */
  model: string;
  /** With `learner.lora`: the current adapter (`lora.in` or the checkpoint's, then the latest step's); null before the first. */
  lora: string | null;
  /** Questions (or traces) done so far in this call, for the progress bar. */
  done: number;
  /** The steps checkpointed in this call. */
  checkpoints: number[];
}

/** Runs one step: experience, the learner, the new weights hot-reloaded; then its checkpoint, held-out evaluation and metrics row. */
async function runStep(run: StepRun, step: number): Promise<void> {
  const { config, mode, folder, policy, bar } = run;
  const runDir = config.runDir;
  if (run.signal?.aborted) throw new ReexError("CANCELLED", "training cancelled");
  const t0 = performance.now();
  const tick = (): void => void bar?.update(++run.done, `step ${step}/${config.steps}`);
  const { records, stats } = await run.collect(step, tick);

  const experience = experiencePath(runDir, step);
  await writeExperience(experience, records);
  const lora = config.learner.lora !== undefined;
  const out = join(runDir, "models", `step-${stepLabel(step)}${lora ? ".lora.gguf" : ".gguf"}`);
  const learned = await learnStep(run.learner, config, mode, step, { model: run.model, loraIn: run.lora }, experience, out, folder, run.signal);
  if (!policy.reload) throw new ReexError("BAD_REQUEST", `the ${policy.info.backend} policy cannot reload weights, so it cannot be trained in-process`);
  await policy.reload(lora ? { lora: [out] } : { model: out });
  const previous = lora ? run.lora : run.model;
  if (lora) run.lora = out;
  else run.model = out;
  if (previous?.startsWith(join(runDir, "models"))) await rm(previous, { force: true });

  if (step % config.checkpointEvery === 0 || step === config.steps) {
    await saveCheckpoint(runDir, step, run.lora ?? run.model, folder.optimizerState, folder.masterFile);
    run.checkpoints.push(step);
  }
  const ex = config.eval && (step % config.eval.every === 0 || step === config.steps) ? await run.evaluate(step) : null;
  const row = stepRow(step, mode, (performance.now() - t0) / 1000, ex, stats, learned);
  await run.appendRow(row);
  if (!bar) run.log(stepLine(row, config.steps, ex));
  bar?.update(
    run.done,
    `step ${step}/${config.steps}${row.reward_mean !== null ? ` reward ${row.reward_mean.toFixed(3)}` : ""}${row.loss !== null ? ` loss ${row.loss.toFixed(4)}` : ""}`,
  );
}

/** Runs (or resumes) a training run to `config.steps`; see the module comment for the run folder. */
export async function runTraining(config: TrainConfig, options: TrainOptions): Promise<TrainResult> {
  const mode = options.mode;
  const runDir = config.runDir;
  const log = options.log ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const signal = options.signal;
  const folder = await openRunFolder(config, options, log);
  const { start, checkpoint, recorded, metricsFile, reportFile } = folder;
  const model = config.learner.lora ? config.model : (checkpoint?.model ?? config.model);
  const lora = config.learner.lora ? (checkpoint?.model ?? config.learner.lora.in ?? null) : null;
  if (start >= config.steps) {
    log(`reex train: the run is already at step ${start} of ${config.steps}; nothing to do`);
    return {
      runDir,
      mode,
      resumedFrom: start,
      lastStep: start,
      model,
      lora,
      checkpoints: [],
      metrics: readMetrics(metricsFile),
      report: reportFile,
    };
  }

  const ownExecutor = !options.executor;
  const executor =
    options.executor ?? new ExecutorPool({ workers: config.executor.workers, timeoutMs: config.executor.timeoutMs, maxRows: config.executor.maxRows });
  const learner = options.learner ?? createLearnerStep();
  const spec = rewardSpecOf(config);
  const rule = config.reward.rule === "auto" ? (CORRECTNESS_FIRST_PRESETS.includes(spec.preset) ? "correctness-first" : "as-is") : config.reward.rule;
  const goldCache = new GoldCache();
  const rewardEnv = { executor, goldCache, timeoutMs: config.reward.timeoutMs };
  const indexDir = join(runDir, "indexes");
  const prompts = createPromptBuilder({ indexDir });
  let policy: Policy | undefined;
  let evaluator: HeldoutEvaluator | undefined;
  const reportInfo = reportInfoOf(config, mode, spec, rule);
  const checkpoints: number[] = [];

  try {
    const data = await loadTrainingData(config, mode, executor, goldCache);
    const { traces, heldout } = data;
    let questions = data.questions;
    policy = await (options.createPolicy ?? defaultPolicy)(model, config, lora ? [lora] : []);
    const current = policy;
    // A resumed "auto" run keeps the profile it started with: checkpoints are renamed files, and detection may read the file name.
    const keep = config.profile === "auto" && options.resume === true && recorded !== undefined;
    const choice = resolveProfile(
      keep ? recorded!.id : config.profile,
      current.info.metadata ?? {},
      keep ? "the run being resumed" : "the training config's profile",
    );
    const profile = choice.profile;
    const family = familyFor(profile, config.promptFamily);
    reportInfo.settings = { profile: profile.id, promptFamily: family, ...reportInfo.settings };
    log(`reex train: profile ${profile.id} (${choice.reason}), prompt family ${family}`);
    await folder.writeRunFile({ id: profile.id, reason: choice.reason });
    const endOfTurn = mode === "grpo" && config.endOfTurn ? current.tokenize(endOfTurnText(config.endOfTurn, current)) : [];
    const deps: GroupDeps = { policy: current, executor, promptFor: prompts.promptFor, profile, family, reward: spec, rewardEnv, signal, indexDir };
    const sampleGroup = groupSampler(config, deps);
    if (mode === "grpo" && config.curriculum) {
      questions = await screenQuestions(questions, config.curriculum, join(runDir, "curriculum.json"), sampleGroup, config.seed, log);
    }
    evaluator = heldoutEvaluator(config, heldout, { policy: current, executor, indexDir, profile: profile.id, family, signal });
    const evaluate = evaluator.evaluate;

    const appendRow = async (row: MetricsRow): Promise<void> => {
      await appendFile(metricsFile, `${JSON.stringify(row)}\n`);
      await writeTrainingReport(reportFile, readMetrics(metricsFile), reportInfo);
    };

    if (start === 0 && config.eval?.atStart && !readMetrics(metricsFile).some((r) => r.step === 0)) {
      const t0 = performance.now();
      const ex = await evaluate(0);
      await appendRow(emptyRow(0, mode, (performance.now() - t0) / 1000, ex));
      log(`reex train: held-out EX before training: ${ex === null ? "–" : (ex * 100).toFixed(1)}%`);
    }

    const perStep = config.questionsPerStep;
    const collect = (step: number, tick: () => void): Promise<StepExperience> =>
      mode === "grpo"
        ? grpoExperience(step, config, questions, sampleGroup, rule, endOfTurn, tick, log).then((exp) =>
            withReplay(step, exp, current, traces, config, profile, log),
          )
        : sftExperience(scheduleFor(step, perStep, traces.length, config.seed), current, traces, config, profile, tick);
    const bar =
      options.progress === null
        ? undefined
        : createProgressBar({ total: (config.steps - start) * perStep, label: `train ${mode}`, ...(options.progress ? { stream: options.progress } : {}) });
    const run: StepRun = { config, mode, folder, learner, policy: current, collect, evaluate, appendRow, bar, log, signal, model, lora, done: 0, checkpoints };
    try {
      for (let step = start + 1; step <= config.steps; step++) await runStep(run, step);
    } finally {
      bar?.finish();
    }
    if (!existsSync(reportFile)) await writeTrainingReport(reportFile, readMetrics(metricsFile), reportInfo);
    return {
      runDir,
      mode,
      resumedFrom: start,
      lastStep: config.steps,
      model: run.model,
      lora: run.lora,
      checkpoints,
      metrics: readMetrics(metricsFile),
      report: reportFile,
    };
  } catch (err) {
    throw toReexError(err);
  } finally {
    evaluator?.close();
    prompts.close();
    await policy?.close().catch(() => undefined);
    if (ownExecutor) await executor.close();
  }
}

function emptyRow(step: number, mode: TrainMode, seconds: number, heldout: number | null): MetricsRow {
  return {
    step,
    mode,
    time: new Date().toISOString(),
    seconds,
    rollouts: 0,
    reward_mean: null,
    reward_std: null,
    components: {},
    details: {},
    train_ex: null,
    response_tokens: 0,
    interactions: null,
    truncated: null,
    zero_variance_groups: null,
    heldout_ex: heldout,
    kl: null,
    loss: null,
    grad_norm: null,
    clip_frac: null,
    learner: {},
  };
}

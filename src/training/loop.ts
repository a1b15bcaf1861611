/**
 * The training loop of `reex train sft|grpo`: per step, collect experience (GRPO: G rollouts per
 * question through the server's agent code, rewards, advantages; SFT: tokenised traces with the
 * injected feedback text masked out), all in one model profile's protocol (the config's `profile`,
 * or the one detected from the model), write it to `<run>/experience/`, run one step of the Python
 * learner, and hot-reload the new weights into the rollout policy. Checkpoints every K steps (and
 * after the last), `--resume` from the latest one, held-out evaluation through src/eval's
 * `runEval`, metrics as JSONL and an HTML report.
 *
 * Run folder: run.json, metrics.jsonl, report.html, experience/step-N.jsonl, learner/step-N.json
 * (+ .log), models/step-N.gguf (current weights only), checkpoints/step-N.{gguf,json,optim},
 * optimizer.pt (AdamW state carried between learner processes), eval/step-N.json, indexes/.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { appendFile, copyFile, link, mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { familyFor, reexProfile, resolveProfile, type ModelProfile, type PromptFamily } from "../agent/index.js";
import { createDecoder, createPromptBuilder } from "../decoding/index.js";
import { ReexError, issuesFrom, toReexError } from "../errors/index.js";
import { createProgressBar, loadDataset, runEval, type EvalItem, type ProgressBar, type ProgressStream } from "../eval/index.js";
import { packageRoot } from "../paths/index.js";
import { createLlamaPolicy } from "../policy/index.js";
import type { ChatMessage, Policy } from "../policy/index.js";
import { ExecutorPool, type ExecResult, type Executor } from "../sql/index.js";
import { fnv1a32, seededRandom, shuffleInPlace } from "../util/index.js";
import type { TrainConfig, TrainMode } from "./config.js";
import { experiencePath, stepLabel, writeExperience, type ExperienceRecord } from "./experience.js";
import { assignAdvantages, isInformative, runGroup, toExperienceRecord, type RolloutGroup, type TrainingQuestion } from "./groups.js";
import { readMetrics, writeTrainingReport, type MetricsRow, type ReportInfo } from "./report.js";
import { CORRECTNESS_FIRST_PRESETS, GoldCache, resolveRewardSpec } from "./rewards.js";

/** The command that installs the learner's Python dependencies. */
export const LEARNER_INSTALL_HINT = "bash scripts/install-learner-deps.sh";

/** The learner's PYTHONPATH entry: `<package root>/src/training/learner`. */
export function learnerDir(root = packageRoot()): string {
  return join(root, "src", "training", "learner");
}

/** The environment a `python3 -m reex_learner …` child runs in: the learner folder first on PYTHONPATH, output unbuffered. */
export function learnerEnv(dir = learnerDir()): NodeJS.ProcessEnv {
  return { ...process.env, PYTHONPATH: [dir, process.env.PYTHONPATH].filter(Boolean).join(":"), PYTHONUNBUFFERED: "1" };
}

// ---------------------------------------------------------------------------------------------
// The learner bridge
// ---------------------------------------------------------------------------------------------

/** One learner step as the loop asks for it. */
export interface LearnerRequest {
  mode: TrainMode;
  step: number;
  /** Current weights. */
  model: string;
  experience: string;
  /** Where the new weights go. */
  out: string;
  /** Frozen reference for the KL term; absent when β is 0. */
  ref?: string;
  /** The learner's metrics JSON. */
  metricsFile: string;
  /** The learner's stderr. */
  logFile: string;
  /** AdamW state file carried across steps. */
  optimizerState: string;
  /** float32 master weights carried across steps (`model` is their export); absent to reload the GGUF's weights. */
  master?: string;
  config: TrainConfig;
}

/** Runs one learner step and returns its metrics (kl, loss, grad_norm, clip_frac, …). */
export type LearnerStep = (request: LearnerRequest, signal?: AbortSignal) => Promise<Record<string, unknown>>;

/** The arguments of `python -m reex_learner step` for a request. */
export function learnerArgs(req: LearnerRequest): string[] {
  const c = req.config;
  const args = [
    "-m",
    "reex_learner",
    "step",
    "--model",
    req.model,
    "--experience",
    req.experience,
    "--out",
    req.out,
    "--mode",
    req.mode,
    "--lr",
    String(c.learningRate),
    "--clip",
    String(c.clip),
    "--kl-beta",
    String(req.mode === "grpo" && req.ref ? c.klBeta : 0),
    "--temperature",
    String(req.mode === "grpo" ? c.temperature : 1),
    "--advantage",
    "file",
    "--metrics",
    req.metricsFile,
    "--optimizer-state",
    req.optimizerState,
    "--device",
    c.learner.device,
    "--dtype",
    c.learner.dtype,
    "--micro-batch",
    String(c.learner.microBatch),
    "--epochs",
    String(c.learner.epochs),
    "--max-grad-norm",
    String(c.learner.maxGradNorm),
    "--loss-agg",
    c.learner.lossAgg,
    "--mini-batch",
    String(c.learner.miniBatch),
    "--warmup-steps",
    String(c.learner.warmupSteps),
    "--max-old-logprob-diff",
    String(req.mode === "grpo" ? c.learner.maxOldLogprobDiff : 0),
    "--split-half",
    String(req.mode === "grpo" ? c.learner.splitHalf : 0),
    "--seed",
    String(c.seed + req.step),
  ];
  if (req.master) args.push("--master", req.master);
  if (req.ref) args.push("--ref", req.ref);
  if (c.maskTruncated) args.push("--mask-truncated");
  if (c.learner.sharePrefix) args.push("--share-prefix");
  args.push(...c.learner.extraArgs);
  return args;
}

function tail(text: string, n = 2000): string {
  return text.length > n ? `…${text.slice(-n)}` : text;
}

/**
 * The default {@link LearnerStep}: spawns `<python> -m reex_learner step …` with PYTHONPATH set to
 * the package's learner folder. A missing learner, interpreter or torch is LEARNER_FAILED with the
 * install hint; any other failure is LEARNER_FAILED with the end of the learner's stderr.
 */
export function createLearnerStep(options: { root?: string } = {}): LearnerStep {
  const dir = learnerDir(options.root);
  return async (req, signal) => {
    if (!existsSync(join(dir, "reex_learner", "__init__.py"))) {
      throw new ReexError(
        "LEARNER_FAILED",
        `the Python learner is not installed at ${dir} (package reex_learner missing); install it and its dependencies with \`${LEARNER_INSTALL_HINT}\``,
      );
    }
    const python = req.config.learner.python;
    const env = learnerEnv(dir);
    const args = learnerArgs(req);
    const { code, stdout, stderr, timedOut, spawnError } = await new Promise<{
      code: number | null;
      stdout: string;
      stderr: string;
      timedOut: boolean;
      spawnError?: Error;
    }>((done) => {
      const child = spawn(python, args, { env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      let timedOut = false;
      child.stdout.on("data", (b: Buffer) => (out += b.toString()));
      child.stderr.on("data", (b: Buffer) => (err += b.toString()));
      const kill = (): void => {
        child.kill("SIGKILL");
      };
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, req.config.learner.timeoutMs);
      signal?.addEventListener("abort", kill, { once: true });
      child.on("error", (e) => {
        clearTimeout(timer);
        done({ code: null, stdout: out, stderr: err, timedOut, spawnError: e });
      });
      child.on("close", (c) => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", kill);
        done({ code: c, stdout: out, stderr: err, timedOut });
      });
    });
    await writeFile(req.logFile, `$ ${python} ${args.join(" ")}\n${stderr}`).catch(() => undefined);
    if (spawnError) {
      throw new ReexError(
        "LEARNER_FAILED",
        `cannot run the learner's Python interpreter ${python}: ${spawnError.message}; install Python 3 and the learner's dependencies with \`${LEARNER_INSTALL_HINT}\``,
        { cause: spawnError },
      );
    }
    if (signal?.aborted) throw new ReexError("CANCELLED", "training cancelled during the learner step");
    if (timedOut)
      throw new ReexError("LEARNER_FAILED", `the learner step ${req.step} ran past ${req.config.learner.timeoutMs} ms and was stopped (log: ${req.logFile})`);
    if (code !== 0) {
      const missing = /No module named '?([\w.]+)'?/.exec(stderr);
      if (missing) {
        throw new ReexError(
          "LEARNER_FAILED",
          `the learner needs the Python module "${missing[1]}", which ${python} cannot import; install the learner's dependencies with \`${LEARNER_INSTALL_HINT}\``,
          { details: { stderr: tail(stderr) } },
        );
      }
      throw new ReexError("LEARNER_FAILED", `the learner step ${req.step} exited with code ${code} (log: ${req.logFile}): ${tail(stderr.trim(), 1500)}`, {
        details: { stderr: tail(stderr) },
      });
    }
    try {
      return JSON.parse(await readFile(req.metricsFile, "utf8")) as Record<string, unknown>;
    } catch {
      const last = stdout.trim().split("\n").pop() ?? "";
      try {
        return JSON.parse(last) as Record<string, unknown>;
      } catch {
        return {};
      }
    }
  };
}

// ---------------------------------------------------------------------------------------------
// SFT traces
// ---------------------------------------------------------------------------------------------

/** One SFT trace: a prompt (chat messages, or already-rendered text) and the model's response with `<result>` blocks. */
export interface SftTrace {
  messages?: ChatMessage[];
  prompt?: string;
  response: string;
  question_id?: string | number;
}

const traceSchema = z
  .object({
    messages: z
      .array(z.object({ role: z.enum(["system", "user", "assistant"]), content: z.string() }).strict())
      .min(1)
      .optional(),
    prompt: z.string().min(1).optional(),
    response: z.string().min(1),
    question_id: z.union([z.string(), z.number()]).optional(),
  })
  .strict()
  .refine((t) => (t.messages === undefined) !== (t.prompt === undefined), { message: "give exactly one of `messages` or `prompt`" });

/**
 * Parses traces: JSONL (blank lines ignored) or one JSON array; DATASET_INVALID naming the line (or
 * array index) of the first problem.
 */
export function parseTraces(text: string, source = "traces"): SftTrace[] {
  const out: SftTrace[] = [];
  const check = (value: unknown, where: string, at: number): void => {
    const parsed = traceSchema.safeParse(value);
    if (!parsed.success) {
      const issues = issuesFrom(parsed.error.issues).map((x) => ({ ...x, path: [at, ...x.path] }));
      throw new ReexError(
        "DATASET_INVALID",
        `${source}${where}: ${issues[0] ? `${issues[0].path.slice(1).join(".") || "(trace)"}: ${issues[0].message}` : "invalid trace"}`,
        { issues },
      );
    }
    out.push(parsed.data as SftTrace);
  };
  if (text.trimStart().startsWith("[")) {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (err) {
      throw new ReexError("DATASET_INVALID", `${source}: not JSON: ${(err as Error).message}`);
    }
    (data as unknown[]).forEach((value, i) => check(value, `[${i}]`, i));
  } else {
    text.split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch (err) {
        throw new ReexError("DATASET_INVALID", `${source}:${i + 1}: not JSON: ${(err as Error).message}`);
      }
      check(value, `:${i + 1}`, i + 1);
    });
  }
  if (out.length === 0) throw new ReexError("DATASET_INVALID", `${source}: no traces`);
  return out;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Splits a response into the model's own text (mask 1) and the profile's injected feedback blocks
 * (`<result>…</result>` for reex, `<observation>…</observation>` for skyrl-sql) with their trailing
 * newline (mask 0). A profile without feedback (single-turn) masks nothing. Default profile `reex`.
 */
export function splitInjected(response: string, profile: ModelProfile = reexProfile): { text: string; sampled: 0 | 1 }[] {
  const out: { text: string; sampled: 0 | 1 }[] = [];
  if (!profile.feedback) return response ? [{ text: response, sampled: 1 }] : [];
  const re = new RegExp(`${escapeRegExp(profile.feedback.open)}[\\s\\S]*?${escapeRegExp(profile.feedback.close)}\\n?`, "gi");
  let pos = 0;
  for (const m of response.matchAll(re)) {
    if (m.index > pos) out.push({ text: response.slice(pos, m.index), sampled: 1 });
    out.push({ text: m[0], sampled: 0 });
    pos = m.index + m[0].length;
  }
  if (pos < response.length) out.push({ text: response.slice(pos), sampled: 1 });
  return out;
}

/**
 * The experience record of one SFT trace: prompt tokens exactly as a rollout would start from them,
 * response pieces tokenised in order (loss only on the model's own segments, the profile's feedback
 * blocks masked), then `endOfTurn`. Default profile `reex`.
 */
export async function sftRecord(
  policy: Policy,
  trace: SftTrace,
  endOfTurn: string,
  questionId: string | number,
  profile: ModelProfile = reexProfile,
): Promise<ExperienceRecord> {
  const spec = trace.messages ? policy.renderChat(trace.messages) : { prefix: "", suffix: trace.prompt! };
  const trajectory = await policy.start(spec);
  let promptTokens: number[];
  try {
    promptTokens = trajectory.promptTokens.slice();
  } finally {
    await trajectory.release();
  }
  const tokens: number[] = [];
  const mask: (0 | 1)[] = [];
  const pieces = splitInjected(trace.response, profile);
  for (const piece of [...pieces, ...(endOfTurn ? [{ text: endOfTurn, sampled: 1 as const }] : [])]) {
    for (const t of policy.tokenize(piece.text)) {
      tokens.push(t);
      mask.push(piece.sampled);
    }
  }
  return {
    prompt_tokens: promptTokens,
    tokens,
    mask,
    old_logprobs: null,
    advantage: 0,
    reward: 0,
    components: {},
    truncated: false,
    interactions: pieces.filter((p) => p.sampled === 0).length,
    question_id: trace.question_id ?? questionId,
  };
}

// ---------------------------------------------------------------------------------------------
// Checkpoints and schedule
// ---------------------------------------------------------------------------------------------

/** A saved checkpoint of a run. */
export interface Checkpoint {
  step: number;
  model: string;
  /** The learner's optimizer state at that step, when there was one. */
  optimizer?: string;
  /** The float32 master weights at that step, when the run keeps them. */
  master?: string;
}

/** The checkpoints in `<runDir>/checkpoints` whose GGUF is present, lowest step first. */
export function listCheckpoints(runDir: string): Checkpoint[] {
  const dir = join(runDir, "checkpoints");
  if (!existsSync(dir)) return [];
  const found: Checkpoint[] = [];
  for (const name of readdirSync(dir)) {
    const m = /^step-(\d+)\.json$/.exec(name);
    if (!m) continue;
    const step = Number(m[1]);
    const model = join(dir, `step-${stepLabel(step)}.gguf`);
    if (!existsSync(model)) continue;
    const optimizer = join(dir, `step-${stepLabel(step)}.optim`);
    const master = join(dir, `step-${stepLabel(step)}.master`);
    found.push({ step, model, ...(existsSync(optimizer) ? { optimizer } : {}), ...(existsSync(master) ? { master } : {}) });
  }
  return found.sort((a, b) => a.step - b.step);
}

/** The checkpoint with the highest step in `<runDir>/checkpoints` (its GGUF present), or null. */
export function latestCheckpoint(runDir: string): Checkpoint | null {
  return listCheckpoints(runDir).at(-1) ?? null;
}

/** `0..n-1` in a seeded order. */
function permutation(n: number, seed: string): number[] {
  return shuffleInPlace(
    Array.from({ length: n }, (_, i) => i),
    seededRandom(fnv1a32(seed) || 1).uniform,
  );
}

/**
 * Indices of the items a step trains on: a seeded shuffle per pass over the data, walked in order,
 * so the schedule depends only on (seed, step) and a resumed run sees the same questions.
 */
export function scheduleFor(step: number, perStep: number, count: number, seed: number): number[] {
  const out: number[] = [];
  const cache = new Map<number, number[]>();
  for (let j = 0; j < perStep; j++) {
    const p = (step - 1) * perStep + j;
    const epoch = Math.floor(p / count);
    let perm = cache.get(epoch);
    if (!perm) {
      perm = permutation(count, `${seed}:${epoch}`);
      cache.set(epoch, perm);
    }
    out.push(perm[p % count]!);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The loop
// ---------------------------------------------------------------------------------------------

/** How {@link runTraining} runs; everything but `mode` has a working default. */
export interface TrainOptions {
  mode: TrainMode;
  /** Continue from the latest checkpoint of `runDir`. Default false (an existing run is refused). */
  resume?: boolean;
  /** Loads the rollout policy. Default `createLlamaPolicy` with the config's `policy` section. */
  createPolicy?: (model: string, config: TrainConfig) => Promise<Policy>;
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
  /** The final weights. */
  model: string;
  checkpoints: number[];
  metrics: MetricsRow[];
  report: string;
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

async function linkOrCopy(from: string, to: string): Promise<void> {
  await rm(to, { force: true });
  try {
    await link(from, to);
  } catch {
    await copyFile(from, to);
  }
}

async function defaultPolicy(model: string, config: TrainConfig): Promise<Policy> {
  return createLlamaPolicy({
    model,
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
  for (const sub of ["experience", "learner", "models", "checkpoints", "eval"]) await mkdir(join(runDir, sub), { recursive: true });

  const checkpoint = options.resume ? latestCheckpoint(runDir) : null;
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
function reportInfoOf(config: TrainConfig, mode: TrainMode, spec: ReturnType<typeof resolveRewardSpec>, rule: string): ReportInfo {
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
      klBeta: config.klBeta,
    },
  };
}

/** A run's data: GRPO questions (gold SQL checked) or SFT traces, and the held-out set. */
interface TrainingData {
  questions: TrainingQuestion[];
  traces: SftTrace[];
  heldout: { items: EvalItem[]; layout: "bird" | "spider" } | undefined;
}

/** Loads the run's data before the model, so a bad file fails first. */
async function loadTrainingData(config: TrainConfig, mode: TrainMode, executor: Executor, goldCache: GoldCache): Promise<TrainingData> {
  let questions: TrainingQuestion[] = [];
  let traces: SftTrace[] = [];
  if (mode === "grpo") {
    const data = config.data!;
    const ds = loadDataset(data.dataset, { dbRoot: data.dbRoot, layout: data.layout });
    const items = ds.items.slice(data.offset, data.limit ? data.offset + data.limit : undefined);
    questions = items.map((it) => ({
      questionId: it.questionId,
      dbPath: it.dbPath,
      question: it.question,
      ...(it.evidence ? { evidence: it.evidence } : {}),
      goldSql: it.goldSql,
    }));
    if (questions.length === 0) throw new ReexError("DATASET_INVALID", `${data.dataset}: no training questions`);
    await checkGold(questions, executor, goldCache, config.reward.timeoutMs, data.dataset);
  } else {
    const file = config.sft!.traces;
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      throw new ReexError("BAD_REQUEST", `cannot read traces file ${file}: ${(err as Error).message}`);
    }
    traces = parseTraces(text, file);
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

/** One step's experience and the metrics it contributes. */
interface StepExperience {
  records: ExperienceRecord[];
  stats: Partial<MetricsRow>;
}

/**
 * A GRPO step's experience: a group of rollouts per scheduled question (dynamic sampling draws
 * more and keeps the informative groups), advantages assigned (shuffled for the signal check).
 */
async function grpoExperience(
  step: number,
  config: TrainConfig,
  questions: readonly TrainingQuestion[],
  sampleGroup: GroupSampler,
  rule: "correctness-first" | "as-is",
  endOfTurn: number[],
  tick: () => void,
): Promise<StepExperience> {
  const perStep = config.questionsPerStep;
  const kept: RolloutGroup[] = [];
  const sampled: RolloutGroup[] = [];
  const ds = config.dynamicSampling;
  const budget = ds ? perStep + Math.floor(perStep * ds.maxExtra) : perStep;
  const order = scheduleFor(step, budget, questions.length, config.seed);
  for (const [j, qi] of order.entries()) {
    if (kept.length >= perStep) break;
    const group = await sampleGroup(questions[qi]!, config.groupSize, fnv1a32(`${config.seed}:${step}:${j}`) & 0x3fffffff);
    sampled.push(group);
    if (!ds || isInformative(group, ds.on)) kept.push(group);
    if (j < perStep) tick();
  }
  const groups = kept.length > 0 ? kept : sampled.slice(0, perStep);
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
    train_ex: mean(all.map((r) => (r.reward.correct ? 1 : 0))),
    response_tokens: mean(records.map((r) => r.mask.reduce<number>((a, b) => a + b, 0))) ?? 0,
    interactions: mean(all.map((r) => r.rollout.interactions)),
    truncated: mean(all.map((r) => (r.rollout.truncated ? 1 : 0))),
    zero_variance_groups: zeroVarianceGroups,
    groups: groups.length,
    sampled_groups: sampled.length,
    informative_share: diagnostics.informativeShare,
    contrast_share: diagnostics.contrastShare,
    correctness_share: diagnostics.correctnessShare,
  };
  return { records, stats };
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
    records.push(await sftRecord(policy, traces[ti]!, config.sft!.endOfTurn, ti, profile));
    tick();
  }
  return { records, stats: { rollouts: records.length, response_tokens: mean(records.map((r) => r.mask.reduce<number>((a, b) => a + b, 0))) ?? 0 } };
}

/** Runs the learner on a step's experience file and returns its metrics; the new weights are at `out`. */
async function learnStep(
  learner: LearnerStep,
  config: TrainConfig,
  mode: TrainMode,
  step: number,
  model: string,
  experience: string,
  out: string,
  folder: RunFolder,
  signal: AbortSignal | undefined,
): Promise<Record<string, unknown>> {
  const runDir = config.runDir;
  const learned = await learner(
    {
      mode,
      step,
      model,
      experience,
      out,
      ...(mode === "grpo" && config.klBeta > 0 ? { ref: config.model } : {}),
      metricsFile: join(runDir, "learner", `step-${stepLabel(step)}.json`),
      logFile: join(runDir, "learner", `step-${stepLabel(step)}.log`),
      optimizerState: folder.optimizerState,
      ...(config.learner.masterWeights ? { master: folder.masterFile } : {}),
      config,
    },
    signal,
  );
  if (!existsSync(out)) throw new ReexError("LEARNER_FAILED", `the learner step ${step} reported success but wrote no model at ${out}`);
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
type GroupSampler = (q: TrainingQuestion, groupSize: number, seed: number) => Promise<RolloutGroup>;

/** The rollout-group settings the training config fixes for every group of the run. */
function groupSettings(config: TrainConfig, family: PromptFamily, reward: ReturnType<typeof resolveRewardSpec>, signal: AbortSignal | undefined) {
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
      decoder ??= createDecoder({
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
          // the policy's own answers, as the runs recorded before serving retried failing finals and constrained the starter
          finalRetries: 0,
          constrained: "off",
        },
      });
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
  /** The current weights: the start model, then the latest step's. */
  model: string;
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
  const out = join(runDir, "models", `step-${stepLabel(step)}.gguf`);
  const learned = await learnStep(run.learner, config, mode, step, run.model, experience, out, folder, run.signal);
  if (!policy.reload) throw new ReexError("BAD_REQUEST", `the ${policy.info.backend} policy cannot reload weights, so it cannot be trained in-process`);
  await policy.reload({ model: out });
  const previous = run.model;
  run.model = out;
  if (previous.startsWith(join(runDir, "models"))) await rm(previous, { force: true });

  if (step % config.checkpointEvery === 0 || step === config.steps) {
    await saveCheckpoint(runDir, step, run.model, folder.optimizerState, folder.masterFile);
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
  if (start >= config.steps) {
    log(`reex train: the run is already at step ${start} of ${config.steps}; nothing to do`);
    return {
      runDir,
      mode,
      resumedFrom: start,
      lastStep: start,
      model: checkpoint?.model ?? config.model,
      checkpoints: [],
      metrics: readMetrics(metricsFile),
      report: reportFile,
    };
  }

  const ownExecutor = !options.executor;
  const executor =
    options.executor ?? new ExecutorPool({ workers: config.executor.workers, timeoutMs: config.executor.timeoutMs, maxRows: config.executor.maxRows });
  const learner = options.learner ?? createLearnerStep();
  const spec = resolveRewardSpec({ ...config.reward, ...(config.reward.weights ? { weights: config.reward.weights } : {}) });
  const rule = config.reward.rule === "auto" ? (CORRECTNESS_FIRST_PRESETS.includes(spec.preset) ? "correctness-first" : "as-is") : config.reward.rule;
  const goldCache = new GoldCache();
  const rewardEnv = { executor, goldCache, timeoutMs: config.reward.timeoutMs };
  const indexDir = join(runDir, "indexes");
  const prompts = createPromptBuilder({ indexDir });
  let policy: Policy | undefined;
  let evaluator: HeldoutEvaluator | undefined;
  const model = checkpoint?.model ?? config.model;
  const reportInfo = reportInfoOf(config, mode, spec, rule);
  const checkpoints: number[] = [];

  try {
    const data = await loadTrainingData(config, mode, executor, goldCache);
    const { traces, heldout } = data;
    let questions = data.questions;
    policy = await (options.createPolicy ?? defaultPolicy)(model, config);
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
    const endOfTurn = mode === "grpo" && config.endOfTurn ? current.tokenize(config.endOfTurn) : [];
    const sampleGroup: GroupSampler = (q, groupSize, seed) =>
      runGroup(q, {
        ...groupSettings(config, family, spec, signal),
        policy: current,
        executor,
        promptFor: prompts.promptFor,
        profile,
        groupSize,
        seed,
        rewardEnv,
      });
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
        ? grpoExperience(step, config, questions, sampleGroup, rule, endOfTurn, tick)
        : sftExperience(scheduleFor(step, perStep, traces.length, config.seed), current, traces, config, profile, tick);
    const bar =
      options.progress === null
        ? undefined
        : createProgressBar({ total: (config.steps - start) * perStep, label: `train ${mode}`, ...(options.progress ? { stream: options.progress } : {}) });
    const run: StepRun = { config, mode, folder, learner, policy: current, collect, evaluate, appendRow, bar, log, signal, model, done: 0, checkpoints };
    try {
      for (let step = start + 1; step <= config.steps; step++) await runStep(run, step);
    } finally {
      bar?.finish();
    }
    if (!existsSync(reportFile)) await writeTrainingReport(reportFile, readMetrics(metricsFile), reportInfo);
    return { runDir, mode, resumedFrom: start, lastStep: config.steps, model: run.model, checkpoints, metrics: readMetrics(metricsFile), report: reportFile };
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

async function saveCheckpoint(runDir: string, step: number, model: string, optimizerState: string, masterFile: string): Promise<void> {
  const base = join(runDir, "checkpoints", `step-${stepLabel(step)}`);
  await linkOrCopy(model, `${base}.gguf`);
  if (existsSync(masterFile)) await copyFile(masterFile, `${base}.master`);
  else await rm(`${base}.master`, { force: true });
  const hasOptimizer = existsSync(optimizerState);
  if (hasOptimizer) await copyFile(optimizerState, `${base}.optim`);
  else await rm(`${base}.optim`, { force: true });
  await writeFile(
    `${base}.json`,
    `${JSON.stringify({ step, model: `${base}.gguf`, optimizer: hasOptimizer ? `${base}.optim` : null, time: new Date().toISOString() }, null, 2)}\n`,
  );
}

/** The curriculum's screening record, `<runDir>/curriculum.json`. */
interface CurriculumFile {
  samples: number;
  minPass: number;
  maxPass: number;
  /** Pass rate of every screened question, by question id. */
  passRates: Record<string, number>;
  kept: (string | number)[];
}

/**
 * Keeps the questions whose pass rate over `samples` rollouts of the start policy lies in [minPass, maxPass]
 * (written to `file`; a resumed run reads it back instead of screening again). DATASET_INVALID when none is kept.
 */
async function screenQuestions(
  questions: TrainingQuestion[],
  c: { samples: number; minPass: number; maxPass: number },
  file: string,
  sample: (q: TrainingQuestion, groupSize: number, seed: number) => Promise<RolloutGroup>,
  seed: number,
  log: (line: string) => void,
): Promise<TrainingQuestion[]> {
  let saved: CurriculumFile | undefined;
  if (existsSync(file)) saved = JSON.parse(readFileSync(file, "utf8")) as CurriculumFile;
  if (!saved || saved.samples !== c.samples || saved.minPass !== c.minPass || saved.maxPass !== c.maxPass) {
    const passRates: Record<string, number> = {};
    for (const [i, q] of questions.entries()) {
      const g = await sample(q, c.samples, fnv1a32(`curriculum:${seed}:${i}`) & 0x3fffffff);
      passRates[String(q.questionId)] = g.rollouts.filter((r) => r.reward.correct).length / g.rollouts.length;
    }
    const kept = questions
      .filter((q) => passRates[String(q.questionId)]! >= c.minPass && passRates[String(q.questionId)]! <= c.maxPass)
      .map((q) => q.questionId);
    saved = { ...c, passRates, kept };
    await writeFile(file, `${JSON.stringify(saved, null, 2)}\n`);
  }
  const keep = new Set(saved.kept.map(String));
  const out = questions.filter((q) => keep.has(String(q.questionId)));
  log(`reex train: curriculum kept ${out.length} of ${questions.length} questions (pass rate ${c.minPass}–${c.maxPass} over ${c.samples} samples)`);
  if (out.length === 0)
    throw new ReexError(
      "DATASET_INVALID",
      `the curriculum kept no question: none has a pass rate in [${c.minPass}, ${c.maxPass}] over ${c.samples} samples of the start policy (${file})`,
    );
  return out;
}

async function checkGold(questions: readonly TrainingQuestion[], executor: Executor, cache: GoldCache, timeoutMs: number, source: string): Promise<void> {
  const bad: { id: string | number; message: string }[] = [];
  for (const q of questions) {
    const r = await cache.get(executor, q.dbPath, q.goldSql, { timeoutMs, maxRows: 100_000 });
    if (!r.ok) {
      if (r.error.code === "EXECUTOR_UNAVAILABLE") throw new ReexError("EXECUTOR_UNAVAILABLE", r.error.message);
      bad.push({ id: q.questionId, message: `${r.error.code}: ${r.error.message}` });
    }
  }
  if (bad.length > 0) {
    throw new ReexError(
      "DATASET_INVALID",
      `${source}: the gold SQL of ${bad.length} question(s) does not run, so no reward could be computed for them; first: question ${bad[0]!.id}: ${bad[0]!.message}`,
      {
        issues: bad.slice(0, 20).map((b) => ({ path: [String(b.id), "SQL"], message: b.message })),
      },
    );
  }
}

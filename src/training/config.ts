/**
 * The configuration of `reex train sft|grpo --config FILE`: one zod schema with every default
 * (unknown keys rejected), read from a JSON file whose relative paths resolve against the file's
 * own folder. Documented field by field in docs/training.md; examples in examples/training/.
 */
import { readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { z } from "zod";
import { FEEDBACK_MODES, PROFILE_IDS, PROMPT_FAMILIES, familyFor, getProfile } from "../agent/index.js";
import { DEFAULT_DECODER_DEFAULTS, STRATEGIES } from "../decoding/index.js";
import { ReexError, issuesFrom, toReexError } from "../errors/index.js";
import { ADVANTAGE_SCALINGS } from "./advantages.js";
import { EX_RULES } from "../eval/index.js";
import { REWARD_PRESETS, REWARD_TEMPLATES, resolveRewardSpec } from "./rewards.js";

/** The two training modes: supervised fine-tuning on traces, or GRPO on questions. */
export type TrainMode = "sft" | "grpo";

const layout = z.enum(["auto", "bird", "spider"]);

const dataSchema = z
  .object({
    /** BIRD or Spider JSON file of training questions. */
    dataset: z.string().min(1),
    /** Folder of `<db_id>/<db_id>.sqlite` (or `<db_id>.sqlite`). */
    dbRoot: z.string().min(1),
    /** Default "auto". */
    layout: layout.default("auto"),
    /** Skip the first N questions of the file. Default 0. */
    offset: z.number().int().min(0).default(0),
    /** Use only N questions (after `offset`); default all. */
    limit: z.number().int().positive().optional(),
  })
  .strict();

const evalSchema = z
  .object({
    /** BIRD or Spider JSON file of held-out questions. */
    dataset: z.string().min(1),
    dbRoot: z.string().min(1),
    /** Default "auto". */
    layout: layout.default("auto"),
    /** Evaluate every K steps (and after the last). Default 10. */
    every: z.number().int().positive().default(10),
    /** Evaluate the initial model before step 1 too. Default true. */
    atStart: z.boolean().default(true),
    /** Skip the first N questions of the file. Default 0. */
    offset: z.number().int().min(0).default(0),
    /** Only N held-out questions (after `offset`); default all. */
    limit: z.number().int().positive().optional(),
    /** Default "greedy". */
    strategy: z.enum(STRATEGIES).default("greedy"),
    /** Candidates for linear/tree strategies; default the decoder's. */
    candidates: z.number().int().positive().optional(),
  })
  .strict();

const sftSchema = z
  .object({
    /** Traces, JSONL (or a JSON array) of {"messages": [...] | "prompt": "...", "response": "...", "question_id"?}. */
    traces: z.string().min(1),
    /** Appended to every response (mask 1) so the model learns to end its turn; "auto" is the model's own end-of-turn token (`<|im_end|>` where it has none). Default "auto". */
    endOfTurn: z.string().default("auto"),
  })
  .strict();

const replaySchema = z
  .object({
    /** Traces in `sft.traces`' format: answers to keep, such as the start model's own right ones (lab/grpo-heldout/grpo-rejection.ts writes them). */
    traces: z.string().min(1),
    /** Traces added to each step, walked in a seeded order. */
    perStep: z.number().int().positive(),
    /** The fixed advantage their tokens get, so they enter the GRPO loss as a supervised term. Default 1. */
    advantage: z.number().positive().default(1),
  })
  .strict();

const weightsSchema = z.object({ format: z.number(), em: z.number(), exec: z.number(), entity: z.number(), exploration: z.number() }).partial().strict();

const rewardSchema = z
  .object({
    /** A name from REWARD_PRESETS (case and punctuation ignored). Default "maxtune". */
    preset: z.string().default("maxtune"),
    /** ReEx presets: weights overriding the preset's. Default none. */
    weights: weightsSchema.optional(),
    /** The ReEx exploration term on or off (off: weight 0, still logged). Default true. */
    exploration: z.boolean().default(true),
    /** EX rule that decides "correct". Default "bird". */
    exRule: z.enum(EX_RULES).default("bird"),
    /** k of the SQL-R1 / CogniSQL length terms. Default 512. */
    lengthTokens: z.number().int().positive().default(512),
    /** Default "family". */
    template: z.enum(REWARD_TEMPLATES).default("family"),
    /** Time limit of final and gold SQL executions for the reward, ms. Default 30000. */
    timeoutMs: z.number().int().positive().default(30_000),
    /**
     * "correctness-first": inside a group, a right rollout always outranks a wrong one and shaping only orders
     * rollouts of equal correctness (reward = correct + shapingScale · shaping rank); "as-is": the preset's total;
     * "auto": correctness-first for `outcome` and `reex-explore`, as-is for the papers' presets. Default "auto".
     */
    rule: z.enum(["auto", "correctness-first", "as-is"]).default("auto"),
    /** Under correctness-first, the span shaping gets within a correctness class (< 1). Default 0.1. */
    shapingScale: z.number().min(0).lt(1).default(0.1),
  })
  .strict()
  .superRefine((r, ctx) => {
    try {
      resolveRewardSpec({ preset: r.preset, ...(r.weights ? { weights: r.weights } : {}) });
    } catch (err) {
      ctx.addIssue({ code: "custom", path: ["preset"], message: `${(err as Error).message} (presets: ${REWARD_PRESETS.join(", ")})` });
    }
  });

const policySchema = z
  .object({
    /** Default "auto". */
    gpu: z.enum(["auto", "cuda", "cpu"]).default("auto"),
    /** Context window per sequence, tokens. Default 4096. */
    contextSize: z.number().int().positive().default(4096),
    /** Sequences in the llama.cpp context. Default 16. */
    sequences: z.number().int().positive().default(16),
    /** CPU threads; default the policy's, cores − 1 (at least 1). */
    threads: z.number().int().positive().optional(),
  })
  .strict();

const loraSchema = z
  .object({
    /** Rank of a fresh adapter. Default 16. */
    rank: z.number().int().min(1).default(16),
    /** The adapter's scale is alpha / rank, as llama.cpp applies it. Default 2 × rank. */
    alpha: z.number().positive().optional(),
    /** Comma-separated llama.cpp matrices a fresh adapter trains (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down), or "all". Default "attn_q,attn_k,attn_v,attn_output". */
    targets: z.string().min(1).default("attn_q,attn_k,attn_v,attn_output"),
    /** A llama.cpp LoRA GGUF to start from (its rank, alpha and targets win), loaded on the base for the first rollouts. Default none (a fresh adapter that starts as the base). */
    in: z.string().min(1).optional(),
    /** Tensor type of the adapters written. Default "f32". */
    outType: z.enum(["f32", "f16"]).default("f32"),
  })
  .strict();

const learnerSchema = z
  .object({
    /** Python interpreter with torch installed. Default "/usr/bin/python3". */
    python: z.string().min(1).default("/usr/bin/python3"),
    /** "cpu", "cuda", "cuda:N" or "auto". Default "auto". */
    device: z.string().min(1).default("auto"),
    /** Default "f32". */
    dtype: z.enum(["f32", "bf16", "f16"]).default("f32"),
    /** Rollouts per forward/backward. Default 4. */
    microBatch: z.number().int().positive().default(4),
    /** Passes over each step's experience. Default 1. */
    epochs: z.number().int().positive().default(1),
    /** Gradient clipping norm (0 = off). Default 1.0. */
    maxGradNorm: z.number().min(0).default(1.0),
    /** Default "token-mean". */
    lossAgg: z.enum(["token-mean", "seq-mean-token-mean"]).default("token-mean"),
    /** A group's rollouts share one copy of their prompt in a packed row (same gradient, fewer tokens; token-mean only). Default true. */
    sharePrefix: z.boolean().default(true),
    /** AdamW weight decay (`--weight-decay`; DAPO's verl recipe uses 0.1). Default 0. */
    weightDecay: z.number().min(0).default(0),
    /** PyTorch CPU threads of the learner (0 = PyTorch's choice). Default 0. */
    threads: z.number().int().min(0).default(0),
    /** Recompute block activations in the backward pass (less memory, more time). Default false. */
    gradCheckpoint: z.boolean().default(false),
    /** The learner's attention kernel: "eager" (the reference maths) or "sdpa" (PyTorch 2's fused kernel). Default "eager". */
    attn: z.enum(["eager", "sdpa"]).default("eager"),
    /** Most tokens of a prefix-shared row (`sharePrefix`). Default 2048. */
    packTokens: z.number().int().positive().default(2048),
    /** Shuffle the experience between epochs (seeded). Default false. */
    shuffle: z.boolean().default(false),
    /** Tensor type of the GGUF a full-weight step writes ("keep": the input's, quantised matrices as f16). Default "keep". */
    outType: z.enum(["keep", "f32", "f16", "q8_0"]).default("keep"),
    /** Wall-clock limit of one learner step, ms. Default 3600000. */
    timeoutMs: z.number().int().positive().default(3_600_000),
    /** Rollouts per optimizer step: several clipped updates per batch (0 = the whole batch, one update). Default 0. */
    miniBatch: z.number().int().min(0).default(0),
    /** Linear lr warm-up over this many optimizer steps of the run (0 = off). Default 0. */
    warmupSteps: z.number().int().min(0).default(0),
    /** AdamW's second-moment decay (β1 is 0.9). Default 0.999. */
    adamBeta2: z.number().gt(0).lt(1).default(0.999),
    /** Weight decay on 1-D parameters (norms, biases) too; false: on matrices only. Default true. */
    decayNorms: z.boolean().default(true),
    /** The lr after warm-up: "constant", or decayed "linear"ly or by a "cosine" to `minLrRatio` × lr over the run's steps (step s of N starts at (s − 1) ÷ N). Default "constant". */
    schedule: z.enum(["constant", "linear", "cosine"]).default("constant"),
    /** Floor of the decayed lr, as a share of the lr. Default 1. */
    minLrRatio: z.number().min(0).max(1).default(1),
    /** Fail a step, before any update, when the learner's mean |logp − old_logp| over the first mini-batch exceeds this (0 = off). Default 0.05. */
    maxOldLogprobDiff: z.number().min(0).default(0.05),
    /** Random half-splits of the informative groups whose gradients are compared each step (0 = off). Default 0. */
    splitHalf: z.number().int().min(0).default(0),
    /** Keep float32 master weights in the run folder across steps (the GGUF is their export); ignored with `lora`. Default true. */
    masterWeights: z.boolean().default(true),
    /** Train a LoRA adapter on the frozen `model` (also the KL reference) instead of every weight. Default none (full-weight training). */
    lora: loraSchema.optional(),
  })
  .strict();

const dynamicSamplingSchema = z
  .object({
    /** "correctness": a group counts as informative only when some but not all of its rollouts are correct; "reward": when its rewards differ. Default "correctness". */
    on: z.enum(["correctness", "reward"]).default("correctness"),
    /** Extra groups sampled per step at most, to replace dropped ones, as a multiple of questionsPerStep. Default 2. */
    maxExtra: z.number().min(0).default(2),
    /**
     * Which sampled groups a step trains on: "informative" (those `on` counts) or "signal" (also every other group whose
     * rewards differ, such as an all-wrong group ranked by its shaping; the step still stops at `questionsPerStep`
     * informative ones, so no extra sampling). Default "informative".
     */
    train: z.enum(["informative", "signal"]).default("informative"),
  })
  .strict();

const curriculumSchema = z
  .object({
    /** Rollouts per question when screening. Default 8. */
    samples: z.number().int().min(2).default(8),
    /** Lowest pass rate kept. Default 0.2. */
    minPass: z.number().min(0).max(1).default(0.2),
    /** Highest pass rate kept. Default 0.8. */
    maxPass: z.number().min(0).max(1).default(0.8),
  })
  .strict()
  .refine((c) => c.minPass <= c.maxPass, { message: "minPass must not exceed maxPass", path: ["minPass"] });

const executorSchema = z
  .object({
    /** Executor worker processes. Default 2. */
    workers: z.number().int().positive().max(64).default(2),
    /** Per-probe time limit, ms. Default 5000. */
    timeoutMs: z.number().int().positive().default(5000),
    /** Rows fetched per probe. Default 1000. */
    maxRows: z.number().int().positive().default(1000),
  })
  .strict();

/** The training configuration schema (input: what a file may hold; output: with defaults). */
export const trainConfigSchema = z
  .object({
    /** Free text about the run, shown in the report. Default none. */
    description: z.string().optional(),
    /** The initial GGUF; also the frozen KL reference (with `learner.lora`, the frozen base the adapter is trained on). */
    model: z.string().min(1),
    /** Where checkpoints, experience, metrics and the report go. */
    runDir: z.string().min(1),
    /** GRPO's training questions (required for grpo). */
    data: dataSchema.optional(),
    /** SFT's traces (required for sft). */
    sft: sftSchema.optional(),
    /**
     * GRPO: a supervised anchor beside the GRPO loss (InstructGPT's PPO-ptx): each step also trains on `perStep` of these
     * traces with a fixed advantage, so answers no group contrasts stay in place. The shuffled arm keeps them unshuffled. Default none.
     */
    replay: replaySchema.optional(),
    /** Held-out evaluation; default none. */
    eval: evalSchema.optional(),
    /** Learner steps. Default 50. */
    steps: z.number().int().positive().default(50),
    /** Questions (GRPO) or traces (SFT) per step. Default 8. */
    questionsPerStep: z.number().int().positive().default(8),
    /** Rollouts per question, G. Default 8. */
    groupSize: z.number().int().min(2).default(8),
    /** Rollout sampling temperature. Default 1.0. */
    temperature: z.number().gt(0).max(2).default(1.0),
    /** Probe rounds per rollout, N. Default 10. */
    maxInteractions: z.number().int().min(0).max(50).default(DEFAULT_DECODER_DEFAULTS.maxInteractions),
    /** Tokens sampled per rollout. Default 1024. */
    maxTokens: z.number().int().positive().default(DEFAULT_DECODER_DEFAULTS.maxTokens),
    /**
     * The model profile rollouts are prompted, parsed, scored and masked in (`reex`, `skyrl-sql`,
     * `omnisql`, `think-answer`, `generic`), or "auto" to detect it from the model's metadata. Default "auto".
     */
    profile: z.enum(["auto", ...PROFILE_IDS]).default("auto"),
    /** Must be one the profile supports. Default the profile's first family ("execution-aware" for reex, skyrl-sql and generic). */
    promptFamily: z.enum(PROMPT_FAMILIES).optional(),
    /** Default "full". */
    feedback: z.enum(FEEDBACK_MODES).default(DEFAULT_DECODER_DEFAULTS.feedback),
    /** Rows shown per probe result. Default 3. */
    feedbackRows: z.number().int().min(0).max(50).default(DEFAULT_DECODER_DEFAULTS.feedbackRows),
    /** A probe's missing-column or missing-table error lists the real columns or tables. Default true. */
    schemaHints: z.boolean().default(DEFAULT_DECODER_DEFAULTS.schemaHints),
    /** Rollouts running at once. Default 8. */
    rolloutConcurrency: z.number().int().positive().default(8),
    /**
     * Sample rollouts, and decode the in-run held-out evaluation, under the grammars a constrained request is served with
     * (tags, schema names bound to their FROM lists, the question's literals), so the reward scores what users get; the
     * masked sampler's log-probs are not the policy's, so the learner scores the sampled tokens itself. Default false.
     */
    constrained: z.boolean().default(false),
    /** AdamW learning rate. Default 2e-6. */
    learningRate: z.number().positive().default(2e-6),
    /** PPO clip ε (the low side, and the high side unless `clipHigh`). Default 0.2. */
    clip: z.number().positive().max(1).default(0.2),
    /** The high side's clip ε, DAPO's clip-higher (0.28 beside a clip of 0.2), passed as the learner's `--clip-high`. Default none (= clip). */
    clipHigh: z.number().positive().max(1).optional(),
    /** KL weight β to the frozen initial model (0 = no reference). Default 0.001. */
    klBeta: z.number().min(0).default(0.001),
    /** Default "group". */
    advantage: z.enum(ADVANTAGE_SCALINGS as [string, ...string[]]).default("group"),
    /** A control arm: permute the step's advantages across its rollouts before the learner sees them (seeded). Default false. */
    shuffleAdvantages: z.boolean().default(false),
    /** Drop groups that carry no contrast and sample more questions in their place (DAPO's dynamic sampling); default off. */
    dynamicSampling: dynamicSamplingSchema.optional(),
    /** Train only on questions the start policy sometimes solves, screened once before step 1; default off (all questions). */
    curriculum: curriculumSchema.optional(),
    /** Appended (in the loss) to a rollout that ended with its final answer, as SFT trains it; "" for none, "auto" for the model's own end-of-turn token (`<|im_end|>` where it has none). Default "auto". */
    endOfTurn: z.string().default("auto"),
    /** Drop truncated rollouts from the loss (Think2SQL). Default false. */
    maskTruncated: z.boolean().default(false),
    reward: rewardSchema.default(() => rewardSchema.parse({})),
    /** Save a checkpoint every K steps (and after the last). Default 10. */
    checkpointEvery: z.number().int().positive().default(10),
    /** Seed of the question order and the rollout sampling. Default 0. */
    seed: z.number().int().min(0).default(0),
    policy: policySchema.default(() => policySchema.parse({})),
    learner: learnerSchema.default(() => learnerSchema.parse({})),
    executor: executorSchema.default(() => executorSchema.parse({})),
  })
  .strict();

/** A parsed training configuration (defaults filled, paths absolute). */
export type TrainConfig = Omit<z.infer<typeof trainConfigSchema>, "advantage"> & { advantage: (typeof ADVANTAGE_SCALINGS)[number] };
/** A training configuration as a file may give it. */
export type TrainConfigInput = z.input<typeof trainConfigSchema>;

function abs(base: string, p: string): string {
  return isAbsolute(p) ? p : resolve(base, p);
}

/**
 * Validates a configuration object for `mode`, resolving relative paths against `baseDir`;
 * CONFIG_INVALID with one issue per problem (grpo needs `data`, sft needs `sft`).
 */
export function parseTrainConfig(input: unknown, mode: TrainMode, baseDir = process.cwd()): TrainConfig {
  const parsed = trainConfigSchema.safeParse(input);
  if (!parsed.success) throw new ReexError("CONFIG_INVALID", "invalid training configuration", { issues: issuesFrom(parsed.error.issues) });
  const c = parsed.data;
  if (c.profile !== "auto" && c.promptFamily !== undefined) {
    try {
      familyFor(getProfile(c.profile), c.promptFamily);
    } catch (err) {
      throw new ReexError("CONFIG_INVALID", `invalid training configuration: ${toReexError(err).message}`, {
        issues: [{ path: ["promptFamily"], message: toReexError(err).message }],
      });
    }
  }
  if (mode === "grpo" && !c.data)
    throw new ReexError("CONFIG_INVALID", "grpo training needs `data` (dataset and dbRoot)", { issues: [{ path: ["data"], message: "required for grpo" }] });
  if (mode === "sft" && !c.sft)
    throw new ReexError("CONFIG_INVALID", "sft training needs `sft.traces`", { issues: [{ path: ["sft"], message: "required for sft" }] });
  return {
    ...c,
    advantage: c.advantage as TrainConfig["advantage"],
    model: abs(baseDir, c.model),
    runDir: abs(baseDir, c.runDir),
    ...(c.data ? { data: { ...c.data, dataset: abs(baseDir, c.data.dataset), dbRoot: abs(baseDir, c.data.dbRoot) } } : {}),
    ...(c.sft ? { sft: { ...c.sft, traces: abs(baseDir, c.sft.traces) } } : {}),
    ...(c.replay ? { replay: { ...c.replay, traces: abs(baseDir, c.replay.traces) } } : {}),
    ...(c.eval ? { eval: { ...c.eval, dataset: abs(baseDir, c.eval.dataset), dbRoot: abs(baseDir, c.eval.dbRoot) } } : {}),
    learner: {
      ...c.learner,
      python: c.learner.python.includes("/") ? abs(baseDir, c.learner.python) : c.learner.python,
      ...(c.learner.lora?.in ? { lora: { ...c.learner.lora, in: abs(baseDir, c.learner.lora.in) } } : {}),
    },
  };
}

/** Reads a JSON configuration file for `mode` (relative paths against its folder); a missing file is BAD_REQUEST. */
export function loadTrainConfig(file: string, mode: TrainMode, overrides: Partial<TrainConfigInput> = {}): TrainConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read training config ${file}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new ReexError("CONFIG_INVALID", `${file} is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new ReexError("CONFIG_INVALID", `${file}: expected a JSON object`);
  const merged = { ...(data as Record<string, unknown>) };
  for (const [k, v] of Object.entries(overrides)) if (v !== undefined) merged[k] = v;
  return parseTrainConfig(merged, mode, dirname(resolve(file)));
}

/**
 * The learner's request file: everything one `python3 -m reex_learner step --request FILE` needs, typed once here:
 * one GRPO/SFT step of the training loop, or with `run` a multi-step SFT run (the starter's, lab/starter/train.ts).
 * TypeScript fills every field (the defaults live in config.ts and the starter's options schema, nowhere else);
 * the Python learner validates the file against the JSON Schema emitted from this schema and committed as
 * src/training/learner/learner-request.schema.json (test/training/learner-request.test.ts keeps the two equal), and has
 * no defaults of its own.
 */
import { z } from "zod";

const path = z.string().min(1);

/** The optimisation: loss, batching, optimizer, guards (camelCase here, snake_case in Python's StepConfig, field for field). */
const trainSchema = z
  .object({
    /** AdamW learning rate. */
    lr: z.number().min(0),
    /** PPO clip ε (the low side, and the high side unless `clipHigh`). */
    clip: z.number().min(0),
    /** DAPO's clip-higher; null: the same as `clip`. */
    clipHigh: z.number().min(0).nullable(),
    /** Weight of the k3 KL to the reference (0: no KL term). */
    klBeta: z.number().min(0),
    /** Log-probs are of softmax(logits / temperature), as the rollouts sampled them. */
    temperature: z.number().gt(0),
    lossAgg: z.enum(["token-mean", "seq-mean-token-mean"]),
    epochs: z.number().int().min(1),
    /** Rollouts per forward/backward. */
    microBatch: z.number().int().min(1),
    /** Rollouts per optimizer step (0: all of them). */
    miniBatch: z.number().int().min(0),
    /** Gradient clipping norm (0: off). */
    maxGradNorm: z.number().min(0),
    weightDecay: z.number().min(0),
    /** Linear lr warm-up over this many optimizer steps, counted across steps through the optimizer state (0: off). */
    warmupSteps: z.number().int().min(0),
    /** Fail before any update when the first mini-batch's mean |logp − old_logp| exceeds this (0: off). */
    maxOldLogprobDiff: z.number().min(0),
    /** Random half-splits of the groups whose gradients are compared (0: off). */
    splitHalf: z.number().int().min(0),
    /** Truncated rollouts count no loss token. */
    maskTruncated: z.boolean(),
    /** Rollouts of one prompt share it in a packed row (token-mean, GGUF backend). */
    sharePrefix: z.boolean(),
    packTokens: z.number().int().min(1),
    /** Shuffle the rollouts between epochs. */
    shuffle: z.boolean(),
    seed: z.number().int().min(0),
    /** AdamW's second-moment decay (β1 is 0.9). */
    adamBeta2: z.number().gt(0).lt(1),
    /** Weight decay on 1-D parameters (norms, biases) too; false: on matrices only. */
    decayNorms: z.boolean(),
    /** The lr after warm-up: constant, or decayed linearly / by a cosine over a run's progress to `minLrRatio` × lr. */
    schedule: z.enum(["constant", "linear", "cosine"]),
    minLrRatio: z.number().min(0).max(1),
    /** How far the training run is before this step, in [0, 1] (`reex train`: (step − 1) ÷ steps): where `schedule` stands; a multi-step run counts its own. */
    progress: z.number().min(0).max(1),
  })
  .strict();

/**
 * A multi-step SFT run in one process (the starter's): optimizer steps over batches of packed records (`paths.experience`,
 * JSONL, .gz/.xz read through gzip/xz) until `steps` or `minutes` runs out, JSON progress lines on stdout.
 */
const runSchema = z
  .object({
    /** Optimizer steps (0: until `minutes`). */
    steps: z.number().int().min(0),
    /** Wall-clock budget (0: until `steps`); the lr decays over whichever runs out first. */
    minutes: z.number().min(0),
    /** Seconds of `minutes` kept for the final eval and the export. */
    reserveS: z.number().min(0),
    /** Rows × longest row per optimizer step (padding included). */
    batchTokens: z.number().int().min(1),
    /** Share of the questions held out for the eval loss. */
    evalFrac: z.number().min(0).max(1),
    /** Eval loss every this many steps (0: at the end only). */
    evalEvery: z.number().int().min(0),
    logEvery: z.number().int().min(1),
    /** A GGUF checkpoint every this many steps into `checkpointDir` (0: none). */
    saveEvery: z.number().int().min(0),
    checkpointDir: path.nullable(),
    /** Also append the progress lines here; null: stdout only. */
    log: path.nullable(),
    /** Family → records per epoch (1 once, 0.2 a fixed fifth of them, 2 twice). */
    familyWeights: z.record(z.string(), z.number().min(0)),
    /** db_id prefix → weight multiplying the family's (first matching prefix wins). */
    dbWeights: z.record(z.string(), z.number().min(0)),
    /** Draw fresh weights with this std (the starter's scheme, seeded by `train.seed`) instead of the file's (0: keep). */
    reinit: z.number().min(0),
  })
  .strict();

/** Where things are read and written. */
const pathsSchema = z
  .object({
    /** The policy's weights: a GGUF (with `lora`: the frozen base); with the hf backend a Hugging Face checkpoint folder or hub id. */
    model: path,
    /** The experience JSONL (docs/learner.md). */
    experience: path,
    /** The whole updated GGUF (with `lora`: the base with the adapter merged in); null: none (a LoRA step writes only the adapter). */
    out: path.nullable(),
    /** A frozen reference GGUF for the KL term; null: none, or with `lora` the base with the adapter switched off (when klBeta > 0). */
    ref: path.nullable(),
    /** float32 master weights carried across steps (full-weight GGUF only); null: none. */
    master: path.nullable(),
    /** The metrics JSON the step writes. */
    metrics: path,
    /** AdamW state, loaded when it exists and saved after the step; null: none. */
    optimizerState: path.nullable(),
  })
  .strict();

const loraSchema = z
  .object({
    /** The adapter to continue from (a llama.cpp LoRA GGUF; hf: a peft folder), its rank, alpha and targets winning; null: a fresh one. */
    in: path.nullable(),
    /** Where the updated adapter goes (hf: a peft folder). */
    out: path,
    rank: z.number().int().min(1),
    alpha: z.number().gt(0),
    /** Comma-separated llama.cpp matrices (attn_q … ffn_down) or "all"; the hf backend maps them to q_proj … down_proj. */
    targets: z.string().min(1),
    outType: z.enum(["f32", "f16"]),
  })
  .strict();

/** How the step runs (not what it computes, except `dtype`, the autocast compute dtype). */
const runtimeSchema = z
  .object({
    device: z.string().min(1),
    dtype: z.enum(["f32", "bf16", "f16"]),
    /** PyTorch CPU threads (0: PyTorch's choice). */
    threads: z.number().int().min(0),
    gradCheckpoint: z.boolean(),
    /** Attention maths: eager (the reference), sdpa (PyTorch 2's fused kernel), auto (sdpa on CUDA when it matches eager on a batch). */
    attn: z.enum(["eager", "sdpa", "auto"]),
    /** Tensor type of `paths.out`. */
    outType: z.enum(["keep", "f32", "f16", "q8_0"]),
  })
  .strict();

/** The Hugging Face backend's own settings (path (b)); null with the GGUF backend. */
const hfSchema = z
  .object({
    /** Also write the adapter as a llama.cpp LoRA GGUF here (llama.cpp's convert_lora_to_gguf.py); null: no. */
    ggufOut: path.nullable(),
    ggufOutType: z.enum(["f32", "f16", "bf16", "q8_0"]),
    /** convert_lora_to_gguf.py or its llama.cpp folder; null: node-llama-cpp's copy. */
    convertScript: path.nullable(),
    trustRemoteCode: z.boolean(),
  })
  .strict();

export const learnerRequestSchema = z
  .object({
    version: z.literal(1),
    backend: z.enum(["gguf", "hf"]),
    mode: z.enum(["grpo", "sft"]),
    paths: pathsSchema,
    lora: loraSchema.nullable(),
    runtime: runtimeSchema,
    train: trainSchema,
    hf: hfSchema.nullable(),
    /** A multi-step SFT run (mode sft, gguf backend); null: one step. */
    run: runSchema.nullable(),
  })
  .strict();

/** One learner step's request, as written to its JSON file. */
export type LearnerRequestFile = z.infer<typeof learnerRequestSchema>;

/** The JSON Schema of the request file (the committed src/training/learner/learner-request.schema.json). */
export function learnerRequestJsonSchema(): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(learnerRequestSchema, { io: "input" }) as Record<string, unknown>;
  return { $comment: "Generated from src/training/learner-request.ts (learnerRequestJsonSchema); do not edit by hand.", ...rest };
}

/**
 * Drives a multi-step SFT run of the learner (`python3 -m reex_learner step --request FILE` with a request's `run`, see
 * src/training/learner/reex_learner/sft_run.py): writes its request file, streams its JSON progress lines to a callback
 * and returns the final summary.
 */
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { z } from "zod";
import { type LearnerRequestFile, learnerEnv, learnerRequestSchema } from "../../src/training/index.js";

/** The defaults of an SFT run's settings (the only ones: the learner has none). */
const sftDefaults = z.object({
  loraRank: z.number().int().min(0).default(0),
  loraTargets: z.string().default("attn_q,attn_k,attn_v,attn_output"),
  steps: z.number().int().min(0).default(0),
  minutes: z.number().min(0).default(0),
  /** Seconds of `minutes` kept for the final eval and the export. */
  reserveS: z.number().min(0).default(30),
  lr: z.number().default(1e-3),
  minLrRatio: z.number().default(0.1),
  warmup: z.number().int().default(30),
  schedule: z.enum(["cosine", "linear", "constant"]).default("cosine"),
  weightDecay: z.number().default(0.1),
  maxGradNorm: z.number().default(1),
  batchTokens: z.number().int().default(4096),
  packTokens: z.number().int().default(1024),
  sharePrefix: z.boolean().default(true),
  evalFrac: z.number().default(0.02),
  evalEvery: z.number().int().default(100),
  logEvery: z.number().int().default(10),
  saveEvery: z.number().int().default(0),
  outType: z.enum(["keep", "f32", "f16"]).default("keep"),
  threads: z.number().int().default(2),
  device: z.string().default("cpu"),
  attention: z.enum(["eager", "sdpa", "auto"]).default("eager"),
  reinit: z.number().default(0),
  amp: z.enum(["none", "bf16"]).default("none"),
  seed: z.number().int().default(1),
});

/** Options of one SFT run (defaults: `sftDefaults` above; the request's fields: src/training/learner-request.ts). */
export interface SftOptions {
  model: string;
  data: string;
  /** The trained GGUF; with a LoRA, the base with the adapter merged in (optional then). */
  out?: string;
  /** Rank of a fresh LoRA adapter trained on the frozen model instead of every weight. Default 0 (off). */
  loraRank?: number;
  /** The adapter's alpha (scale alpha/rank). Default 2 × rank. */
  loraAlpha?: number;
  /** llama.cpp matrices a fresh adapter targets (`attn_q,…,ffn_down` or `all`). Default the four attention matrices. */
  loraTargets?: string;
  /** An adapter GGUF to continue from (its rank, alpha and targets win). Default none. */
  loraIn?: string;
  /** Where the adapter is written (a llama.cpp LoRA GGUF). Required with a LoRA. */
  loraOut?: string;
  /** Optimizer steps; 0 = until `minutes`. */
  steps?: number;
  /** Wall-clock budget in minutes; 0 = until `steps`. */
  minutes?: number;
  lr?: number;
  minLrRatio?: number;
  warmup?: number;
  schedule?: "cosine" | "linear" | "constant";
  weightDecay?: number;
  batchTokens?: number;
  packTokens?: number;
  sharePrefix?: boolean;
  /** Family → records per epoch (1 = once; 0.2 = a fixed fifth of them; 2 = twice). */
  familyWeights?: Record<string, number>;
  /** db_id prefix → weight multiplying the family's (first matching prefix wins). Default none (all 1). */
  dbWeights?: Record<string, number>;
  evalFrac?: number;
  evalEvery?: number;
  log?: string;
  logEvery?: number;
  saveEvery?: number;
  checkpointDir?: string;
  outType?: "keep" | "f32" | "f16";
  optimizerState?: string;
  threads?: number;
  /** Where PyTorch trains: "cpu", "cuda[:N]" or "auto" (CUDA when PyTorch sees a GPU). Default "cpu". */
  device?: string;
  /** Attention maths: "eager" (reference), "sdpa" (PyTorch 2's fused kernel), "auto" (sdpa on CUDA when it matches eager). Default "eager". */
  attention?: "eager" | "sdpa" | "auto";
  /** Draw fresh weights with this std (the starter's scheme) instead of the file's, e.g. from a zeroed copy. Default 0 (keep). */
  reinit?: number;
  /** "bf16" autocasts the forward pass (weights and optimizer stay f32). Default "none". */
  amp?: "none" | "bf16";
  seed?: number;
  /** Where the request file is written. Default `<out or loraOut>.request.json`; the summary goes beside it (`.summary.json`). */
  request?: string;
  /** Python with torch. Default "/usr/bin/python3". */
  python?: string;
  /** Every JSON line the trainer prints (start, step, eval, checkpoint, done). */
  onEvent?: (event: SftEvent) => void;
  /** Lines the trainer writes to stderr. */
  onStderr?: (line: string) => void;
}

/** A progress line of the trainer. */
export interface SftEvent {
  event: "start" | "calibrated" | "step" | "eval" | "checkpoint" | "done";
  [key: string]: unknown;
}

/** The trainer's final summary (its `done` line). */
export interface SftSummary {
  out: string;
  steps: number;
  stop_reason: string;
  epochs_done: number;
  train_s: number;
  tokens: number;
  unpacked_tokens: number;
  loss_tokens: number;
  tokens_per_s: number;
  unpacked_tokens_per_s: number;
  first_loss: number | null;
  last_loss: number | null;
  eval_loss: number | null;
  evals: { step: number; eval_loss: number }[];
  parameters: number;
  /** Where it trained (absent in summaries written before the trainer had a device option). */
  device?: string;
}

/** The request file's path for `o`. */
export function sftRequestPath(o: SftOptions): string {
  const at = o.request ?? `${o.out ?? o.loraOut ?? o.data}.request.json`;
  return at.endsWith(".json") ? at : `${at}.json`;
}

/** The learner's request for the SFT run `o` (validated against the request schema). */
export function sftRequest(o: SftOptions): LearnerRequestFile {
  const d = sftDefaults.parse(o);
  const lora = d.loraRank > 0 || o.loraIn !== undefined;
  if (lora && !o.loraOut) throw new Error("an SFT run of a LoRA (loraRank or loraIn) needs loraOut, where the adapter goes");
  if (!lora && o.loraOut) throw new Error("loraOut needs loraRank or loraIn");
  return learnerRequestSchema.parse({
    version: 1,
    backend: "gguf",
    mode: "sft",
    paths: {
      model: o.model,
      experience: o.data,
      out: o.out ?? null,
      ref: null,
      master: null,
      metrics: sftRequestPath(o).replace(/(\.request)?\.json$/, ".summary.json"),
      optimizerState: o.optimizerState ?? null,
    },
    // continuing from loraIn, that adapter's rank, alpha and targets win
    lora: lora
      ? {
          in: o.loraIn ?? null,
          out: o.loraOut,
          rank: Math.max(d.loraRank, 1),
          alpha: o.loraAlpha ?? 2 * Math.max(d.loraRank, 1),
          targets: d.loraTargets,
          outType: "f32",
        }
      : null,
    runtime: { device: d.device, dtype: d.amp === "bf16" ? "bf16" : "f32", threads: d.threads, gradCheckpoint: false, attn: d.attention, outType: d.outType },
    train: {
      lr: d.lr,
      clip: 0.2,
      clipHigh: null,
      klBeta: 0,
      temperature: 1,
      lossAgg: "token-mean",
      epochs: 1,
      microBatch: 1,
      miniBatch: 0,
      maxGradNorm: d.maxGradNorm,
      weightDecay: d.weightDecay,
      warmupSteps: d.warmup,
      maxOldLogprobDiff: 0,
      splitHalf: 0,
      maskTruncated: false,
      sharePrefix: d.sharePrefix,
      packTokens: d.packTokens,
      shuffle: false,
      seed: d.seed,
      adamBeta2: 0.95,
      decayNorms: false,
      schedule: d.schedule,
      minLrRatio: d.minLrRatio,
      progress: 0,
    },
    hf: null,
    run: {
      steps: d.steps,
      minutes: d.minutes,
      reserveS: d.reserveS,
      batchTokens: d.batchTokens,
      evalFrac: d.evalFrac,
      evalEvery: d.evalEvery,
      logEvery: d.logEvery,
      saveEvery: d.saveEvery,
      checkpointDir: o.checkpointDir ?? null,
      log: o.log ?? null,
      familyWeights: o.familyWeights ?? {},
      dbWeights: o.dbWeights ?? {},
      reinit: d.reinit,
    },
  });
}

/** Writes the run's request file and runs the learner on it to completion; rejects with its stderr tail when it fails. */
export function runSft(options: SftOptions): Promise<SftSummary> {
  const python = options.python ?? "/usr/bin/python3";
  const env = learnerEnv();
  const requestPath = sftRequestPath(options);
  try {
    writeFileSync(requestPath, `${JSON.stringify(sftRequest(options), null, 2)}\n`);
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
  return new Promise((resolve, reject) => {
    const child = spawn(python, ["-m", "reex_learner", "step", "--request", requestPath], { env, stdio: ["ignore", "pipe", "pipe"] });
    let summary: SftSummary | undefined;
    const errTail: string[] = [];
    let outBuf = "";
    let errBuf = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      outBuf += chunk;
      let nl;
      while ((nl = outBuf.indexOf("\n")) >= 0) {
        const line = outBuf.slice(0, nl).trim();
        outBuf = outBuf.slice(nl + 1);
        if (!line.startsWith("{")) continue;
        try {
          const ev = JSON.parse(line) as SftEvent;
          if (ev.event === "done") summary = ev as unknown as SftSummary;
          options.onEvent?.(ev);
        } catch {
          /* not a progress line */
        }
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      errBuf += chunk;
      let nl;
      while ((nl = errBuf.indexOf("\n")) >= 0) {
        const line = errBuf.slice(0, nl);
        errBuf = errBuf.slice(nl + 1);
        errTail.push(line);
        if (errTail.length > 40) errTail.shift();
        options.onStderr?.(line);
      }
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0 && summary) resolve(summary);
      else reject(new Error(`the SFT run (${requestPath}) exited with ${code}${summary ? "" : " (no summary)"}:\n${[...errTail, errBuf].join("\n").trim()}`));
    });
  });
}

/** Hyperparameters of a llama GGUF as the learner reads them (`python3 -m reex_learner info`). */
export interface GgufHparams {
  arch: string;
  n_vocab: number;
  n_embd: number;
  n_layer: number;
  n_head: number;
  n_head_kv: number;
  n_ff: number;
  n_ctx_train: number;
  tied_output: boolean;
}

/** Runs `python -m reex_learner ARGS` and returns its stdout; throws "`what`: MESSAGE" with the last line of its stderr. */
function learner(args: string[], what: string, python: string): string {
  try {
    return execFileSync(python, ["-m", "reex_learner", ...args], {
      env: learnerEnv(),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      maxBuffer: 16 << 20,
    });
  } catch (err) {
    const stderr = String((err as { stderr?: string }).stderr ?? "").trim();
    throw new Error(`${what}${stderr ? `: ${stderr.split("\n").at(-1)}` : ""}`);
  }
}

/** Rewrites `model`'s matrices as `type` into `out` (may be `model` itself; written atomically) through the learner's `export`. */
export function exportGguf(model: string, out: string, type: "f16" | "q8_0", python = "/usr/bin/python3"): void {
  learner(["export", "--model", model, "--out", out, "--out-type", type], `exporting ${model} as ${type} failed`, python);
}

/** Reads `model`'s hyperparameters and the type of its token embedding through the learner; throws with its message on a file it cannot read. */
export function ggufInfo(model: string, python = "/usr/bin/python3"): { hparams: GgufHparams; embeddingType: string } {
  const out = learner(["info", "--model", model], `${model}: not a model the learner can read`, python);
  const info = JSON.parse(out) as { hparams: GgufHparams; tensors: Record<string, [number[], string]> };
  return { hparams: info.hparams, embeddingType: (info.tensors["token_embd.weight"]?.[1] ?? "F32").toLowerCase() };
}

/**
 * Drives the one-process SFT trainer (`python3 -m reex_learner.sft_train`, see
 * src/training/learner/reex_learner/sft_train.py): builds its command line, streams its JSON
 * progress lines to a callback and returns the final summary.
 */
import { execFileSync, spawn } from "node:child_process";
import { learnerEnv } from "../../src/training/index.js";

/** Options of one SFT run (see `python3 -m reex_learner.sft_train --help`). */
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

/** The trainer's argument list for `options`. */
export function sftArgs(o: SftOptions): string[] {
  const a = ["-m", "reex_learner.sft_train", "--model", o.model, "--data", o.data, ...(o.out ? ["--out", o.out] : [])];
  const num = (flag: string, v: number | undefined): void => {
    if (v !== undefined) a.push(flag, String(v));
  };
  num("--lora-rank", o.loraRank);
  num("--lora-alpha", o.loraAlpha);
  if (o.loraTargets) a.push("--lora-targets", o.loraTargets);
  if (o.loraIn) a.push("--lora-in", o.loraIn);
  if (o.loraOut) a.push("--lora-out", o.loraOut);
  num("--steps", o.steps);
  num("--minutes", o.minutes);
  num("--lr", o.lr);
  num("--min-lr-ratio", o.minLrRatio);
  num("--warmup", o.warmup);
  if (o.schedule) a.push("--schedule", o.schedule);
  num("--weight-decay", o.weightDecay);
  num("--batch-tokens", o.batchTokens);
  num("--pack-tokens", o.packTokens);
  if (o.sharePrefix === false) a.push("--no-share-prefix");
  for (const [family, w] of Object.entries(o.familyWeights ?? {})) a.push("--family-weight", `${family}=${w}`);
  for (const [prefix, w] of Object.entries(o.dbWeights ?? {})) a.push("--db-weight", `${prefix}=${w}`);
  num("--eval-frac", o.evalFrac);
  num("--eval-every", o.evalEvery);
  if (o.log) a.push("--log", o.log);
  num("--log-every", o.logEvery);
  num("--save-every", o.saveEvery);
  if (o.checkpointDir) a.push("--checkpoint-dir", o.checkpointDir);
  if (o.outType) a.push("--out-type", o.outType);
  if (o.optimizerState) a.push("--optimizer-state", o.optimizerState);
  num("--threads", o.threads);
  if (o.device) a.push("--device", o.device);
  if (o.attention) a.push("--attention", o.attention);
  num("--reinit", o.reinit);
  if (o.amp) a.push("--amp", o.amp);
  num("--seed", o.seed);
  return a;
}

/** Runs the trainer to completion; rejects with its stderr tail when it fails. */
export function runSft(options: SftOptions): Promise<SftSummary> {
  const python = options.python ?? "/usr/bin/python3";
  const env = learnerEnv();
  return new Promise((resolve, reject) => {
    const child = spawn(python, sftArgs(options), { env, stdio: ["ignore", "pipe", "pipe"] });
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
      else reject(new Error(`sft_train exited with ${code}${summary ? "" : " (no summary)"}:\n${[...errTail, errBuf].join("\n").trim()}`));
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

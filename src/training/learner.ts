/** The bridge to the Python learner (src/training/learner): where it is, its environment, the request file of a step, and one learner step as a child process. */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ReexError } from "../errors/index.js";
import { packageRoot } from "../paths/index.js";
import type { TrainConfig, TrainMode } from "./config.js";
import type { LearnerRequestFile } from "./learner-request.js";

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
  /** Current weights; with `config.learner.lora` the base model, which stays unchanged. */
  model: string;
  experience: string;
  /** Where the new weights go: a whole GGUF, or with `config.learner.lora` the adapter (a llama.cpp LoRA GGUF). */
  out: string;
  /** With `config.learner.lora`: the adapter the step continues from (the previous step's, or `lora.in`); absent for a fresh adapter of the configured rank. */
  loraIn?: string;
  /** Frozen reference for the KL term; absent when β is 0, and ignored with `config.learner.lora` (the base, adapter off, is the reference). */
  ref?: string;
  /** The learner's metrics JSON. */
  metricsFile: string;
  /** The learner's stderr. */
  logFile: string;
  /** AdamW state file carried across steps. */
  optimizerState: string;
  /** float32 master weights carried across steps (`model` is their export); absent to reload the GGUF's weights; ignored with `config.learner.lora`. */
  master?: string;
  config: TrainConfig;
}

/** Runs one learner step and returns its metrics (kl, loss, grad_norm, clip_frac, …). */
export type LearnerStep = (request: LearnerRequest, signal?: AbortSignal) => Promise<Record<string, unknown>>;

/** The request file of a step: beside its metrics, `step-N.request.json`. */
export function learnerRequestPath(req: LearnerRequest): string {
  return req.metricsFile.replace(/(\.json)?$/, ".request.json");
}

/** The request file's contents for a step: every field from the resolved config (its defaults are the only ones). */
export function learnerRequestFile(req: LearnerRequest): LearnerRequestFile {
  const c = req.config;
  const l = c.learner;
  const grpo = req.mode === "grpo";
  const lora = l.lora;
  return {
    version: 1,
    backend: "gguf",
    mode: req.mode,
    paths: {
      model: req.model,
      experience: req.experience,
      out: lora ? null : req.out,
      ref: lora ? null : (req.ref ?? null),
      master: lora ? null : (req.master ?? null),
      metrics: req.metricsFile,
      optimizerState: req.optimizerState,
    },
    lora: lora
      ? { in: req.loraIn ?? null, out: req.out, rank: lora.rank, alpha: lora.alpha ?? 2 * lora.rank, targets: lora.targets, outType: lora.outType }
      : null,
    runtime: { device: l.device, dtype: l.dtype, threads: l.threads, gradCheckpoint: l.gradCheckpoint, attn: l.attn, outType: l.outType },
    train: {
      lr: c.learningRate,
      clip: c.clip,
      clipHigh: grpo && c.clipHigh !== undefined ? c.clipHigh : null,
      klBeta: grpo && (req.ref || lora) ? c.klBeta : 0,
      temperature: grpo ? c.temperature : 1,
      lossAgg: l.lossAgg,
      epochs: l.epochs,
      microBatch: l.microBatch,
      miniBatch: l.miniBatch,
      maxGradNorm: l.maxGradNorm,
      weightDecay: l.weightDecay,
      warmupSteps: l.warmupSteps,
      maxOldLogprobDiff: grpo ? l.maxOldLogprobDiff : 0,
      splitHalf: grpo ? l.splitHalf : 0,
      maskTruncated: c.maskTruncated,
      sharePrefix: l.sharePrefix,
      packTokens: l.packTokens,
      shuffle: l.shuffle,
      seed: c.seed + req.step,
      adamBeta2: l.adamBeta2,
      decayNorms: l.decayNorms,
      schedule: l.schedule,
      minLrRatio: l.minLrRatio,
      progress: Math.min(1, Math.max(0, (req.step - 1) / c.steps)),
    },
    hf: null,
    run: null,
  };
}

/** The arguments of `python -m reex_learner step`: the request file's path, nothing else. */
export function learnerArgs(req: LearnerRequest): string[] {
  return ["-m", "reex_learner", "step", "--request", learnerRequestPath(req)];
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
    const request = JSON.stringify(learnerRequestFile(req), null, 2);
    await writeFile(learnerRequestPath(req), `${request}\n`);
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
    await writeFile(req.logFile, `$ ${python} ${args.join(" ")}\n${request}\n${stderr}`).catch(() => undefined);
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

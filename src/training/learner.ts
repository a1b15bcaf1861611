/** The bridge to the Python learner (src/training/learner): where it is, its environment and arguments, and one learner step as a child process. */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ReexError } from "../errors/index.js";
import { packageRoot } from "../paths/index.js";
import type { TrainConfig, TrainMode } from "./config.js";

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

/** The arguments of `python -m reex_learner step` for a request (with `config.learner.lora`: `--lora-*` instead of `--out`, `--master` and `--ref`). */
export function learnerArgs(req: LearnerRequest): string[] {
  const c = req.config;
  const lora = c.learner.lora;
  const args = [
    "-m",
    "reex_learner",
    "step",
    "--model",
    req.model,
    "--experience",
    req.experience,
    ...(lora ? [] : ["--out", req.out]),
    "--mode",
    req.mode,
    "--lr",
    String(c.learningRate),
    "--clip",
    String(c.clip),
    ...(req.mode === "grpo" && c.clipHigh !== undefined ? ["--clip-high", String(c.clipHigh)] : []),
    "--kl-beta",
    String(req.mode === "grpo" && (req.ref || lora) ? c.klBeta : 0),
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
    "--weight-decay",
    String(c.learner.weightDecay),
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
  if (lora) {
    if (req.loraIn) args.push("--lora-in", req.loraIn);
    else args.push("--lora-rank", String(lora.rank), "--lora-alpha", String(lora.alpha ?? 2 * lora.rank), "--lora-targets", lora.targets);
    args.push("--lora-out", req.out, "--lora-out-type", lora.outType);
  } else {
    if (req.master) args.push("--master", req.master);
    if (req.ref) args.push("--ref", req.ref);
  }
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

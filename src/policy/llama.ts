/**
 * The embedded llama.cpp policy (through node-llama-cpp): one model, one context whose sequences
 * are shared by all trajectories (so llama.cpp batches their tokens together), KV-copy forks, a
 * least-recently-used cache of evaluated prompt prefixes, grammars, LoRA adapters and hot reload.
 */
import { stat } from "node:fs/promises";
import { basename, resolve as resolvePath } from "node:path";
import {
  getLlama,
  JinjaTemplateChatWrapper,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  type LlamaText,
} from "node-llama-cpp";
import { createHash } from "node:crypto";
import { availableParallelism } from "node:os";
import { parseConfig, type Config, type SpeculativeMode } from "../config/index.js";
import { ReexError } from "../errors/index.js";
import { isModelUri } from "../paths/index.js";
import { resolveModelUri } from "./download.js";
import { ggufHeaderProblem } from "./gguf.js";
import { DraftingState, type DraftShape } from "./draft.js";
import { GrammarCache } from "./grammar.js";
import { decodeStepCosts, enableDirectDecode } from "./direct-decode.js";
import { asTokens, copySequenceState, decodeBatchCount, enableScheduledKvOps, kvCopySupport, preferSequenceIds } from "./kv-schedule.js";
import { LlamaTrajectory, type TrajectoryHost } from "./llama-trajectory.js";
import { SequenceWaiters } from "./waiters.js";
import { PrefixCache } from "./prefix-cache.js";
import { StepBarrier } from "./steps.js";
import { contentOffset, mergeParts, piecesOf, promptFromParts, tokenizePieces } from "./prompt.js";
import type { ChatMessage, ModelMetadata, Policy, PolicyInfo, PromptPart, PromptSpec, StartOptions, StepCost, Trajectory } from "./types.js";

/** How to load the llama.cpp policy. */
export interface LlamaPolicyOptions {
  /**
   * A GGUF file path (relative to the working directory, else to `modelsDir`) or a model URI
   * (`hf:owner/repo/file.gguf`, `https://…/file.gguf`) resolved into `modelsDir`.
   */
  model: string;
  /** Where model URIs are looked up and downloaded to. Default "models". */
  modelsDir?: string;
  /** Download a URI's file when it is not in `modelsDir` yet; false makes that MODEL_NOT_FOUND. Default true. */
  download?: boolean;
  /** Download progress of a model URI, in bytes. Default none. */
  onDownloadProgress?: (progress: { downloadedBytes: number; totalBytes: number }) => void;
  /** Download progress of a model URI in words (where from, how far, done). Default none. */
  onDownloadLog?: (line: string) => void;
  /** Longest wait for a model URI's host to answer, and for the next bytes of its download, ms. Default: policy.downloadTimeoutMs's. */
  downloadTimeoutMs?: number;
  /** "auto" uses CUDA (or Vulkan/Metal) when its prebuilt binary works here, else the CPU. Default "auto". */
  gpu?: Config["policy"]["gpu"];
  /** Context window of each sequence, in tokens (the KV cache holds `contextSize × sequences`). Default 8192. */
  contextSize?: number;
  /** Sequences in the context: live trajectories plus cached prefixes. Default 24. */
  sequences?: number;
  /** LoRA adapter GGUF files applied on load, each at scale 1. Default []. */
  lora?: string[];
  /**
   * CPU threads for evaluation. llama.cpp's worker threads spin while they wait, so a thread on every
   * core starves the sampler, the SQL executor and the event loop (on 2 cores the starter decoded
   * 2.5× slower with 2 threads than with 1). Default: cores − 1, at least 1.
   */
  threads?: number;
  /** Tokens per llama.cpp batch. Default min(512, contextSize × sequences). */
  batchSize?: number;
  /**
   * Line up the next-token requests of the trajectories generating together, so that each step is
   * one decode batch (src/policy/steps.ts); off, a trajectory that asks late is decoded on its own by
   * node-llama-cpp's `evaluate` (the direct decode path still collects a step's requests until the event loop turns). Default true.
   */
  alignSteps?: boolean;
  /**
   * Decode generated tokens with reex's own batch step on node-llama-cpp's native context (one
   * batch, then one native sample per sequence) instead of its `evaluate`, whose per-token queueing
   * made the starter's generation 1.1–1.4× slower than the same native calls. Used only on the node-llama-cpp version it
   * was verified against, and not for models that need KV checkpoints. Default true.
   */
  directDecode?: boolean;
  /**
   * llama.cpp flash attention ("auto": where supported). On CPU it made the starter's greedy
   * rollouts 1.15–1.28× faster but its seeded tree-prune-4 answers to the README's question right
   * in 16 of 48 seeds against 22 (docs/benchmarks.md, "Where the time goes"), and the tiny test model (16-dimension
   * heads) generate 4.8× slower. Default: "auto" on a GPU, off on CPU.
   */
  flashAttention?: "auto" | boolean;
  /**
   * Speculative decoding on the direct decode path: "ngram" drafts the tokens that followed the
   * latest earlier occurrence of a trajectory's longest matching last tokens (in its own text, the
   * probe results injected into it included, then its prompt) and verifies them in the step's batch, keeping exactly the
   * tokens plain decoding samples (src/policy/draft.ts). Default "off".
   */
  speculative?: SpeculativeMode;
  /** Most tokens drafted in one step; below it the length follows the acceptance seen and the step costs. Default 8. */
  draftMax?: number;
  /**
   * What a decode step of several tokens is taken to cost when drafts are sized: "measured" (the
   * step's own timings) or "assumed" (a fixed share of a one-token step a token, so that whether a
   * trajectory drafts depends on its tokens alone: reproducible runs, tests). Default "measured".
   */
  draftCosts?: "measured" | "assumed";
  /**
   * Tokens of earlier trajectories' text (generated, appended, probe results) kept to draft from,
   * per prompt prefix (system message and schema), so that an answer drafts from the answers before
   * it on the same database; oldest prefixes are dropped first. 0: drafts come from the prompt and
   * the trajectory's own text only. Only with `speculative: "ngram"`. Default 32768.
   */
  draftHistory?: number;
  /**
   * "sized": each step drafts as many tokens as pay at the step costs; "fixed": while one sequence
   * generates alone, every step evaluates `draftMax` + 1 tokens, the draft filled up with guesses
   * that are verified (and rejected) like drafted ones, so that the step never changes shape: on a
   * GPU llama.cpp replays a captured CUDA graph only for a step of the shape before it. On CPU a
   * token costs most of a step, so "fixed" is slower there. Default "sized".
   */
  draftShape?: DraftShape;
  /** Evaluated prompt prefixes kept for reuse. Default max(1, floor(sequences / 4)). */
  maxCachedPrefixes?: number;
  /** Receives llama.cpp's log lines at `logLevel` and above. Default: printed by node-llama-cpp. */
  logger?: (level: string, message: string) => void;
  /** Least severe llama.cpp log level passed on. Default "error". */
  logLevel?: "error" | "warn" | "info" | "debug";
}

interface Loaded {
  modelPath: string;
  modelSource: string;
  model: LlamaModel;
  context: LlamaContext;
  chat: ChatWrapper;
  lora: string[];
  device: string;
  /** The model's end-of-turn text (its EOT token, else EOS), read once at load so `info` stays readable after close. */
  endOfTurn: string | undefined;
  /** Lines up the generating trajectories' next tokens into one batch. */
  steps: StepBarrier;
}

const llamas = new Map<string, Promise<Llama>>();

function llamaFor(gpu: Config["policy"]["gpu"], logLevel: string, logger?: (level: string, message: string) => void): Promise<Llama> {
  const key = gpu;
  let llama = llamas.get(key);
  if (!llama) {
    llama = getLlama({
      gpu: gpu === "cpu" ? false : gpu,
      build: "never",
      logLevel: logLevel as LlamaLogLevel,
      ...(logger ? { logger: (level: LlamaLogLevel, message: string) => logger(level, message) } : {}),
    }).catch((err: unknown) => {
      llamas.delete(key);
      const hint = gpu === "cuda" ? " (CUDA was requested: is the CUDA prebuilt installed and a GPU visible?)" : "";
      throw new ReexError("MODEL_LOAD_FAILED", `could not start llama.cpp for gpu "${gpu}"${hint}: ${errorText(err)}`, { cause: err });
    });
    llamas.set(key, llama);
  } else {
    void llama.then(
      (l) => {
        l.logLevel = logLevel as LlamaLogLevel;
        if (logger) l.logger = (level, message) => logger(level, message);
      },
      () => undefined,
    );
  }
  return llama;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

/** Resolves a model path or URI to a local file (downloading if allowed); MODEL_NOT_FOUND otherwise. */
async function resolveModel(model: string, options: LlamaPolicyOptions): Promise<string> {
  const modelsDir = resolvePath(options.modelsDir ?? "models");
  if (isModelUri(model)) {
    return resolveModelUri(model, {
      directory: modelsDir,
      download: options.download !== false,
      timeoutMs: options.downloadTimeoutMs ?? parseConfig({}).policy.downloadTimeoutMs,
      ...(options.onDownloadLog ? { log: options.onDownloadLog } : {}),
      ...(options.onDownloadProgress ? { onProgress: options.onDownloadProgress } : {}),
    });
  }
  const path = model.startsWith("file:") ? new URL(model).pathname : model;
  for (const candidate of [resolvePath(path), resolvePath(modelsDir, path)]) {
    if (await isFile(candidate)) return candidate;
  }
  throw new ReexError("MODEL_NOT_FOUND", `model file not found: ${model} (looked in the working directory and ${modelsDir})`);
}

async function resolveLora(paths: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of paths) {
    const abs = resolvePath(p);
    if (!(await isFile(abs))) throw new ReexError("MODEL_NOT_FOUND", `LoRA adapter file not found: ${p}`);
    const problem = await ggufHeaderProblem(abs);
    if (problem) throw new ReexError("MODEL_LOAD_FAILED", `LoRA adapter ${p} cannot be loaded: ${problem}`);
    out.push(abs);
  }
  return out;
}

function pickChatWrapper(model: LlamaModel): ChatWrapper {
  try {
    // rendered as Hugging Face's apply_chat_template(add_generation_prompt=True) does, the template's own defaults kept:
    // node-llama-cpp otherwise renders an empty assistant message (Qwen3 then pre-closes an empty <think>) and sets enable_thinking
    const jinja = resolveChatWrapper(model, {
      type: "jinjaTemplate",
      fallbackToOtherWrappersOnJinjaError: false,
      customWrapperSettings: { jinjaTemplate: { additionalRenderParameters: { add_generation_prompt: true }, reasoning: null } },
    });
    if (jinja) return jinja;
  } catch {
    // no usable template in the file: fall back to node-llama-cpp's detection
  }
  const auto = resolveChatWrapper(model);
  if (!auto) throw new ReexError("MODEL_LOAD_FAILED", "no chat template could be resolved for this model");
  return auto;
}

function noContextShift(): never {
  throw new ReexError("CONTEXT_EXHAUSTED", "the trajectory reached the end of its context window");
}

/** A sequence for a trajectory, on the lowest free id, or for a fork the lowest above its parent's (see {@link preferSequenceIds}). */
function trajectorySequence(context: LlamaContext, parent?: number): LlamaContextSequence {
  preferSequenceIds(context, "low", parent);
  return context.getSequence({ contextShift: { strategy: noContextShift } });
}

/** The llama.cpp policy; see {@link createLlamaPolicy}. */
class LlamaPolicy implements Policy, TrajectoryHost {
  private loaded: Loaded;
  private readonly cache = new PrefixCache<LlamaContextSequence>();
  private readonly grammars = new GrammarCache();
  private readonly live = new Set<LlamaTrajectory>();
  /** Callers waiting for a free sequence; handed null when a reload drops the context they waited on. */
  private readonly waiters = new SequenceWaiters<LlamaContextSequence | null>();
  private readonly inflightPrefixes = new Map<string, Promise<void>>();
  private readonly starting = new Set<Promise<unknown>>();
  private reloading: Promise<void> | undefined;
  private closed = false;
  private nextId = 1;
  readonly drafting: DraftingState | undefined;

  constructor(
    private readonly llama: Llama,
    loaded: Loaded,
    private readonly options: LlamaPolicyOptions,
    readonly kvCopy: boolean,
  ) {
    this.loaded = loaded;
    // a token's share of a one-token step until the decode step has measured it (draft.ts): on a
    // GPU, where a step costs about the same for a few more tokens, assumed small
    this.drafting =
      options.speculative === "ngram"
        ? new DraftingState({
            draftMax: options.draftMax ?? 8,
            tokenCost: loaded.device === "cpu" ? 0.4 : 0.1,
            stepCosts: options.draftCosts ?? "measured",
            historyTokens: options.draftHistory ?? 32768,
            shape: options.draftShape ?? "sized",
          })
        : undefined;
  }

  get info(): PolicyInfo {
    return {
      backend: "llama",
      model: this.loaded.modelSource,
      device: this.loaded.device,
      contextSize: this.loaded.context.contextSize,
      maxSequences: this.loaded.context.totalSequences,
      lora: [...this.loaded.lora],
      flashAttention: this.loaded.context.flashAttention,
      metadata: {
        ...modelMetadata(this.loaded.model, this.loaded.modelSource),
        ...(this.loaded.lora.length > 0 ? { adapters: this.loaded.lora.map((p) => basename(p)) } : {}),
      },
      ...(this.loaded.endOfTurn ? { endOfTurn: this.loaded.endOfTurn } : {}),
    };
  }

  tokenize(text: string): number[] {
    return this.loaded.model.tokenize(text, true);
  }

  detokenize(tokens: readonly number[]): string {
    return this.loaded.model.detokenize(asTokens(tokens), true);
  }

  liveTrajectories(): number {
    return this.live.size;
  }

  decodeBatches(): number | undefined {
    return decodeBatchCount(this.loaded.context);
  }

  decodeStepCosts(): StepCost[] | undefined {
    return decodeStepCosts(this.loaded.context);
  }

  renderChat(messages: ChatMessage[], options: { sharedPrefix?: string } = {}): PromptSpec {
    const history: ChatHistoryItem[] = messages.map((m) =>
      m.role === "assistant" ? { type: "model", response: [m.content] } : { type: m.role, text: m.content },
    );
    if (messages.at(-1)?.role !== "assistant" && !(this.loaded.chat instanceof JinjaTemplateChatWrapper)) history.push({ type: "model", response: [] });
    let json: ReturnType<LlamaText["toJSON"]>;
    try {
      json = this.loaded.chat.generateContextState({ chatHistory: history }).contextText.toJSON();
    } catch (err) {
      throw new ReexError("POLICY_ERROR", `the model's chat template could not render these messages: ${errorText(err)}`, { cause: err });
    }
    const parts: PromptPart[] = [];
    for (const v of typeof json === "string" ? [json] : json) {
      if (typeof v === "string") parts.push({ text: v, special: false });
      else if (v.type === "specialTokensText") parts.push({ text: v.value, special: true });
      else {
        const spelled = this.spellSpecial(v.value);
        if (spelled) parts.push({ text: spelled, special: true });
      }
    }
    const merged = mergeParts(parts);
    return promptFromParts(merged, options.sharedPrefix, contentOffset(merged, messages.at(-1)?.content ?? ""));
  }

  private spellSpecial(value: string): string | null {
    const t = this.loaded.model.tokens;
    switch (value) {
      case "BOS":
        return t.bosString;
      case "EOS":
        return t.eosString;
      case "EOT":
        return t.eotString;
      case "SEP":
        return t.sepString;
      case "NL":
        return t.nlString;
      default:
        return null;
    }
  }

  private tokenizePrompt(text: string, parts: PromptPart[] | undefined): number[] {
    const model = this.loaded.model;
    return tokenizePieces(piecesOf(text, parts), (t, special) => model.tokenize(t, special));
  }

  async start(prompt: PromptSpec, options: StartOptions = {}): Promise<Trajectory> {
    for (;;) {
      this.ensureOpen();
      if (this.reloading) {
        await this.reloading.catch(() => undefined);
        continue;
      }
      const loaded = this.loaded;
      const prefix = this.tokenizePrompt(prompt.prefix, prompt.parts?.prefix);
      const suffix = this.tokenizePrompt(prompt.suffix, prompt.parts?.suffix);
      const total = prefix.length + suffix.length;
      if (total === 0) throw new ReexError("POLICY_ERROR", "cannot start a trajectory from an empty prompt");
      if (total >= loaded.context.contextSize) {
        throw new ReexError("CONTEXT_EXHAUSTED", `the prompt has ${total} tokens; the context window holds ${loaded.context.contextSize} (prompt and output)`);
      }
      const seq = await this.acquire("wait", options.signal);
      if (!seq) continue;
      if (!this.isCurrent(loaded)) {
        if (!seq.disposed) await seq.dispose();
        continue;
      }
      const work = (async () => {
        try {
          const pending = await this.loadPrompt(seq, prefix, suffix);
          const trajectory = new LlamaTrajectory(this, seq, {
            id: this.nextTrajectoryId(),
            promptTokens: [...prefix, ...suffix],
            pending,
            record: { tokens: [], sampled: [], logprobs: [] },
            loaded,
            ...(this.drafting?.history ? { history: { scope: historyScope(prompt), write: options.remember !== false } } : {}),
          });
          await trajectory.settle();
          this.live.add(trajectory);
          return trajectory;
        } catch (err) {
          await this.releaseSequence(seq);
          throw wrap(err);
        }
      })();
      this.starting.add(work);
      try {
        return await work;
      } finally {
        this.starting.delete(work);
      }
    }
  }

  /** Fills `seq` with all but the last prompt token (from the prefix cache when possible); returns the tokens left to evaluate. */
  private async loadPrompt(seq: LlamaContextSequence, prefix: number[], suffix: number[]): Promise<number[]> {
    if (prefix.length < 2) return [...prefix, ...suffix];
    const head = prefix.slice(0, -1);
    const key = PrefixCache.key(head);
    for (;;) {
      const inflight = this.inflightPrefixes.get(key);
      if (!inflight) break;
      await inflight.catch(() => undefined);
    }
    const hit = this.cache.acquire(key);
    if (hit) {
      try {
        if (!(await copySequenceState(seq, hit.value))) await seq.evaluateWithoutGeneratingNewTokens(asTokens(head));
      } finally {
        hit.unpin();
      }
    } else {
      const work = (async () => {
        await seq.evaluateWithoutGeneratingNewTokens(asTokens(head));
        const spare = await this.spareForCache();
        if (!spare) return;
        if (await copySequenceState(spare, seq)) await this.cache.add(key, head, spare);
        else await this.releaseSequence(spare);
      })();
      this.inflightPrefixes.set(key, work);
      try {
        await work;
      } finally {
        this.inflightPrefixes.delete(key);
      }
    }
    return [prefix.at(-1)!, ...suffix];
  }

  /** A free sequence for a new cache entry, evicting the oldest entry when the cache is full; never waits. */
  private async spareForCache(): Promise<LlamaContextSequence | undefined> {
    if (!this.kvCopy || this.waiters.size > 0) return undefined;
    const max = this.options.maxCachedPrefixes ?? Math.max(1, Math.floor(this.loaded.context.totalSequences / 4));
    if (max <= 0) return undefined;
    if (this.cache.size >= max && !(await this.cache.evictOne())) return undefined;
    const context = this.loaded.context;
    if (context.sequencesLeft === 0) return undefined;
    preferSequenceIds(context, "high");
    return context.getSequence({ contextShift: { strategy: noContextShift } });
  }

  /** A sequence for a trajectory: free, or freed by evicting cached prefixes; else wait ("wait") or fail ("now"). Null: reloaded meanwhile, retry. */
  async acquire(mode: "wait" | "now", signal?: AbortSignal, parent?: number): Promise<LlamaContextSequence | null> {
    for (;;) {
      this.ensureOpen();
      if (signal?.aborted) throw new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal.reason });
      const context = this.loaded.context;
      if (context.sequencesLeft > 0 && (mode === "now" || this.waiters.size === 0)) {
        return trajectorySequence(context, parent);
      }
      if (await this.cache.evictOne()) continue;
      if (mode === "now") {
        throw new ReexError("CONTEXT_EXHAUSTED", `all ${context.totalSequences} sequences are held by live trajectories`);
      }
      return await this.waiters.wait(signal);
    }
  }

  /** Disposes a sequence and hands a fresh one to the first waiter. */
  async releaseSequence(seq: LlamaContextSequence): Promise<void> {
    if (!seq.disposed) await seq.dispose();
    this.handOutFree();
  }

  /** Hands free sequences to the waiters, first come first served, while both last. */
  private handOutFree(): void {
    const context = this.loaded.context;
    while (this.waiters.size > 0 && !context.disposed && context.sequencesLeft > 0) {
      this.waiters.handFirst(trajectorySequence(context));
    }
  }

  forgetTrajectory(t: LlamaTrajectory): void {
    this.live.delete(t);
  }

  nextTrajectoryId(): string {
    return `t${this.nextId++}`;
  }

  adoptTrajectory(t: LlamaTrajectory): void {
    this.live.add(t);
  }

  grammar(text: string) {
    return this.grammars.get(this.llama, text);
  }

  isCurrent(loaded: unknown): boolean {
    return !this.closed && loaded === this.loaded && !this.reloading;
  }

  private ensureOpen(): void {
    if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
  }

  async reload(options: { model?: string; lora?: string[] }): Promise<void> {
    this.ensureOpen();
    while (this.reloading) await this.reloading.catch(() => undefined);
    const run = this.doReload(options);
    this.reloading = run;
    try {
      await run;
    } finally {
      this.reloading = undefined;
      this.handOutFree();
    }
  }

  private async doReload(options: { model?: string; lora?: string[] }): Promise<void> {
    const old = this.loaded;
    const modelSource = options.model ?? old.modelSource;
    const modelPath = options.model !== undefined ? await resolveModel(options.model, this.options) : old.modelPath;
    const lora = options.lora !== undefined ? await resolveLora(options.lora) : old.lora;
    this.waiters.resolveAll(null);
    await this.dropAll();
    await old.context.dispose();
    if (modelPath === old.modelPath) {
      try {
        this.loaded = await loadContext(this.llama, old.model, modelPath, modelSource, lora, this.options);
      } catch (err) {
        this.loaded = await loadContext(this.llama, old.model, old.modelPath, old.modelSource, old.lora, this.options);
        throw err;
      }
      return;
    }
    let next: Loaded;
    try {
      next = await loadModelAndContext(this.llama, modelPath, modelSource, lora, this.options);
    } catch (err) {
      this.loaded = await loadContext(this.llama, old.model, old.modelPath, old.modelSource, old.lora, this.options);
      throw err;
    }
    await old.model.dispose();
    this.loaded = next;
  }

  /** Lets starts that hold a sequence finish, invalidates live trajectories (after their running calls) and empties the prefix cache. */
  private async dropAll(): Promise<void> {
    await Promise.allSettled([...this.starting]);
    const live = [...this.live];
    await Promise.all(live.map((t) => t.invalidate()));
    this.live.clear();
    await this.cache.clear();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    while (this.reloading) await this.reloading.catch(() => undefined);
    this.closed = true;
    this.waiters.rejectAll(new ReexError("SHUTTING_DOWN", "the policy is closing"));
    await this.dropAll();
    await this.loaded.context.dispose();
    await this.loaded.model.dispose();
  }
}

function wrap(err: unknown): ReexError {
  if (err instanceof ReexError) return err;
  return new ReexError("POLICY_ERROR", `llama.cpp failed: ${errorText(err)}`, { cause: err });
}

async function loadContext(
  llama: Llama,
  model: LlamaModel,
  modelPath: string,
  modelSource: string,
  lora: string[],
  options: LlamaPolicyOptions,
): Promise<Loaded> {
  const device = llama.gpu !== false && model.gpuLayers > 0 ? llama.gpu : "cpu";
  let context: LlamaContext;
  try {
    context = await model.createContext({
      contextSize: options.contextSize ?? 8192,
      sequences: options.sequences ?? 24,
      threads: options.threads ?? Math.max(1, availableParallelism() - 1),
      ...(options.batchSize !== undefined ? { batchSize: options.batchSize } : {}),
      flashAttention: options.flashAttention ?? (device === "cpu" ? false : "auto"),
      ...(lora.length > 0 ? { lora: { adapters: lora.map((filePath) => ({ filePath })) } } : {}),
    });
  } catch (err) {
    throw new ReexError(
      "MODEL_LOAD_FAILED",
      `could not create a context for ${modelSource}${lora.length ? ` with LoRA ${lora.join(", ")}` : ""}: ${errorText(err)}`,
      { cause: err },
    );
  }
  // KV copies and sequence frees run between decode batches instead of waiting for generation on
  // the whole context to pause (kv-schedule.ts); off on an unverified node-llama-cpp version.
  await enableScheduledKvOps(context);
  const steps = new StepBarrier(options.alignSteps !== false);
  if (options.directDecode !== false) enableDirectDecode(context, () => steps.generating);
  const endOfTurn = model.tokens.eotString ?? model.tokens.eosString ?? undefined;
  return { modelPath, modelSource, model, context, chat: pickChatWrapper(model), lora, device, endOfTurn, steps };
}

async function loadModelAndContext(llama: Llama, modelPath: string, modelSource: string, lora: string[], options: LlamaPolicyOptions): Promise<Loaded> {
  const problem = await ggufHeaderProblem(modelPath);
  if (problem) throw new ReexError("MODEL_LOAD_FAILED", `llama.cpp cannot load ${modelSource}: ${problem}`);
  let model: LlamaModel;
  try {
    model = await llama.loadModel({ modelPath });
  } catch (err) {
    throw new ReexError("MODEL_LOAD_FAILED", `llama.cpp could not load ${modelSource}: ${errorText(err)}`, { cause: err });
  }
  try {
    return await loadContext(llama, model, modelPath, modelSource, lora, options);
  } catch (err) {
    await model.dispose();
    throw err;
  }
}

/**
 * Loads a GGUF model (path or URI) into llama.cpp and returns it as a Policy. Fails with
 * MODEL_NOT_FOUND (no such file, URI not resolvable) or MODEL_LOAD_FAILED (llama.cpp refused it).
 */
export async function createLlamaPolicy(options: LlamaPolicyOptions): Promise<Policy> {
  const modelPath = await resolveModel(options.model, options);
  const lora = await resolveLora(options.lora ?? []);
  const llama = await llamaFor(options.gpu ?? "auto", options.logLevel ?? "error", options.logger);
  const loaded = await loadModelAndContext(llama, modelPath, options.model, lora, options);
  const support = await kvCopySupport();
  if (!support.verified) {
    const message = `reex: KV-copy forks were verified on node-llama-cpp 3.22.1; running ${support.version}${support.available ? "" : " without it (forks re-evaluate)"}`;
    if (options.logger) options.logger("warn", message);
    else console.warn(message);
  }
  return new LlamaPolicy(llama, loaded, options, support.available);
}

/** The GGUF's self-description, for profile detection. */
function modelMetadata(model: LlamaModel, source: string): ModelMetadata {
  const meta = model.fileInfo.metadata as { general?: Record<string, unknown>; tokenizer?: Record<string, unknown> };
  const text = (value: unknown): string | undefined => (typeof value === "string" && value.length > 0 ? value : undefined);
  const file = basename(source.replace(/^hf:/, ""));
  const found: ModelMetadata = {};
  const name = text(meta.general?.["name"]);
  const base = text(meta.general?.["basename"]);
  const finetune = text(meta.general?.["finetune"]);
  const template = text(meta.tokenizer?.["chat_template"]);
  if (name) found.name = name;
  if (base) found.basename = base;
  if (finetune) found.finetune = finetune;
  if (file) found.file = file;
  if (template) found.chatTemplate = template;
  return found;
}

/** The draft history's scope of a prompt: its shared prefix (system message and schema), else the whole prompt. */
function historyScope(prompt: PromptSpec): string {
  return createHash("sha256")
    .update(prompt.prefix.length > 0 ? prompt.prefix : `\u0000${prompt.suffix}`)
    .digest("base64");
}

/**
 * The direct decode step, on node-llama-cpp internals (verified against node-llama-cpp 3.22.1):
 * reex decodes the generating sequences of a context with its own batch step ({@link
 * enableDirectDecode}, {@link DirectDecoder}) instead of node-llama-cpp's `evaluate`, verifies
 * drafted tokens in the same decode, and samples with node-llama-cpp's native sampler. It is on
 * only where kv-schedule.ts's scheduled KV operations are (the verified version, its context lock
 * shared), and takes that same lock for each step.
 */
import type { LlamaContext, LlamaContextSequence, Token } from "node-llama-cpp";
import { StepCosts } from "./draft.js";
import { type LockApi, scheduledContextLock, sequenceIdOf } from "./kv-schedule.js";
import { MAX_REDRAWS, MAX_REFUSALS, type StepCost } from "./types.js";

/**
 * The `topK` that samples from the whole distribution without sorting it. node-llama-cpp turns
 * `topK: 0` into llama.cpp's top-k with k = the vocabulary size, which sorts every logit for every
 * sampled token (llama.cpp no longer skips k ≥ size): on a 152k vocabulary that cut one sequence's
 * generation to a third (bench/peer.ts). `null` passes node-llama-cpp's option defaults (only
 * `undefined` becomes 40) and is dropped before the native call, so top-k is left out of the chain.
 */
export const WHOLE_VOCABULARY_TOP_K = null as unknown as number;

/**
 * The `topK` for a token whose log-probability is wanted: node-llama-cpp sorts the candidates for
 * it anyway, and behind a grammar its own sort was 3× slower than llama.cpp's top-k sort over the
 * same candidates (1.1 s against 0.37 s a token on Gemma's 262k vocabulary), so the chain sorts.
 */
export const SORTED_WHOLE_VOCABULARY_TOP_K = 0;

/** A token sampled by {@link DirectSampling}: null when llama.cpp sampled none; its probability when asked for. */
export interface SampledToken {
  token: number | null;
  confidence?: number;
}

/** Tokens drafted to follow a step's token, verified in the same decode (see {@link DirectDecoder}). */
export interface Draft {
  tokens: number[];
  /**
   * Also sample the token after the last drafted one when all are accepted (its logits cost one more
   * token in the batch); false where nothing may follow the draft (it ends at a stop string). Default true.
   */
  bonus?: boolean;
}

/** What one step produced for a sequence: its sampled tokens and how its draft fared. */
export interface StepTokens {
  /**
   * The sampled tokens, in order: each drafted token the model sampled too, then the first token it
   * sampled differently (or after the draft). Every one but the last is evaluated into the sequence.
   */
  tokens: SampledToken[];
  /** Drafted tokens that were compared with a sample (the draft beyond the first mismatch is not). */
  compared: number;
  /** Drafted tokens the model sampled as drafted. */
  accepted: number;
  /** Tokens the step's batch evaluated for this sequence (rejected drafted ones included). */
  evaluated: number;
}

/** One generating sequence's next-token requests, decoded by its context's {@link DirectDecoder}. */
export interface DirectSampling {
  /**
   * Evaluates `token` at the sequence's next position and samples the token after it; with a draft,
   * evaluates the drafted tokens after it in the same batch and keeps those the model samples too.
   */
  next(token: number, draft?: Draft): Promise<StepTokens>;
  /** Frees the native sampler once the last request has settled. */
  dispose(): void;
  /** What the context's decode steps have cost, by the tokens they evaluated (for sizing drafts). */
  readonly costs: StepCosts;
  /** With `admit`: how its check went so far; undefined where it cannot be applied (no grammar, or bindings without grammar calls). */
  readonly admission?: Admission;
}

/** The sampling options {@link directSampling} passes to node-llama-cpp's own sampler config. */
export interface DirectSamplingOptions {
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
  grammarEvaluationState?: unknown;
  /** Return each token's probability. */
  confidence: boolean;
  /**
   * With a grammar: whether `token`, after the step's tokens `prefix`, may be drawn; a refused one
   * is drawn again without it (see {@link DirectSampling.admission}). Default none.
   */
  admit?: (prefix: readonly number[], token: number) => boolean;
  /** With `admit`: whether it could refuse the token after `prefix`; where it could not, the draw skips it. Default: always. */
  admitWatch?: (prefix: readonly number[]) => boolean;
}

/** How a sampler's `admit` check went: tokens drawn again, positions kept after every redraw was refused. */
export interface Admission {
  redrawn: number;
  fallbacks: number;
}

interface NativeBatchContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array;
  decodeBatch(): Promise<unknown>;
  sampleToken(batchLogitIndex: number, sampler: unknown, probabilities?: boolean, confidence?: boolean): Promise<unknown>;
  removeTokenCellsFromSequence(sequenceId: number, startPos: number, endPos: number): boolean;
}

/** The parts of a context the direct decode step uses, once checked by {@link enableDirectDecode} (its dispose guard by kv-schedule.ts). */
interface BatchContext {
  _ctx: NativeBatchContext;
  _batchSize: number;
  _backendContextDisposeGuard: { createPreventDisposalHandle(): { dispose(): void } };
}

interface NativeSampler {
  applyConfig(config: unknown): void;
  dispose(): void;
}

interface DirectSequence {
  _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  _loadedTokenPredictions: unknown[];
  _tokenPredictor?: unknown;
  _disposed: boolean;
  _resolveSamplerConfig(options: Record<string, unknown>): unknown;
  needsCheckpoints: boolean;
  tokenMeter: { useTokens(tokens: number, type: "input" | "output"): void };
  model: {
    _model?: unknown;
    _llama?: { _bindings?: { AddonSampler?: new (model: unknown) => NativeSampler; AddonGrammarEvaluationState?: new (existing: unknown) => unknown } };
    isEogToken?: (token: Token) => boolean;
  };
}

/** The native sampler's static grammar calls (node-llama-cpp's LlamaSampler uses them the same way). */
interface GrammarStatics {
  canBeNextTokenForGrammarEvaluationState(state: unknown, token: number): boolean;
  acceptGrammarEvaluationStateToken(state: unknown, token: number): void;
}

interface DirectRequest {
  seq: DirectSequence;
  token: number;
  draft: number[];
  bonus: boolean;
  sampler: NativeSampler;
  /**
   * Set where sampling is stateless (greedy, no grammar): the sampler for a drafted position, so
   * that verification samples every position at once instead of one native call after another.
   */
  samplerAt?: (position: number) => NativeSampler;
  confidence: boolean;
  /** Set where a grammar constrains sampling and probabilities are wanted (see {@link GrammarFirstDraw}). */
  grammarFirst?: GrammarFirstDraw;
  /** Set with `DirectSamplingOptions.admit` where a grammar is (see {@link DirectDecoder.drawAdmitted}). */
  admit?: {
    check: (prefix: readonly number[], token: number) => boolean;
    watch?: (prefix: readonly number[]) => boolean;
    admission: Admission;
    on: boolean;
  };
  resolve: (value: StepTokens) => void;
  reject: (err: unknown) => void;
}

/**
 * Sampling behind a grammar with token probabilities, drawing from the model first. node-llama-cpp
 * applies the grammar to the whole vocabulary before every draw whenever a probability is asked
 * for, where without one it draws first and applies the grammar only if the grammar refuses the
 * token drawn; the whole-vocabulary pass cost 1.5 ms of a constrained starter token's 3.9
 * (tree-prune with 4 candidates on the examples). This draws with `free` (the same chain without
 * the grammar), keeps the token where the grammar allows it and draws again with the grammar where
 * it does not: node-llama-cpp's own order without probabilities, so the same distribution.
 */
interface GrammarFirstDraw {
  free: NativeSampler;
  allows(token: number): boolean;
  accept(token: number): void;
  isEog(token: number): boolean;
  /** A sampler over a copy of the grammar state (the real one is left as it is) that never draws `banned`. */
  scratch(banned: readonly number[]): NativeSampler;
  /** `free` that never draws `banned` (no grammar: no whole-vocabulary pass). */
  freeWithout(banned: readonly number[]): NativeSampler;
  dispose(): void;
}

/**
 * Decodes the generating sequences of one context itself, one batch a step: each sequence's next
 * token goes into one llama.cpp batch, built and decoded under node-llama-cpp's context lock (so its
 * own dispatch loop, which still evaluates prompts and appended text, never interleaves), and every
 * sequence's next token is then sampled by node-llama-cpp's native sampler with the config
 * node-llama-cpp itself would build.
 *
 * Why: node-llama-cpp's `evaluate` wraps every generated token in a queued decode, a prioritisation
 * pass, an async generator, two locks and a copy of the sequence's whole token history; on the
 * starter that path ran 1.1–1.4× slower than the same native calls made directly (a scratch loop,
 * five interleaved rounds at 1 and 16 sequences; bench/peer.ts compares the two paths end to end).
 */
class DirectDecoder {
  /** The steps' wall time (decode and sampling) by the tokens they evaluated. */
  readonly costs = new StepCosts();
  private queue: DirectRequest[] = [];
  private running = false;
  private scheduled = false;

  constructor(
    private readonly context: BatchContext,
    private readonly lock: LockApi,
    private readonly generating: () => number,
  ) {}

  request(req: DirectRequest): void {
    this.queue.push(req);
    this.schedule();
  }

  /** Dispatches at once when every generating sequence has asked, else on the next turn of the event loop. */
  private schedule(): void {
    if (this.running || this.queue.length === 0) return;
    if (this.queue.length >= this.generating()) {
      this.scheduled = false;
      void this.dispatch();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      if (!this.scheduled) return;
      this.scheduled = false;
      if (!this.running && this.queue.length > 0) void this.dispatch();
    });
  }

  /**
   * One step per hold of the context lock: whoever queued for the lock meanwhile (node-llama-cpp's
   * dispatch of a prompt or appended text, a KV operation) goes before the next step.
   */
  private async dispatch(): Promise<void> {
    this.running = true;
    try {
      const handle = await this.lock.acquireLock([this.context, "context"]);
      const batch = this.queue.splice(0, Math.max(1, this.context._batchSize));
      try {
        await this.step(batch);
      } catch (err) {
        // a request already settled ignores this
        for (const req of batch) req.reject(err);
      } finally {
        handle.dispose();
      }
    } catch (err) {
      for (const req of this.queue.splice(0)) req.reject(err);
    } finally {
      this.running = false;
      this.schedule();
    }
  }

  /** One decode of `batch` (one token per sequence) and one sample per sequence. Holds the context lock. */
  private async step(batch: DirectRequest[]): Promise<void> {
    const live = batch.filter((req) => {
      if (!req.seq._disposed) return true;
      req.reject(new Error("the sequence was disposed"));
      return false;
    });
    if (live.length === 0) return;
    // llama.cpp's per-sequence KV streams take a batch as one ubatch only where its sequence ids
    // run consecutively upwards in batch order; any other order splits the step into several
    // graph computations (several reads of the weights).
    live.sort((a, b) => a.seq._sequenceId - b.seq._sequenceId);
    let guard: { dispose(): void };
    try {
      guard = this.context._backendContextDisposeGuard.createPreventDisposalHandle();
    } catch (err) {
      for (const req of live) req.reject(err);
      return;
    }
    try {
      const native = this.context._ctx;
      // a step's tokens fit one llama.cpp batch: drafts are cut (first the later sequences') to fit
      let room = Math.max(0, this.context._batchSize - live.length);
      const evals = live.map((req) => {
        const extra = Math.min(room, req.bonus ? req.draft.length : Math.max(0, req.draft.length - 1));
        room -= extra;
        if (extra < (req.bonus ? req.draft.length : req.draft.length - 1)) {
          req.draft = req.draft.slice(0, extra + 1);
          req.bonus = false;
        }
        return [req.token, ...req.draft.slice(0, extra)];
      });
      const size = evals.reduce((n, e) => n + e.length, 0);
      const t0 = performance.now();
      native.initBatch(size);
      const indexes = live.map((req, i) =>
        native.addToBatch(
          req.seq._sequenceId,
          req.seq._nextTokenIndex,
          Uint32Array.from(evals[i]!),
          Uint32Array.from(evals[i]!, (_, j) => j),
        ),
      );
      try {
        await native.decodeBatch();
      } catch (err) {
        for (const req of live) req.reject(err);
        return;
      }
      await Promise.all(
        live.map(async (req, i) => {
          try {
            req.resolve(await this.verify(req, evals[i]!, indexes[i]!));
          } catch (err) {
            req.reject(err);
          }
        }),
      );
      this.costs.observe(size, performance.now() - t0);
    } finally {
      guard.dispose();
    }
  }

  /**
   * One position behind the grammar and `req.admit`: draws from the model without the grammar and
   * keeps the token if both allow it, as {@link GrammarFirstDraw} does. A token either refuses is
   * banned and drawn again, first without the grammar ({@link FREE_REDRAWS} times), then with it on
   * a copy of its state, until `admit` takes one or {@link MAX_REDRAWS} of its refusals are spent
   * (then the last is kept and the check turned off for the rest of the call). Only the kept token
   * reaches the real grammar state.
   */
  private async drawAdmitted(req: DirectRequest, g: GrammarFirstDraw, index: number, prefix: readonly number[]): Promise<unknown> {
    const native = this.context._ctx;
    const admit = req.admit!;
    if (admit.watch && !admit.watch(prefix)) {
      // nothing here can be refused: the grammar-first draw alone
      const out = await native.sampleToken(index, g.free, false, req.confidence);
      const t = tokenOf(out);
      if (t != null && t !== -1 && g.allows(t)) {
        g.accept(t);
        return out;
      }
      return native.sampleToken(index, req.sampler, false, req.confidence);
    }
    const banned: number[] = [];
    let last: { out: unknown; token: number } | undefined;
    // a draw with the grammar needs a copy of its state (the native draw accepts what it draws) and a
    // whole-vocabulary pass: on the starter's schema grammar 15 ms against 0.5 for a free draw
    let free = true;
    let frees = 0;
    let refused = 0;
    for (;;) {
      free &&= frees <= FREE_REDRAWS;
      let out: unknown;
      let t: number | null | undefined;
      try {
        out = await native.sampleToken(index, !free ? g.scratch(banned) : banned.length > 0 ? g.freeWithout(banned) : g.free, false, req.confidence);
        t = tokenOf(out);
      } catch {
        // every token the grammar allows is refused: llama.cpp drew one it does not, and the copy of the state broke
        t = -1;
      }
      const drawn = t != null && t !== -1;
      // a draw on a copy of the grammar state is checked against the real state too: without
      // probabilities a copy was seen to let an end-of-generation token through mid-SQL
      const allowed = drawn && g.allows(t!);
      if (free) {
        frees++;
        if (!allowed) {
          if (drawn) banned.push(t!);
          else free = false;
          continue;
        }
      }
      if (!drawn || refused >= MAX_REDRAWS || admit.admission.redrawn >= MAX_REFUSALS) {
        // nothing more the grammar allows, or the redraws are spent: keep the last and stop checking
        const kept = drawn ? (allowed ? { out, token: t! } : undefined) : last;
        admit.admission.fallbacks++;
        admit.on = false;
        if (!kept) return native.sampleToken(index, req.sampler, false, req.confidence);
        g.accept(kept.token);
        return kept.out;
      }
      if (allowed && (g.isEog(t!) || admit.check(prefix, t!))) {
        g.accept(t!);
        return out;
      }
      banned.push(t!);
      refused++;
      if (!allowed) continue;
      admit.admission.redrawn++;
      last = { out, token: t! };
    }
  }

  /**
   * Samples `req`'s positions in order, one native sample each, as long as the model samples what
   * was drafted: a token sampled differently (or the one after the draft) ends the step. Since
   * each kept token is one draw of the sampler from the same logits a plain step would compute,
   * the tokens (and the sampler's random draws, grammar state and log-probabilities) are exactly
   * those of plain decoding: for a drafted token this is the standard rejection rule (accepted
   * with probability p(x), else a token drawn from p without x). Where sampling is stateless
   * (greedy, no grammar), every position is sampled at once, each with its own sampler: the same
   * tokens, without a native round trip per drafted token. The evaluated tokens after the last
   * kept one are taken back out of the KV cache.
   */
  private async verify(req: DirectRequest, evaluated: number[], indexes: Uint32Array): Promise<StepTokens> {
    const native = this.context._ctx;
    const seq = req.seq;
    const start = seq._nextTokenIndex;
    const tokens: SampledToken[] = [];
    let accepted = 0;
    const { grammarFirst } = req;
    const sample = async (i: number, sampler: NativeSampler): Promise<unknown> => {
      if (req.admit?.on && grammarFirst && sampler === req.sampler) return this.drawAdmitted(req, grammarFirst, indexes[i]!, req.draft.slice(0, i));
      if (!req.confidence) return native.sampleToken(indexes[i]!, sampler);
      if (grammarFirst && sampler === req.sampler) {
        const out = await native.sampleToken(indexes[i]!, grammarFirst.free, false, true);
        const token = Array.isArray(out) ? (out[0] as number | undefined) : (out as number | undefined);
        if (token != null && token !== -1 && grammarFirst.allows(token)) {
          grammarFirst.accept(token);
          return out;
        }
      }
      return native.sampleToken(indexes[i]!, sampler, false, true);
    };
    const { samplerAt } = req;
    const drawn = samplerAt && evaluated.length > 1 ? await Promise.all(evaluated.map((_, i) => sample(i, samplerAt(i)))) : undefined;
    for (let i = 0; i < evaluated.length; i++) {
      const out = drawn ? drawn[i] : await sample(i, req.sampler);
      const [token, , confidence] = Array.isArray(out) ? (out as [number, unknown, number?]) : [out as number];
      if (token === -1) throw new Error("Failed to sample next token");
      tokens.push({ token: token ?? null, ...(confidence !== undefined ? { confidence } : {}) });
      if (token == null || i >= req.draft.length || token !== req.draft[i]) break;
      accepted++;
    }
    const kept = tokens.length;
    if (kept < evaluated.length && !native.removeTokenCellsFromSequence(seq._sequenceId, start + kept, start + evaluated.length)) {
      throw new Error("could not take rejected drafted tokens out of the KV cache");
    }
    seq._nextTokenIndex += kept;
    for (let i = 0; i < kept; i++) seq._contextTokens.push(evaluated[i] as Token);
    seq.tokenMeter.useTokens(evaluated.length, "output");
    return { tokens, compared: Math.min(req.draft.length, accepted + 1), accepted, evaluated: evaluated.length };
  }
}

/** The first token of a native sample's output. */
function tokenOf(out: unknown): number | null | undefined {
  return Array.isArray(out) ? (out[0] as number | null | undefined) : (out as number | null | undefined);
}

const decoders = new WeakMap<object, DirectDecoder>();

function directSequence(seq: LlamaContextSequence): DirectSequence | undefined {
  const s = seq as unknown as Partial<DirectSequence>;
  if (
    // the checks of a KV copy's sequence (kv-schedule.ts), and more
    sequenceIdOf(seq) === undefined ||
    typeof s._disposed !== "boolean" ||
    typeof s._resolveSamplerConfig !== "function" ||
    s.needsCheckpoints !== false ||
    s._tokenPredictor != null ||
    typeof s.tokenMeter?.useTokens !== "function" ||
    typeof s.model?._llama?._bindings?.AddonSampler !== "function" ||
    s.model._model == null
  ) {
    return undefined;
  }
  return s as DirectSequence;
}

/** The direct decode step's measured wall time by step size (see {@link StepCosts}); undefined where that path is off. */
export function decodeStepCosts(context: LlamaContext): StepCost[] | undefined {
  return decoders.get(context)?.costs.table();
}

/**
 * Lets `context`'s generating sequences be decoded by reex's own batch step (see {@link DirectDecoder})
 * instead of node-llama-cpp's `evaluate`. `generating` counts the sequences generating now, so a
 * step starts as soon as all of them have asked. Only where {@link enableScheduledKvOps} is on (the
 * verified node-llama-cpp version, its lock shared); returns whether it is on.
 */
export function enableDirectDecode(context: LlamaContext, generating: () => number): boolean {
  if (decoders.has(context)) return true;
  const lock = scheduledContextLock(context);
  const c = context as unknown as { _ctx?: Partial<NativeBatchContext>; _batchSize?: unknown };
  if (
    lock === undefined ||
    typeof c._ctx?.initBatch !== "function" ||
    typeof c._ctx.addToBatch !== "function" ||
    typeof c._ctx.sampleToken !== "function" ||
    typeof c._batchSize !== "number"
  ) {
    return false;
  }
  decoders.set(context, new DirectDecoder(context as unknown as BatchContext, lock, generating));
  return true;
}

/**
 * A generating sequence's sampler on its context's direct decode path, with the sampler config
 * node-llama-cpp's `evaluate` builds from the same options; undefined where that path is off or
 * this sequence cannot take it (a model that needs KV checkpoints, a token predictor), and the
 * caller uses `evaluate`. The sequence must have no evaluation of its own running meanwhile.
 */
export function directSampling(seq: LlamaContextSequence, options: DirectSamplingOptions): DirectSampling | undefined {
  const decoder = decoders.get(seq.context);
  const s = directSequence(seq);
  if (!decoder || !s) return undefined;
  const config = s._resolveSamplerConfig({
    temperature: options.temperature,
    minP: 0,
    topK: options.topK,
    topP: options.topP,
    seed: options.seed,
    grammarEvaluationState: options.grammarEvaluationState,
  });
  const Sampler = s.model._llama!._bindings!.AddonSampler!;
  const sampler = new Sampler(s.model._model);
  sampler.applyConfig(config);
  // greedy without a grammar keeps no state between draws: one sampler per drafted position
  const stateless = options.temperature <= 0 && options.grammarEvaluationState == null;
  const grammarFirst = options.confidence || options.admit ? grammarFirstDraw(s, config, Sampler) : undefined;
  const admit =
    options.admit && grammarFirst
      ? { check: options.admit, ...(options.admitWatch ? { watch: options.admitWatch } : {}), admission: { redrawn: 0, fallbacks: 0 }, on: true }
      : undefined;
  const extra: NativeSampler[] = [];
  const samplerAt = (position: number): NativeSampler => {
    if (position === 0) return sampler;
    while (extra.length < position) {
      const more = new Sampler(s.model._model);
      more.applyConfig(config);
      extra.push(more);
    }
    return extra[position - 1]!;
  };
  let pending = Promise.resolve();
  let disposed = false;
  return {
    costs: decoder.costs,
    ...(admit ? { admission: admit.admission } : {}),
    next(token, draft) {
      const result = new Promise<StepTokens>((resolve, reject) => {
        if (disposed) throw new Error("the sampler was disposed");
        const tokens = draft?.tokens ?? [];
        decoder.request({
          seq: s,
          token,
          draft: tokens,
          bonus: tokens.length === 0 || draft?.bonus !== false,
          sampler,
          ...(stateless ? { samplerAt } : {}),
          confidence: options.confidence,
          ...(grammarFirst ? { grammarFirst } : {}),
          ...(admit ? { admit } : {}),
          resolve,
          reject,
        });
      });
      pending = result.then(
        () => undefined,
        () => undefined,
      );
      return result;
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      void pending.then(() => {
        sampler.dispose();
        grammarFirst?.dispose();
        for (const more of extra) more.dispose();
      });
    },
  };
}

/** The {@link GrammarFirstDraw} for a sampler `config` that holds a grammar; undefined where it holds none or the bindings lack the grammar calls. */
function grammarFirstDraw(
  s: DirectSequence,
  config: unknown,
  Sampler: NonNullable<NonNullable<DirectSequence["model"]["_llama"]>["_bindings"]>["AddonSampler"] & object,
): GrammarFirstDraw | undefined {
  const state = (config as { grammarEvaluationState?: unknown }).grammarEvaluationState;
  const statics = Sampler as unknown as Partial<GrammarStatics>;
  if (
    state == null ||
    typeof statics.canBeNextTokenForGrammarEvaluationState !== "function" ||
    typeof statics.acceptGrammarEvaluationStateToken !== "function" ||
    typeof s.model.isEogToken !== "function"
  ) {
    return undefined;
  }
  const { grammarEvaluationState: _, ...rest } = config as Record<string, unknown>;
  const free = new Sampler(s.model._model);
  free.applyConfig(rest);
  const isEog = (token: number) => s.model.isEogToken!(token as Token);
  const States = s.model._llama?._bindings?.AddonGrammarEvaluationState;
  let scratch: NativeSampler | undefined;
  let freeScratch: NativeSampler | undefined;
  return {
    free,
    allows: (token) => statics.canBeNextTokenForGrammarEvaluationState!(state, token),
    // the native sampler's own accept skips end-of-generation tokens
    accept: (token) => {
      if (!isEog(token)) statics.acceptGrammarEvaluationStateToken!(state, token);
    },
    isEog,
    scratch: (banned) => {
      if (!States) throw new Error("these llama.cpp bindings cannot copy a grammar state");
      scratch ??= new Sampler(s.model._model);
      scratch.applyConfig({ ...rest, ...banning(rest, banned), grammarEvaluationState: new States(state) });
      return scratch;
    },
    freeWithout: (banned) => {
      freeScratch ??= new Sampler(s.model._model);
      freeScratch.applyConfig({ ...rest, ...banning(rest, banned) });
      return freeScratch;
    },
    dispose: () => {
      free.dispose();
      scratch?.dispose();
      freeScratch?.dispose();
    },
  };
}

/** Draws again without the grammar, after the first, before one with it (see {@link DirectDecoder.drawAdmitted}). */
const FREE_REDRAWS = 4;

/** A sampler config's token biases with `banned` added at -inf (its own biases kept). */
function banning(config: Record<string, unknown>, banned: readonly number[]): { tokenBiasKeys?: Uint32Array; tokenBiasValues?: Float32Array } {
  if (banned.length === 0) return {};
  const keys = (config.tokenBiasKeys as Uint32Array | undefined) ?? new Uint32Array(0);
  const values = (config.tokenBiasValues as Float32Array | undefined) ?? new Float32Array(0);
  const tokenBiasKeys = new Uint32Array(keys.length + banned.length);
  tokenBiasKeys.set(keys);
  tokenBiasKeys.set(banned, keys.length);
  const tokenBiasValues = new Float32Array(values.length + banned.length).fill(-Infinity);
  tokenBiasValues.set(values);
  return { tokenBiasKeys, tokenBiasValues };
}

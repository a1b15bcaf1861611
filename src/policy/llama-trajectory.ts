/**
 * One trajectory of the llama.cpp policy: a context sequence plus the tokens not yet evaluated into
 * it. The last known token is always kept pending (unevaluated) so that the next generate call has
 * a token whose logits it computes; this is also what lets a fork share the KV state exactly.
 */
import { randomInt } from "node:crypto";
import { LlamaGrammarEvaluationState, type LlamaContextSequence, type LlamaGrammar, type LlamaModel, type Token } from "node-llama-cpp";
import { ReexError } from "../errors/index.js";
import { type DraftingState, type HistoryScopeOptions, NgramDrafter } from "./draft.js";
import {
  directSampling,
  SORTED_WHOLE_VOCABULARY_TOP_K,
  WHOLE_VOCABULARY_TOP_K,
  type DirectSamplingOptions,
  type Draft,
  type SampledToken,
  type StepTokens,
} from "./direct-decode.js";
import { asTokens, beginSequenceCopy, sequenceIdOf } from "./kv-schedule.js";
import type { StepBarrier } from "./steps.js";
import { emptyResult, IncrementalText, samplingSettings, StopMatcher } from "./stop.js";
import type { GenerateOptions, GenerateResult, StopReason, TokenRecord, TokenUsage, Trajectory } from "./types.js";

/** What a trajectory needs from its policy. */
export interface TrajectoryHost {
  readonly kvCopy: boolean;
  grammar(text: string): Promise<LlamaGrammar>;
  /** A free sequence; a fork passes its parent's sequence id, to sit beside its siblings. */
  acquire(mode: "wait" | "now", signal?: AbortSignal, parent?: number): Promise<LlamaContextSequence | null>;
  releaseSequence(seq: LlamaContextSequence): Promise<void>;
  forgetTrajectory(t: LlamaTrajectory): void;
  adoptTrajectory(t: LlamaTrajectory): void;
  nextTrajectoryId(): string;
  isCurrent(loaded: unknown): boolean;
  /** How generated tokens are drafted (speculative decoding); undefined: they are not. */
  readonly drafting: DraftingState | undefined;
}

/** The state a trajectory starts with. */
export interface TrajectoryInit {
  id: string;
  promptTokens: readonly number[];
  pending: number[];
  record: TokenRecord;
  loaded: { model: LlamaModel; steps: StepBarrier };
  /**
   * Settles once the sequence holds the state the trajectory starts from (a fork's KV copy still
   * under way); calls on the trajectory wait for it, and a rejection makes them fail. Default: ready.
   */
  ready?: Promise<void>;
  /** The parent's drafter, for a fork. Default: a new one. */
  drafter?: NgramDrafter;
  /** Where the drafter reads and remembers earlier trajectories' text. Default: nowhere. */
  history?: HistoryScopeOptions;
}

const MIN_LOGPROB = Math.log(1e-45);

/** A trajectory backed by one llama.cpp sequence. */
export class LlamaTrajectory implements Trajectory {
  readonly id: string;
  readonly promptTokens: readonly number[];
  readonly record: TokenRecord;
  private pending: number[];
  private readonly loaded: { model: LlamaModel; steps: StepBarrier };
  private generated = 0;
  private drafted = 0;
  private accepted = 0;
  private passesSaved = 0;
  private drafterState: NgramDrafter | undefined;
  private readonly history: HistoryScopeOptions | undefined;
  private evaluatedAtRelease: number | undefined;
  private released = false;
  private invalid = false;
  private broken: unknown;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly host: TrajectoryHost,
    private readonly seq: LlamaContextSequence,
    init: TrajectoryInit,
  ) {
    this.id = init.id;
    this.promptTokens = init.promptTokens;
    this.pending = init.pending;
    this.record = init.record;
    this.loaded = init.loaded;
    this.drafterState = init.drafter?.fork(this.record.tokens);
    this.history = init.history;
    if (init.ready) {
      this.tail = init.ready.catch((err: unknown) => {
        this.broken = err instanceof Error ? err.message : err;
      });
    }
  }

  get usage(): TokenUsage {
    return {
      promptTokens: this.promptTokens.length,
      evaluatedTokens: this.evaluatedAtRelease ?? this.meterCount(),
      generatedTokens: this.generated,
      ...(this.host.drafting ? { draftedTokens: this.drafted, acceptedTokens: this.accepted, forwardPassesSaved: this.passesSaved } : {}),
    };
  }

  /** This trajectory's drafter, made on first use; undefined when drafting is off. */
  private get drafter(): NgramDrafter | undefined {
    if (!this.host.drafting) return undefined;
    this.drafterState ??= new NgramDrafter(this.promptTokens, this.record.tokens, this.host.drafting, this.history);
    return this.drafterState;
  }

  private meterCount(): number {
    const meter = this.seq.tokenMeter;
    return meter.usedInputTokens + meter.usedOutputTokens;
  }

  private get model(): LlamaModel {
    return this.loaded.model;
  }

  /** Runs calls on this trajectory one at a time, in order. */
  private run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(() => {
      this.ensureUsable();
      return fn();
    });
    this.tail = result.catch(() => undefined);
    return result;
  }

  private ensureUsable(): void {
    if (this.released) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} was released`);
    if (this.invalid || !this.host.isCurrent(this.loaded))
      throw new ReexError("POLICY_ERROR", `trajectory ${this.id} belongs to a model that was reloaded or closed`);
    if (this.broken) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} failed earlier: ${String(this.broken)}`, { cause: this.broken });
  }

  private fail(err: unknown): ReexError {
    if (err instanceof ReexError) return err;
    this.broken = err instanceof Error ? err.message : err;
    return new ReexError("POLICY_ERROR", `llama.cpp failed in trajectory ${this.id}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }

  /** Tokens that can still be evaluated after the pending ones (node-llama-cpp keeps one cell spare). */
  private room(): number {
    return this.seq.contextSize - 1 - this.seq.nextTokenIndex - this.pending.length;
  }

  /** Evaluates all pending tokens but the last one. */
  async settle(): Promise<void> {
    if (this.pending.length <= 1) return;
    const head = this.pending.slice(0, -1);
    await this.seq.evaluateWithoutGeneratingNewTokens(asTokens(head));
    this.pending = this.pending.slice(-1);
  }

  /** Makes sure one token is pending, taking the last evaluated one back out of the KV cache if needed. */
  private async ensurePending(): Promise<void> {
    if (this.pending.length > 0) return;
    const n = this.seq.nextTokenIndex;
    const last = this.seq.contextTokens.at(-1);
    if (n === 0 || last === undefined) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} has no tokens to continue from`);
    await this.seq.eraseContextTokenRanges([{ start: n - 1, end: n }]);
    this.pending = [last];
  }

  generate(options: GenerateOptions): Promise<GenerateResult> {
    return this.run(async () => {
      const { temperature, topP } = samplingSettings(options);
      if (options.signal?.aborted) return emptyResult("aborted");
      // counted as generating before the first await: forks whose KV copies complete together
      // (the scheduler settles a drain's operations at once) then line up from their first step
      const steps = this.loaded.steps;
      steps.enter();
      let counted = true;
      const leave = (): void => {
        if (counted) steps.leave();
        counted = false;
      };
      try {
        return await this.generateEntered(options, temperature, topP, steps, leave);
      } finally {
        leave();
      }
    });
  }

  /** The direct path's token source: drafts (when drafting is on) verified in the shared decode step, tokens sampled past a stop erased afterwards. */
  private draftingSource(
    direct: NonNullable<ReturnType<typeof directSampling>>,
    options: GenerateOptions,
    steps: StepBarrier,
    call: { limit: number; tokens: number[]; text: IncrementalText },
  ): { next: () => Promise<SampledToken>; finish: () => Promise<void> } {
    const { limit, tokens, text } = call;
    const model = this.model;
    /** Sampled tokens of the last step not consumed yet (a step yields several when its draft is accepted). */
    let queued: SampledToken[] = [];
    let fromStep = 0;
    let stepAccepted = 0;
    const drafter = this.drafter;
    const longestStop = options.stop.reduce((m, x) => Math.max(m, x.length), 0);
    const pieces = new Map<number, string>();
    const piece = (t: number): string => {
      let p = pieces.get(t);
      if (p === undefined) pieces.set(t, (p = model.detokenize(asTokens([t]), false)));
      return p;
    };
    /** A draft that ends where this call must stop: at a stop string's last token, or an end-of-turn token. */
    const draftNow = (): Draft | undefined => {
      if (!drafter) return undefined;
      const draft = drafter.draft(Math.min(limit - tokens.length - 1, this.room()), steps.generating, direct.costs);
      if (draft.length === 0) return undefined;
      let seen = longestStop > 1 ? text.text.slice(-(longestStop - 1)) : "";
      for (let i = 0; i < draft.length; i++) {
        const t = draft[i]!;
        if (model.isEogToken(t as Token)) {
          if (!options.ignoreEos) return { tokens: draft.slice(0, i + 1), bonus: false };
          continue;
        }
        if (longestStop === 0) continue;
        seen += piece(t);
        if (options.stop.some((x) => x.length > 0 && seen.includes(x))) return { tokens: draft.slice(0, i + 1), bonus: false };
        seen = seen.slice(-(longestStop - 1));
      }
      return { tokens: draft };
    };
    const next = async (): Promise<SampledToken> => {
      if (queued.length === 0) {
        const lined = steps.arrive();
        if (lined) await lined;
        const draft = draftNow();
        this.drafted += draft?.tokens.length ?? 0;
        const step: StepTokens = await direct.next(this.pending[0]!, draft);
        if (step.compared > 0) drafter?.observe(step.compared, step.accepted);
        queued = step.tokens;
        fromStep = 0;
        stepAccepted = step.accepted;
      }
      if (fromStep > 0) this.passesSaved++;
      if (fromStep < stepAccepted) this.accepted++;
      fromStep++;
      return queued.shift()!;
    };
    const finish = async (): Promise<void> => {
      direct.dispose();
      // tokens a step sampled past where this call stopped: out of the KV cache, as if never drafted
      if (queued.length > 0) {
        const end = this.seq.nextTokenIndex;
        const extra = queued.length;
        queued = [];
        try {
          await this.seq.eraseContextTokenRanges([{ start: end - extra, end }]);
        } catch (err) {
          this.broken = err instanceof Error ? err.message : err;
        }
      }
    };
    return { next, finish };
  }

  private async generateEntered(options: GenerateOptions, temperature: number, topP: number, steps: StepBarrier, leave: () => void): Promise<GenerateResult> {
    try {
      await this.ensurePending();
    } catch (err) {
      throw this.fail(err);
    }
    const limit = Math.min(options.maxTokens, this.room() + 1);
    if (limit <= 0) return emptyResult("maxTokens");
    const grammar = options.grammar !== undefined ? await this.host.grammar(options.grammar) : undefined;
    const model = this.model;
    const grammarEvaluationState = grammar ? new LlamaGrammarEvaluationState({ model, grammar }) : undefined;
    const recorded = this.record.tokens;
    const before = recorded.length >= 8 ? recorded.slice(-8) : [...this.promptTokens.slice(-(8 - recorded.length)), ...recorded];
    const text = new IncrementalText((tokens, last) => model.detokenize(asTokens(tokens), false, asTokens(last.length ? last : before)));
    const stops = new StopMatcher(options.stop);
    // the text is only needed per token to find stop strings or to stream it; else it is decoded once at the end
    const check = options.admit && grammarEvaluationState ? options.admit : undefined;
    const perToken = options.onText !== undefined || options.stop.some((x) => x.length > 0) || check !== undefined;
    const tokens: number[] = [];
    const logprobs: number[] = [];
    const textTokens: number[] = [];
    let emitted = 0;
    let stopReason: StopReason = "maxTokens";
    let stop: string | undefined;
    const withLogprobs = options.logprobs !== false;
    const sampling = {
      temperature,
      topK: withLogprobs ? SORTED_WHOLE_VOCABULARY_TOP_K : WHOLE_VOCABULARY_TOP_K,
      topP,
      seed: options.seed ?? randomInt(0, 2 ** 32),
      ...(grammarEvaluationState ? { grammarEvaluationState } : {}),
    };
    let next: () => Promise<SampledToken>;
    let finish: () => Promise<unknown>;
    const direct = directSampling(this.seq, { ...sampling, confidence: withLogprobs, ...this.admission(check && options, text, textTokens) });
    if (direct) {
      try {
        await this.settle();
      } catch (err) {
        direct.dispose();
        throw this.fail(err);
      }
      ({ next, finish } = this.draftingSource(direct, options, steps, { limit, tokens, text }));
    } else {
      const generator = this.seq.evaluateWithMetadata(asTokens(this.pending), { confidence: withLogprobs }, { ...sampling, yieldEogToken: true });
      next = async () => {
        const lined = steps.arrive();
        if (lined) await lined;
        const step = await generator.next();
        return step.done ? { token: null } : { token: step.value.token, ...(step.value as { confidence?: number }) };
      };
      finish = () => generator.return();
    }
    try {
      for (;;) {
        if (options.signal?.aborted) {
          stopReason = "aborted";
          break;
        }
        const { token, confidence } = await next();
        if (token === null) {
          this.pending = [];
          stopReason = "eos";
          break;
        }
        this.pending = [token];
        const logprob = confidence !== undefined ? Math.max(Math.log(confidence), MIN_LOGPROB) : NaN;
        tokens.push(token);
        logprobs.push(logprob);
        this.record.tokens.push(token);
        this.record.sampled.push(1);
        this.record.logprobs.push(logprob);
        this.generated++;
        if (model.isEogToken(token as Token)) {
          if (!options.ignoreEos) {
            stopReason = "eos";
            break;
          }
          if (tokens.length >= limit) break;
          continue;
        }
        textTokens.push(token);
        if (!perToken) {
          if (tokens.length >= limit) break;
          continue;
        }
        const stable = text.push(token);
        if (stable.length > emitted) {
          options.onText?.(stable.slice(emitted));
          emitted = stable.length;
        }
        const matched = stops.match(stable);
        if (matched) {
          stopReason = "stop";
          stop = matched.stop;
          break;
        }
        if (tokens.length >= limit) break;
      }
    } catch (err) {
      throw this.fail(err);
    } finally {
      leave();
      await finish().catch(() => undefined);
      this.drafterState?.remember();
    }
    const full = model.detokenize(asTokens(textTokens), false, asTokens(before));
    if (full.length > emitted) options.onText?.(full.slice(emitted));
    const admission = options.admit ? direct?.admission : undefined;
    const admitted = !options.admit
      ? {}
      : admission
        ? { admitted: admission.fallbacks > 0 ? ("fallback" as const) : ("decoder" as const), redrawn: admission.redrawn }
        : { admitted: "unavailable" as const };
    return { text: full, tokens, logprobs, stopReason, ...(stop !== undefined ? { stop } : {}), ...admitted };
  }

  /** `options.admit` and `admitWatch` as the direct path asks them: the segment's text so far, then a step's earlier tokens (and a candidate) after it. */
  private admission(
    options: GenerateOptions | undefined,
    text: IncrementalText,
    textTokens: readonly number[],
  ): Pick<DirectSamplingOptions, "admit" | "admitWatch"> {
    const check = options?.admit;
    if (!check) return {};
    const model = this.model;
    const after = (tokens: readonly number[]): string => {
      const kept = tokens.filter((t) => !model.isEogToken(t as Token));
      return text.text + (kept.length > 0 ? model.detokenize(asTokens(kept), false, asTokens(textTokens.slice(-8))) : "");
    };
    const watch = options.admitWatch;
    return {
      admit: (prefix, token) => check(after([...prefix, token])),
      ...(watch ? { admitWatch: (prefix: readonly number[]) => watch(after(prefix)) } : {}),
    };
  }

  append(text: string): Promise<{ tokens: number[] }> {
    return this.run(async () => {
      const tokens = this.model.tokenize(text, false);
      if (tokens.length === 0) return { tokens };
      if (tokens.length > this.room()) {
        throw new ReexError("CONTEXT_EXHAUSTED", `appending ${tokens.length} tokens would overflow the context window (${this.room()} left)`);
      }
      this.pending.push(...tokens);
      for (const t of tokens) {
        this.record.tokens.push(t);
        this.record.sampled.push(0);
        this.record.logprobs.push(0);
      }
      try {
        await this.settle();
      } catch (err) {
        throw this.fail(err);
      }
      return { tokens };
    });
  }

  rewind(length: number): Promise<void> {
    return this.run(async () => {
      const n = this.record.tokens.length;
      if (!Number.isInteger(length) || length < 0 || length > n)
        throw new ReexError("INTERNAL", `cannot rewind trajectory ${this.id} to ${length} of ${n} tokens`);
      if (length === n) return;
      const all = [...this.promptTokens, ...this.record.tokens];
      const keep = this.promptTokens.length + length;
      // the last kept token stays pending, as after any call (see the class doc)
      const evaluated = this.seq.nextTokenIndex;
      const from = Math.min(keep - 1, evaluated);
      try {
        if (from < evaluated) await this.seq.eraseContextTokenRanges([{ start: from, end: evaluated }]);
      } catch (err) {
        throw this.fail(err);
      }
      this.pending = all.slice(from, keep);
      this.record.tokens.length = length;
      this.record.sampled.length = length;
      this.record.logprobs.length = length;
      if (this.drafterState) this.drafterState = this.drafterState.fork(this.record.tokens);
    });
  }

  /**
   * With the scheduled KV copy (see kv-schedule.ts) the child is returned before its copy has run: the
   * copy is ordered before any later decode, so this trajectory may go on at once, and the child's
   * own calls wait for the copy (re-evaluating the tokens if it failed).
   */
  fork(): Promise<Trajectory> {
    return this.run(async () => {
      const seq = await this.host.acquire("now", undefined, sequenceIdOf(this.seq));
      if (!seq) throw new ReexError("POLICY_ERROR", "the policy was reloaded during fork");
      let ready: Promise<void> | undefined;
      try {
        const tokens = this.seq.contextTokens;
        const reevaluate = async (copied: boolean): Promise<void> => {
          if (!copied && tokens.length > 0) await seq.evaluateWithoutGeneratingNewTokens(tokens);
        };
        if (this.host.kvCopy) {
          const copy = beginSequenceCopy(seq, this.seq);
          const finished = copy.done.then(reevaluate);
          if (copy.ordered) ready = finished;
          else await finished;
        } else {
          await reevaluate(false);
        }
      } catch (err) {
        await this.host.releaseSequence(seq);
        throw err instanceof ReexError ? err : new ReexError("POLICY_ERROR", `fork failed: ${String(err)}`, { cause: err });
      }
      const child = new LlamaTrajectory(this.host, seq, {
        id: this.host.nextTrajectoryId(),
        promptTokens: this.promptTokens,
        pending: [...this.pending],
        record: { tokens: [...this.record.tokens], sampled: [...this.record.sampled], logprobs: [...this.record.logprobs] },
        loaded: this.loaded,
        ...(ready ? { ready } : {}),
        ...(this.drafterState ? { drafter: this.drafterState } : {}),
        ...(this.history ? { history: this.history } : {}),
      });
      this.host.adoptTrajectory(child);
      return child;
    });
  }

  release(): Promise<void> {
    const done = this.tail.then(async () => {
      if (this.released) return;
      this.released = true;
      this.drafterState?.remember();
      this.evaluatedAtRelease = this.meterCount();
      this.host.forgetTrajectory(this);
      if (this.invalid) return;
      await this.host.releaseSequence(this.seq);
    });
    this.tail = done.catch(() => undefined);
    return done;
  }

  /** Called by the policy on reload/close: waits for the running call, then frees the sequence without handing it on. */
  async invalidate(): Promise<void> {
    await this.tail;
    if (this.invalid) return;
    this.invalid = true;
    if (this.evaluatedAtRelease === undefined) this.evaluatedAtRelease = this.meterCount();
    if (!this.seq.disposed) await this.seq.dispose();
  }
}

/**
 * What one decode holds and spends: sequence slots (never more live trajectories than the policy
 * has sequences), the request-wide token budget, the deadline and cancellation, and every
 * trajectory it started or forked, so that all of them are released and their usage summed once.
 */
import { setMaxListeners } from "node:events";
import { ReexError, toReexError } from "../errors/index.js";
import type { GenerateOptions, GenerateResult, Policy, PromptSpec, TokenRecord, TokenUsage, Trajectory } from "../policy/index.js";

/** Why a decode stopped early: its caller cancelled, its deadline passed, its token budget ran out, or a part of it failed. */
export type StopCause = "cancelled" | "deadline" | "budget" | "failed";

/** Limits of one decode. */
export interface ControlOptions {
  /** Live trajectories at most (the policy's sequences). */
  maxLive: number;
  /** Generated tokens over all trajectories at most; default unlimited. */
  maxTotalTokens?: number;
  /** Wall-clock limit from construction, ms; default none. */
  deadlineMs?: number;
  /** The caller's cancellation. */
  signal?: AbortSignal;
  /** Clock, ms. Default performance.now. */
  now?: () => number;
}

/** Abort listeners one live trajectory may hold on a decode's signals at once (its query, its generation, slack). */
const LISTENERS_PER_TRAJECTORY = 4;

interface SlotWaiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The slots, budget, stop signals and trajectories of one decode. */
export class RequestControl {
  /** Aborted on any stop: cancellation, deadline or spent budget. Generation and probes listen to it. */
  readonly signal: AbortSignal;
  /** Aborted on cancellation or deadline only: final-SQL executions listen to it (the token budget does not stop them). */
  readonly execSignal: AbortSignal;
  /** The first reason the decode stopped; null while it runs. */
  cause: StopCause | null = null;
  /** Clock reading at construction. */
  readonly startedAt: number;
  private firstTokenAt: number | undefined;
  private generated = 0;
  private cancelled = false;
  private readonly stopAll = new AbortController();
  private readonly stopExec = new AbortController();
  private readonly now: () => number;
  private readonly maxTotal: number;
  private held = 0;
  private readonly waiters: SlotWaiter[] = [];
  private releaseListeners: (() => void)[] = [];
  private readonly tracked = new Set<TrackedTrajectory>();
  private readonly totals: TokenUsage = { promptTokens: 0, evaluatedTokens: 0, generatedTokens: 0 };
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onCallerAbort: (() => void) | undefined;

  constructor(private readonly options: ControlOptions) {
    this.now = options.now ?? (() => performance.now());
    this.startedAt = this.now();
    this.maxTotal = options.maxTotalTokens ?? Infinity;
    this.signal = this.stopAll.signal;
    this.execSignal = this.stopExec.signal;
    // every live trajectory's probe and final query listens to these at once: 16 candidates tripped
    // Node's leak warning (10 listeners) on every decode; a real leak still passes this bound
    setMaxListeners(Math.max(10, LISTENERS_PER_TRAJECTORY * options.maxLive), this.signal, this.execSignal);
    const caller = options.signal;
    if (caller) {
      this.onCallerAbort = () => this.stop("cancelled");
      if (caller.aborted) this.onCallerAbort();
      else caller.addEventListener("abort", this.onCallerAbort, { once: true });
    }
    if (options.deadlineMs !== undefined) {
      this.timer = setTimeout(() => this.stop("deadline"), Math.max(0, options.deadlineMs));
      this.timer.unref?.();
    }
    if (this.maxTotal <= 0) this.stop("budget");
  }

  /** True once anything stopped the decode. */
  get stopped(): boolean {
    return this.cause !== null;
  }

  /** True once the caller cancelled (even after another stop). */
  isCancelled(): boolean {
    return this.cancelled;
  }

  get maxLive(): number {
    return Math.max(1, Math.floor(this.options.maxLive));
  }

  /** Stops every live sequence (first cause wins); cancellation and the deadline also stop final-SQL executions. */
  stop(cause: StopCause): void {
    if (cause === "cancelled") this.cancelled = true;
    if (this.cause === null) this.cause = cause;
    if (cause !== "budget") this.stopExec.abort(this.reason(cause));
    if (!this.stopAll.signal.aborted) this.stopAll.abort(this.reason(cause));
    for (const w of this.waiters.splice(0)) w.reject(this.reason(cause));
    const listeners = this.releaseListeners;
    this.releaseListeners = [];
    for (const l of listeners) l();
  }

  /** The error a stop cause stands for (the caller's own ReexError reason when it gave one). */
  reason(cause: StopCause = this.cause ?? "cancelled"): ReexError {
    if (cause === "cancelled") {
      const r: unknown = this.options.signal?.reason;
      return r instanceof ReexError ? r : new ReexError("CANCELLED", "the request was cancelled", { cause: r });
    }
    if (cause === "deadline") return new ReexError("DEADLINE_EXCEEDED", `the decode passed its deadline of ${this.options.deadlineMs} ms`);
    if (cause === "failed") return new ReexError("INTERNAL", "the decode failed");
    return new ReexError("CONTEXT_EXHAUSTED", `the request's budget of ${this.maxTotal} generated tokens is spent`);
  }

  /** Tokens the request may still generate. */
  tokensLeft(): number {
    return this.maxTotal - this.generated;
  }

  /** Counts sampled tokens against the budget; stops everything when it is spent. */
  countTokens(n: number): void {
    if (n > 0 && this.firstTokenAt === undefined) this.firstTokenAt = this.now();
    this.generated += n;
    if (this.generated >= this.maxTotal) this.stop("budget");
  }

  /** Free slots right now. */
  freeSlots(): number {
    return this.maxLive - this.held;
  }

  /** Live trajectories this decode holds. */
  liveCount(): number {
    return this.held;
  }

  /** Takes a slot if one is free now and nobody waits for one. */
  tryAcquire(): boolean {
    if (this.stopped || this.held >= this.maxLive || this.waiters.length > 0) return false;
    this.held++;
    return true;
  }

  /** Waits for a slot (in arrival order); rejects with the stop reason once the decode stops. */
  acquire(): Promise<void> {
    if (this.stopped) return Promise.reject(this.reason());
    if (this.held < this.maxLive && this.waiters.length === 0) {
      this.held++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Gives a slot back, handing it straight to the first waiter. */
  releaseSlot(): void {
    const next = this.waiters.shift();
    if (next) next.resolve();
    else this.held--;
    const listeners = this.releaseListeners;
    this.releaseListeners = [];
    for (const l of listeners) l();
  }

  /** Resolves at the next slot release (or at once when the decode stops). */
  nextRelease(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise<void>((resolve) => this.releaseListeners.push(resolve));
  }

  /** Starts a trajectory from the prompt in a slot the caller already holds (the slot is freed on failure). */
  async start(policy: Policy, spec: PromptSpec): Promise<TrackedTrajectory> {
    let inner: Trajectory;
    try {
      inner = await policy.start(spec, { signal: this.signal });
    } catch (err) {
      this.releaseSlot();
      throw this.stopped ? this.reason() : err;
    }
    return this.track(inner, true);
  }

  /** Forks `parent` into a slot the caller already holds; null (slot freed) when the policy has no free sequence. */
  async forkHeld(parent: TrackedTrajectory): Promise<TrackedTrajectory | null> {
    try {
      return this.track(await parent.inner.fork(), false);
    } catch (err) {
      this.releaseSlot();
      if (toReexError(err).code === "CONTEXT_EXHAUSTED") return null;
      throw err;
    }
  }

  private track(inner: Trajectory, started: boolean): TrackedTrajectory {
    const t = new TrackedTrajectory(inner, this, started);
    this.tracked.add(t);
    return t;
  }

  /** Called once by a tracked trajectory when it is released. */
  settle(t: TrackedTrajectory, started: boolean): void {
    if (!this.tracked.delete(t)) return;
    const u = t.inner.usage;
    if (started) this.totals.promptTokens += u.promptTokens;
    this.totals.evaluatedTokens += u.evaluatedTokens;
    this.totals.generatedTokens += u.generatedTokens;
    if (u.draftedTokens !== undefined) {
      this.totals.draftedTokens = (this.totals.draftedTokens ?? 0) + u.draftedTokens;
      this.totals.acceptedTokens = (this.totals.acceptedTokens ?? 0) + (u.acceptedTokens ?? 0);
      this.totals.forwardPassesSaved = (this.totals.forwardPassesSaved ?? 0) + (u.forwardPassesSaved ?? 0);
    }
    this.releaseSlot();
  }

  /** Releases every trajectory still held (after an error, a stop, or as a last resort). */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.tracked].map((t) => t.release()));
  }

  /** Usage summed over every released trajectory: prompts counted once per start, forks add only what they evaluated. */
  usage(): TokenUsage {
    return { ...this.totals };
  }

  /** Ms since construction. */
  elapsed(): number {
    return this.now() - this.startedAt;
  }

  /** Ms from construction to the first sampled token, if any. */
  firstTokenMs(): number | undefined {
    return this.firstTokenAt === undefined ? undefined : this.firstTokenAt - this.startedAt;
  }

  /** Ends the decode: aborts whatever still listens to its signals, clears the deadline timer and the caller's abort listener. */
  dispose(): void {
    const done = new ReexError("INTERNAL", "the decode has ended");
    if (!this.stopAll.signal.aborted) this.stopAll.abort(done);
    if (!this.stopExec.signal.aborted) this.stopExec.abort(done);
    if (this.timer) clearTimeout(this.timer);
    if (this.onCallerAbort) this.options.signal?.removeEventListener("abort", this.onCallerAbort);
    for (const w of this.waiters.splice(0)) w.reject(this.reason());
  }
}

/** A policy trajectory that counts its sampled tokens against the request budget and gives its slot back on release. */
export class TrackedTrajectory implements Trajectory {
  private released: Promise<void> | undefined;
  /** The inner trajectory's rewind, where it has one. */
  readonly rewind?: (length: number) => Promise<void>;

  constructor(
    readonly inner: Trajectory,
    private readonly control: RequestControl,
    private readonly started: boolean,
  ) {
    if (inner.rewind) this.rewind = (length) => inner.rewind!(length);
  }

  get id(): string {
    return this.inner.id;
  }

  get record(): TokenRecord {
    return this.inner.record;
  }

  get promptTokens(): readonly number[] {
    return this.inner.promptTokens;
  }

  get usage(): TokenUsage {
    return this.inner.usage;
  }

  async generate(options: GenerateOptions): Promise<GenerateResult> {
    const left = this.control.tokensLeft();
    if (left <= 0) {
      this.control.stop("budget");
      return { text: "", tokens: [], logprobs: [], stopReason: "aborted" };
    }
    let counted = 0;
    const result = await this.inner.generate({
      ...options,
      maxTokens: Math.min(options.maxTokens, left),
      onText: (text) => {
        if (text.length > 0) {
          counted++;
          this.control.countTokens(1);
        }
        options.onText?.(text);
      },
    });
    this.control.countTokens(result.tokens.length - counted);
    return result;
  }

  append(text: string): Promise<{ tokens: number[] }> {
    return this.inner.append(text);
  }

  /** Forks into a free slot of the request; CONTEXT_EXHAUSTED when none is free (here or in the policy). */
  async fork(): Promise<TrackedTrajectory> {
    if (!this.control.tryAcquire()) throw new ReexError("CONTEXT_EXHAUSTED", "no free sequence slot for a fork in this request");
    const child = await this.control.forkHeld(this);
    if (!child) throw new ReexError("CONTEXT_EXHAUSTED", "the policy has no free sequence for a fork");
    return child;
  }

  release(): Promise<void> {
    this.released ??= this.inner.release().then(
      () => this.control.settle(this, this.started),
      () => this.control.settle(this, this.started),
    );
    return this.released;
  }
}

/**
 * KV-op scheduling, on node-llama-cpp internals (verified against node-llama-cpp 3.22.1): copying
 * one sequence's KV state into another, and freeing a sequence, without queueing behind the
 * context's batch dispatch. The direct decode step (direct-decode.ts) builds on the context lock
 * this module checks and shares.
 *
 * Why: node-llama-cpp runs every KV-cache edit (its `_copyStateFromOtherSequence`, which calls
 * llama.cpp's `llama_memory_seq_cp`, and the `llama_memory_seq_rm` that frees a disposed
 * sequence's id) under a context-wide lock that its batch dispatch loop holds for as long as any
 * sequence has a decode queued. While other trajectories generate, a fork or a release therefore
 * waited for all generation on the context to pause (seconds under load).
 *
 * How: {@link enableScheduledKvOps} gives a context a queue of KV operations that runs at the first
 * safe moment: right before the dispatch loop's next `decodeBatch` (the loop holds the lock and no
 * decode is in flight; the batch already built is plain token data, and no operation touches a
 * sequence in it: a copy's target is fresh, its source is idle or only about to be decoded, which
 * the copy precedes; a freed sequence decodes nothing), or, when no dispatch is running, under the
 * lock itself (taken through the very lock module node-llama-cpp uses). Operations run one at a
 * time in the order they were queued, and always before any decode queued after them; with
 * node-llama-cpp's per-sequence KV streams, llama.cpp defers a copy's buffer transfer to the start
 * of the next `llama_decode`, which keeps that order too.
 *
 * On another node-llama-cpp version none of this is installed: copies go through
 * `_copyStateFromOtherSequence` when it exists (else callers re-evaluate the tokens).
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { getModuleVersion, type LlamaContext, type LlamaContextSequence, type Token } from "node-llama-cpp";

/** The node-llama-cpp version this module was verified against. */
export const VERIFIED_NODE_LLAMA_CPP_VERSION = "3.22.1";

interface SequenceInternals {
  _copyStateFromOtherSequence?: (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;
  _sequenceId?: unknown;
  _context?: unknown;
  _contextTokens?: unknown;
  _nextTokenIndex?: unknown;
  _loadedTokenPredictions?: unknown;
  _tokenPredictor?: unknown;
  _checkpoints?: { cloneCheckpointsStateFrom?: unknown };
}

/** The parts of a sequence the scheduled copy uses, once checked. */
interface CheckedSequence {
  _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  _loadedTokenPredictions: unknown[];
  _tokenPredictor?: unknown;
  _checkpoints: { cloneCheckpointsStateFrom(other: unknown): void };
}

interface NativeContext {
  decodeBatch(...args: unknown[]): Promise<unknown>;
  copySequenceStateFromOtherSequence(targetSequenceId: number, sourceSequenceId: number): Promise<number>;
  disposeSequence(sequenceId: number): void;
}

interface ContextInternals {
  _ctx: NativeContext;
  _disposed: boolean;
  _unusedSequenceIds: number[];
  _onReclaimUnusedSequenceId: { dispatchEvent(): void };
  _backendContextDisposeGuard: { createPreventDisposalHandle(): { dispose(): void } };
  _llama?: { _log?: (level: string, message: string) => void };
}

/** node-llama-cpp's lock module (lifecycle-utils): the calls this module and the direct decode step make. */
export interface LockApi {
  acquireLock(scope: unknown[]): Promise<{ dispose(): void }>;
}

/** Whether KV copying is available, and whether the installed version is the verified one. */
export async function kvCopySupport(): Promise<{ available: boolean; verified: boolean; version: string }> {
  const version = await getModuleVersion();
  const probe = (await import("node-llama-cpp")).LlamaContextSequence.prototype as unknown as SequenceInternals;
  return {
    available: typeof probe._copyStateFromOtherSequence === "function",
    verified: version === VERIFIED_NODE_LLAMA_CPP_VERSION,
    version,
  };
}

let locks: Promise<LockApi | undefined> | undefined;

/**
 * node-llama-cpp's own lock module (lifecycle-utils, resolved from node-llama-cpp's location so it
 * is the same module instance and so the same lock table), or undefined.
 */
function nodeLlamaCppLocks(): Promise<LockApi | undefined> {
  locks ??= (async () => {
    try {
      const entry = createRequire(import.meta.url).resolve("node-llama-cpp");
      const path = createRequire(entry).resolve("lifecycle-utils");
      const mod = (await import(pathToFileURL(path).href)) as Partial<LockApi>;
      return typeof mod.acquireLock === "function" ? (mod as LockApi) : undefined;
    } catch {
      return undefined;
    }
  })();
  return locks;
}

interface QueuedOp {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** The per-context queue of KV operations; see the module comment. */
class KvScheduler {
  private readonly ops: QueuedOp[] = [];
  private waiting = false;

  constructor(
    private readonly context: ContextInternals,
    private readonly lock: LockApi,
  ) {}

  get native(): NativeContext {
    return this.context._ctx;
  }

  /** node-llama-cpp's lock module, the one this context's dispatch loop takes. */
  get lockApi(): LockApi {
    return this.lock;
  }

  get disposed(): boolean {
    return this.context._disposed;
  }

  /** Queues `fn` to run at the next safe moment; settles with its outcome. */
  run<T>(fn: () => T | Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.ops.push({ run: fn, resolve: resolve as (value: unknown) => void, reject });
      this.ensureWaiter();
    });
  }

  get pending(): boolean {
    return this.ops.length > 0;
  }

  /**
   * Runs queued operations one at a time until none is left, then settles them all at once, so
   * that what waited on them (the forks of one parent waiting on their KV copies) resumes together.
   * Only while the context lock is held.
   */
  async drain(): Promise<void> {
    const settled: (() => void)[] = [];
    for (let op = this.ops.shift(); op; op = this.ops.shift()) {
      const { resolve, reject } = op;
      try {
        const value = await op.run();
        settled.push(() => resolve(value));
      } catch (err) {
        settled.push(() => reject(err));
      }
    }
    for (const settle of settled) settle();
  }

  /**
   * Keeps one request for the context lock outstanding while operations are queued, for when no
   * dispatch loop comes by to run them first (when one does, the request finds nothing to do).
   */
  private ensureWaiter(): void {
    if (this.waiting) return;
    this.waiting = true;
    void (async () => {
      try {
        const handle = await this.lock.acquireLock([this.context, "context"]);
        try {
          if (this.ops.length === 0) return;
          let guard: { dispose(): void } | undefined;
          try {
            guard = this.context._backendContextDisposeGuard.createPreventDisposalHandle();
          } catch {
            // the context is being disposed: the operations see `_disposed` and do nothing
          }
          try {
            await this.drain();
          } finally {
            guard?.dispose();
          }
        } finally {
          handle.dispose();
        }
      } catch (err) {
        for (const op of this.ops.splice(0)) op.reject(err);
      } finally {
        this.waiting = false;
        if (this.ops.length > 0) this.ensureWaiter();
      }
    })();
  }
}

const schedulers = new WeakMap<object, KvScheduler>();
const decodeCounts = new WeakMap<object, { batches: number }>();

/**
 * Orders `context`'s free sequence ids so that its next `getSequence()` takes the lowest ("low";
 * with `above`, the lowest above that id first) or the highest ("high") of them. Generating
 * sequences low (a fork's just above its parent, beside its siblings) and idle holders (cached
 * prefixes) high keep a decode step's ids consecutive, which llama.cpp then decodes as one
 * ubatch. A no-op on an unverified node-llama-cpp.
 */
export function preferSequenceIds(context: LlamaContext, order: "low" | "high", above?: number): void {
  if (!schedulers.has(context) || !isContextInternals(context)) return;
  const c = context as unknown as { _nextGeneratedSequenceId?: unknown; _totalSequences?: unknown; _unusedSequenceIds: number[] };
  // ids never handed out yet are not in the free list; put them there, so that "high" means the highest free id
  if (typeof c._nextGeneratedSequenceId === "number" && typeof c._totalSequences === "number") {
    for (let id = c._nextGeneratedSequenceId; id < c._totalSequences; id++) c._unusedSequenceIds.push(id);
    c._nextGeneratedSequenceId = Math.max(c._nextGeneratedSequenceId, c._totalSequences);
  }
  const ids = c._unusedSequenceIds.sort(order === "low" ? (a, b) => a - b : (a, b) => b - a);
  if (order === "low" && above !== undefined) {
    const first = ids.findIndex((id) => id > above);
    if (first > 0) ids.push(...ids.splice(0, first));
  }
}

/** Decode batches `context` has run since {@link enableScheduledKvOps} was installed on it; undefined where it is not. */
export function decodeBatchCount(context: LlamaContext): number | undefined {
  return decodeCounts.get(context)?.batches;
}

/**
 * The lock module whose context lock `context`'s dispatch loop takes, where {@link enableScheduledKvOps}
 * is on (the verified node-llama-cpp version, the lock found shared); undefined where it is not.
 */
export function scheduledContextLock(context: LlamaContext): LockApi | undefined {
  return schedulers.get(context)?.lockApi;
}

function isContextInternals(value: unknown): value is ContextInternals {
  const c = value as Partial<Record<keyof ContextInternals, unknown>> & { _reclaimUnusedSequenceId?: unknown };
  const native = c._ctx as Partial<Record<keyof NativeContext, unknown>> | undefined;
  const guard = c._backendContextDisposeGuard as { createPreventDisposalHandle?: unknown } | undefined;
  const reclaimed = c._onReclaimUnusedSequenceId as { dispatchEvent?: unknown } | undefined;
  return (
    typeof native === "object" &&
    native !== null &&
    typeof native.decodeBatch === "function" &&
    typeof native.copySequenceStateFromOtherSequence === "function" &&
    typeof native.disposeSequence === "function" &&
    typeof c._disposed === "boolean" &&
    Array.isArray(c._unusedSequenceIds) &&
    typeof reclaimed?.dispatchEvent === "function" &&
    typeof guard?.createPreventDisposalHandle === "function" &&
    typeof c._reclaimUnusedSequenceId === "function"
  );
}

/**
 * Whether `lock` is the lock node-llama-cpp itself takes for `context` (not another copy of the
 * module): while we hold it, node-llama-cpp's own locked no-op (erasing no ranges) must wait.
 */
async function sharesContextLock(context: LlamaContext, lock: LockApi): Promise<boolean> {
  if (context.sequencesLeft === 0) return false;
  const probe = context.getSequence();
  try {
    let waited = true;
    const handle = await lock.acquireLock([context, "context"]);
    let erasing: Promise<void>;
    try {
      erasing = probe.eraseContextTokenRanges([]).then(() => void (waited = false));
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
      if (!waited) return false;
    } finally {
      handle.dispose();
    }
    await erasing;
    return true;
  } catch {
    return false;
  } finally {
    await probe.dispose();
  }
}

/**
 * Routes `context`'s KV copies ({@link beginSequenceCopy}) and sequence frees (`sequence.dispose()`)
 * through a scheduler that runs them between decode batches instead of waiting for node-llama-cpp's
 * dispatch loop to go idle. Only on the verified node-llama-cpp version; returns whether it is on.
 */
export async function enableScheduledKvOps(context: LlamaContext): Promise<boolean> {
  if (schedulers.has(context)) return true;
  if ((await getModuleVersion()) !== VERIFIED_NODE_LLAMA_CPP_VERSION) return false;
  const lock = await nodeLlamaCppLocks();
  if (!lock || !isContextInternals(context) || context.disposed) return false;
  if (!(await sharesContextLock(context, lock))) return false;
  const internals = context;
  const scheduler = new KvScheduler(internals, lock);
  const native = internals._ctx;
  const decodeBatch = native.decodeBatch;
  const count = { batches: 0 };
  try {
    // Called only by the dispatch loop, which holds the context lock; nothing is decoding now.
    Object.defineProperty(native, "decodeBatch", {
      configurable: true,
      writable: true,
      value: function decodeBatchAfterKvOps(this: unknown, ...args: unknown[]): Promise<unknown> {
        count.batches++;
        if (!scheduler.pending) return decodeBatch.apply(native, args);
        return scheduler.drain().then(() => decodeBatch.apply(native, args));
      },
    });
    // Same body as node-llama-cpp's `_reclaimUnusedSequenceId`, run by the scheduler instead of
    // behind the dispatch loop (sequence GC finalizers keep calling the original).
    Object.defineProperty(internals, "_reclaimUnusedSequenceId", {
      configurable: true,
      writable: true,
      value: (sequenceId: number): Promise<void> | undefined => {
        if (internals._disposed) return undefined;
        return scheduler.run(() => {
          if (internals._disposed) return;
          try {
            internals._ctx.disposeSequence(sequenceId);
            internals._unusedSequenceIds.push(sequenceId);
            internals._onReclaimUnusedSequenceId.dispatchEvent();
          } catch (err) {
            internals._llama?._log?.("warn", `Failed to reclaim unused sequence ID ${sequenceId}: ${String(err)}`);
          }
        });
      },
    });
  } catch {
    return false;
  }
  schedulers.set(context, scheduler);
  decodeCounts.set(context, count);
  return true;
}

function checkedSequence(seq: LlamaContextSequence): CheckedSequence | undefined {
  const s = seq as unknown as SequenceInternals;
  if (
    typeof s._sequenceId === "number" &&
    Array.isArray(s._contextTokens) &&
    typeof s._nextTokenIndex === "number" &&
    Array.isArray(s._loadedTokenPredictions) &&
    typeof s._checkpoints?.cloneCheckpointsStateFrom === "function"
  ) {
    return s as unknown as CheckedSequence;
  }
  return undefined;
}

/** llama.cpp's sequence id behind `seq`; undefined on an unverified node-llama-cpp. */
export function sequenceIdOf(seq: LlamaContextSequence): number | undefined {
  return checkedSequence(seq)?._sequenceId;
}

/** A KV copy under way; see {@link beginSequenceCopy}. */
export interface SequenceCopy {
  /** True when the copy happened; false when it did not (the target is then empty again). */
  done: Promise<boolean>;
  /**
   * True when the copy is ordered before every decode queued after this call returned: the source
   * may go on evaluating at once, and only the target must wait for `done` before evaluating.
   * False: nothing may evaluate into either sequence before `done` settles.
   */
  ordered: boolean;
}

/**
 * Starts making `target` (an empty sequence of the same context, with nothing queued) hold
 * `source`'s evaluated tokens without evaluating them. `source` must not be evaluating right now
 * (it may start once this returns when `ordered`). The target's token history is set at once.
 */
export function beginSequenceCopy(target: LlamaContextSequence, source: LlamaContextSequence): SequenceCopy {
  const scheduler = schedulers.get(target.context);
  const t = checkedSequence(target);
  const s = checkedSequence(source);
  if (
    scheduler === undefined ||
    t === undefined ||
    s === undefined ||
    target === source ||
    target.context !== source.context ||
    t._tokenPredictor != null ||
    s._loadedTokenPredictions.length > 0 ||
    t._contextTokens.length > 0
  ) {
    return { done: copyUnderLock(target, source), ordered: false };
  }
  const tokens = s._contextTokens.slice();
  t._contextTokens = tokens;
  t._nextTokenIndex = tokens.length;
  t._loadedTokenPredictions = [];
  t._checkpoints.cloneCheckpointsStateFrom(s._checkpoints);
  if (tokens.length === 0) return { done: Promise.resolve(true), ordered: true };
  const targetId = t._sequenceId;
  const sourceId = s._sequenceId;
  const copied = scheduler.run(async () => {
    if (scheduler.disposed) return false;
    const copiedMaxIndex = await scheduler.native.copySequenceStateFromOtherSequence(targetId, sourceId);
    return copiedMaxIndex === tokens.length - 1;
  });
  const done = copied
    .catch(() => false)
    .then(async (ok) => {
      if (ok) return true;
      if (!target.disposed) await target.clearHistory().catch(() => undefined);
      return false;
    });
  return { done, ordered: true };
}

/** node-llama-cpp's own copy (which waits for the context lock); false when missing or failed. */
async function copyUnderLock(target: LlamaContextSequence, source: LlamaContextSequence): Promise<boolean> {
  const copy = (target as unknown as SequenceInternals)._copyStateFromOtherSequence;
  if (typeof copy !== "function") return false;
  const length = source.nextTokenIndex;
  let ok = false;
  try {
    ok = await copy.call(target, source, length);
  } catch {
    ok = false;
  }
  if (ok && target.nextTokenIndex === length) return true;
  await target.clearHistory();
  return false;
}

/**
 * Makes `target` (an empty sequence of the same context) hold `source`'s evaluated tokens without
 * evaluating them. Returns false when the copy did not happen; `target` is then empty again.
 */
export function copySequenceState(target: LlamaContextSequence, source: LlamaContextSequence): Promise<boolean> {
  return beginSequenceCopy(target, source).done;
}

/** Our plain token ids as node-llama-cpp's branded `Token` type. */
export function asTokens(tokens: readonly number[]): Token[] {
  return tokens as Token[];
}

/**
 * Holds node-llama-cpp's context lock (no decode batch can start) while `fn` runs; false when the
 * lock module is not reachable. For tests of the scheduling above.
 */
export async function withContextLock<T>(context: LlamaContext, fn: () => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
  const lock = await nodeLlamaCppLocks();
  if (!lock) return { ran: false };
  const handle = await lock.acquireLock([context, "context"]);
  try {
    return { ran: true, value: await fn() };
  } finally {
    handle.dispose();
  }
}

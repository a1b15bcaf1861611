/** The bounded generation queue: a p-limit pool that refuses work instead of piling it up. */
import pLimit, { type LimitFunction } from "p-limit";
import { ReexError } from "../errors/index.js";

/**
 * Runs at most `maxConcurrent` generations at once with at most `maxQueued` waiting; a submit
 * beyond that throws QUEUE_FULL at once. Tracks every accepted job until it settles, so shutdown
 * can wait for them and abort the stragglers.
 */
export class GenerationQueue {
  private readonly limit: LimitFunction;
  private readonly jobs = new Map<Promise<unknown>, AbortController>();

  constructor(
    private readonly maxConcurrent: number,
    private readonly maxQueued: number,
  ) {
    this.limit = pLimit(maxConcurrent);
  }

  /** Generations running now. */
  get running(): number {
    return this.limit.activeCount;
  }

  /** Generations waiting for a slot. */
  get waiting(): number {
    return this.limit.pendingCount;
  }

  /** Accepted jobs that have not settled yet (running, waiting, or unwinding after an abort). */
  get inFlight(): number {
    return this.jobs.size;
  }

  /**
   * Queues `fn`; throws QUEUE_FULL synchronously when the queue is full. `fn` is skipped (the
   * promise rejects with the abort reason) when `controller` aborted while it waited. The promise
   * settles only when `fn` does, so the slot stays taken until the work has really stopped.
   */
  submit<T>(controller: AbortController, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.limit.activeCount + this.limit.pendingCount >= this.maxConcurrent + this.maxQueued) {
      throw new ReexError("QUEUE_FULL", `the generation queue is full (${this.maxConcurrent} running, ${this.maxQueued} waiting)`);
    }
    const job = this.limit(async () => {
      if (controller.signal.aborted) throw controller.signal.reason;
      return fn(controller.signal);
    });
    this.jobs.set(job, controller);
    const forget = (): void => {
      this.jobs.delete(job);
    };
    job.then(forget, forget);
    return job;
  }

  /** Resolves when every accepted job has settled, or after `timeoutMs`; true when all settled. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.jobs.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.jobs.keys()]),
        new Promise((resolve) => {
          timer = setTimeout(resolve, left);
        }),
      ]);
      clearTimeout(timer);
    }
    return true;
  }

  /** Aborts every accepted job with `reason`. */
  abortAll(reason: unknown): void {
    for (const controller of this.jobs.values()) if (!controller.signal.aborted) controller.abort(reason);
  }
}

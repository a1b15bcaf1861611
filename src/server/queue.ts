/**
 * The bounded generation queue with a fair share per tenant: it refuses work instead of piling it
 * up, caps how many requests one tenant (API key, or client address without keys) may have
 * waiting, and hands each free slot to the tenant with the fewest generations running, ties to the
 * one served longest ago (round-robin), so one key's burst never keeps another key waiting behind it.
 */
import { ReexError } from "../errors/index.js";

/** One accepted job that has not started. */
interface Waiter {
  tenant: string;
  start: () => void;
  /** Rejects the job without running it (its controller aborted while it waited). */
  drop: (reason: unknown) => void;
}

/** Sizes of a {@link GenerationQueue}. */
export interface QueueLimits {
  /** Generations running at once. */
  maxConcurrent: number;
  /** Generations waiting for a slot, all tenants together. */
  maxQueued: number;
  /** Generations one tenant may have waiting. Default: maxQueued. */
  maxQueuedPerTenant?: number;
}

/**
 * Runs at most `maxConcurrent` generations at once with at most `maxQueued` waiting, of which at
 * most `maxQueuedPerTenant` belong to one tenant; a submit beyond either throws QUEUE_FULL at once.
 * Tracks every accepted job until it settles, so shutdown can wait for them and abort the stragglers.
 */
export class GenerationQueue {
  private readonly jobs = new Map<Promise<unknown>, AbortController>();
  private readonly waiters: Waiter[] = [];
  private readonly runningBy = new Map<string, number>();
  private readonly waitingBy = new Map<string, number>();
  /** When each tenant with work last got a slot (a counter); tenants without work are forgotten. */
  private readonly servedAt = new Map<string, number>();
  private served = 0;
  private active = 0;
  private readonly maxConcurrent: number;
  private readonly maxQueued: number;
  private readonly perTenant: number;

  constructor(limits: QueueLimits) {
    this.maxConcurrent = limits.maxConcurrent;
    this.maxQueued = limits.maxQueued;
    this.perTenant = limits.maxQueuedPerTenant ?? limits.maxQueued;
  }

  /** Generations running now. */
  get running(): number {
    return this.active;
  }

  /** Generations waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Accepted jobs that have not settled yet (running, waiting, or unwinding after an abort). */
  get inFlight(): number {
    return this.jobs.size;
  }

  /** Generations `tenant` has waiting now. */
  waitingFor(tenant: string): number {
    return this.waitingBy.get(tenant) ?? 0;
  }

  /**
   * Queues `fn` for `tenant`; throws QUEUE_FULL synchronously when the queue, or the tenant's share
   * of it, is full. A job whose `controller` aborts while it waits leaves the queue at once (its
   * promise rejects with the abort reason, `fn` never runs). The promise of a started job settles
   * only when `fn` does, so the slot stays taken until the work has really stopped.
   */
  submit<T>(controller: AbortController, fn: (signal: AbortSignal) => Promise<T>, tenant = ""): Promise<T> {
    const mustWait = this.active >= this.maxConcurrent || this.waiters.length > 0;
    if (mustWait) this.checkRoom(tenant);
    let job!: Promise<T>;
    const run = (): Promise<T> => this.run(tenant, controller, fn);
    if (!mustWait) job = run();
    else job = this.enqueue(tenant, controller, run);
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
    for (const controller of [...this.jobs.values()]) if (!controller.signal.aborted) controller.abort(reason);
  }

  private checkRoom(tenant: string): void {
    if (this.waiters.length >= this.maxQueued) {
      throw new ReexError("QUEUE_FULL", `the generation queue is full (${this.maxConcurrent} running, ${this.maxQueued} waiting); retry later`);
    }
    if (this.waitingFor(tenant) >= this.perTenant) {
      throw new ReexError(
        "QUEUE_FULL",
        `this key already has ${this.perTenant} generations waiting (server.maxQueuedPerKey), its share of the queue; retry when one is answered`,
      );
    }
  }

  private enqueue<T>(tenant: string, controller: AbortController, run: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const signal = controller.signal;
      const onAbort = (): void => waiter.drop(signal.reason);
      const waiter: Waiter = {
        tenant,
        start: () => {
          signal.removeEventListener("abort", onAbort);
          run().then(resolve, reject);
        },
        drop: (reason) => {
          const at = this.waiters.indexOf(waiter);
          if (at < 0) return;
          this.waiters.splice(at, 1);
          this.count(this.waitingBy, tenant, -1);
          this.forgetIdle(tenant);
          reject(reason);
        },
      };
      this.waiters.push(waiter);
      this.count(this.waitingBy, tenant, 1);
      if (!this.servedAt.has(tenant)) this.servedAt.set(tenant, -1);
      signal.addEventListener("abort", onAbort, { once: true });
      if (signal.aborted) onAbort();
      else this.next();
    });
  }

  private async run<T>(tenant: string, controller: AbortController, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    this.active++;
    this.count(this.runningBy, tenant, 1);
    this.servedAt.set(tenant, ++this.served);
    try {
      if (controller.signal.aborted) throw controller.signal.reason;
      return await fn(controller.signal);
    } finally {
      this.active--;
      this.count(this.runningBy, tenant, -1);
      this.forgetIdle(tenant);
      this.next();
    }
  }

  /** Starts waiting jobs while slots are free: the tenant with the fewest running first, ties to the one served longest ago. */
  private next(): void {
    while (this.active < this.maxConcurrent && this.waiters.length > 0) {
      let pick = 0;
      for (let i = 1; i < this.waiters.length; i++) if (this.before(this.waiters[i]!.tenant, this.waiters[pick]!.tenant)) pick = i;
      const [waiter] = this.waiters.splice(pick, 1);
      this.count(this.waitingBy, waiter!.tenant, -1);
      waiter!.start();
    }
  }

  /** Whether `a`'s next job goes before `b`'s (a different tenant's; the same tenant's jobs keep their order). */
  private before(a: string, b: string): boolean {
    if (a === b) return false;
    const ra = this.runningBy.get(a) ?? 0;
    const rb = this.runningBy.get(b) ?? 0;
    if (ra !== rb) return ra < rb;
    return (this.servedAt.get(a) ?? -1) < (this.servedAt.get(b) ?? -1);
  }

  private count(map: Map<string, number>, tenant: string, delta: number): void {
    const n = (map.get(tenant) ?? 0) + delta;
    if (n > 0) map.set(tenant, n);
    else map.delete(tenant);
  }

  private forgetIdle(tenant: string): void {
    if (!this.runningBy.has(tenant) && !this.waitingBy.has(tenant)) this.servedAt.delete(tenant);
  }
}

/** Per-identity request limits over fixed one-minute windows. */

/** The outcome of taking one request from an identity's budget. */
export interface RateDecision {
  allowed: boolean;
  /** Requests left in the current window. */
  remaining: number;
  /** Whole seconds until the window resets (at least 1). */
  retryAfterSeconds: number;
}

/**
 * Fixed-window limiter: each identity may make `limitPerMinute` requests per wall-clock window
 * of `windowMs`. `limitPerMinute` 0 disables it. Default window 60 s.
 */
export class RateLimiter {
  private windowStart = 0;
  private counts = new Map<string, number>();

  constructor(
    private readonly limitPerMinute: number,
    private readonly now: () => number = Date.now,
    private readonly windowMs = 60_000,
  ) {}

  /** Counts one request for `identity` and says whether it may go ahead. */
  take(identity: string): RateDecision {
    const { now, start } = this.window();
    const retryAfterSeconds = Math.max(1, Math.ceil((start + this.windowMs - now) / 1000));
    if (this.limitPerMinute <= 0) return { allowed: true, remaining: Infinity, retryAfterSeconds };
    const used = (this.counts.get(identity) ?? 0) + 1;
    if (used > this.limitPerMinute) return { allowed: false, remaining: 0, retryAfterSeconds };
    this.counts.set(identity, used);
    return { allowed: true, remaining: this.limitPerMinute - used, retryAfterSeconds };
  }

  /** Whether `identity` has used its whole budget this window, without counting a request. */
  exhausted(identity: string): RateDecision {
    const { now, start } = this.window();
    const retryAfterSeconds = Math.max(1, Math.ceil((start + this.windowMs - now) / 1000));
    if (this.limitPerMinute <= 0) return { allowed: true, remaining: Infinity, retryAfterSeconds };
    const used = this.counts.get(identity) ?? 0;
    return { allowed: used < this.limitPerMinute, remaining: Math.max(0, this.limitPerMinute - used), retryAfterSeconds };
  }

  private window(): { now: number; start: number } {
    const now = this.now();
    const start = now - (now % this.windowMs);
    if (start !== this.windowStart) {
      this.windowStart = start;
      this.counts = new Map();
    }
    return { now, start };
  }
}

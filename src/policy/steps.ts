/**
 * Lines up the next-token requests of the trajectories generating on one context, so that they are
 * decoded in one batch (by node-llama-cpp's `evaluate`, or by the direct decode path in
 * direct-decode.ts, which also starts a step as soon as all {@link StepBarrier.generating} have asked).
 *
 * Why: node-llama-cpp's dispatch loop decodes whatever is queued when it looks again, right after a
 * batch's tokens are sampled. A sequence whose consumer asks for its next token a few microtasks
 * after the others misses that look and is decoded in a batch of its own: measured on the starter
 * (bench/.output scratch, 1 thread), two sequences never shared a batch (127 decodes for 64 steps)
 * and sixteen took 70. Where a decode costs the same for one token as for sixteen (a GPU, a larger
 * model), each split batch is a whole step lost.
 *
 * How: a trajectory counts as generating from the start of its `generate()` turn, before its
 * first await (forks whose KV copies complete together then line up from their first step). One
 * that has its token waits here until every trajectory generating on the context has its own (or
 * has stopped generating); then all of them ask at once. A counted trajectory that is not at the
 * barrier is inside node-llama-cpp's evaluation or a KV operation, which progress on their own, so
 * the wait always ends. One generating trajectory never waits.
 */
export class StepBarrier {
  private active = 0;
  private waiting: (() => void)[] = [];

  /** A barrier that is off never makes a trajectory wait. Default on. */
  constructor(private readonly on = true) {}

  /** Trajectories generating now. */
  get generating(): number {
    return this.active;
  }

  /** A trajectory starts its turn to generate tokens. */
  enter(): void {
    this.active++;
  }

  /** A trajectory stops generating; the others may have been waiting for it. */
  leave(): void {
    this.active--;
    this.release();
  }

  /** Resolves once every generating trajectory has reached this point; undefined (no wait) when this one is alone. */
  arrive(): Promise<void> | undefined {
    if (!this.on || (this.active <= 1 && this.waiting.length === 0)) return undefined;
    const arrived = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.release();
    return arrived;
  }

  private release(): void {
    if (this.waiting.length === 0 || this.waiting.length < this.active) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}

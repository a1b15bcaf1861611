/**
 * The line of callers waiting for a free context sequence, shared by the llama.cpp policy (which
 * hands a waiter the sequence itself) and the remote one (which hands it nothing: the waiter then
 * takes the freed slot).
 */
import { ReexError } from "../errors/index.js";

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
}

/**
 * Callers waiting, first come first served, for what {@link SequenceWaiters.handFirst} hands out.
 * A waiter whose signal aborts leaves the line and fails with CANCELLED. A caller that must not
 * wait ("now" mode: forks) never joins the line; one that may wait should take a free sequence
 * only while {@link SequenceWaiters.size} is 0, so that it does not pass those already waiting.
 */
export class SequenceWaiters<T> {
  private readonly line: Waiter<T>[] = [];

  /** Callers waiting now. */
  get size(): number {
    return this.line.length;
  }

  /** Joins the end of the line; settles with what is handed to it, or fails when `signal` aborts (at once if it has). */
  wait(signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiter: Waiter<T> = {
        resolve: (value) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(value);
        },
        reject: (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      const onAbort = (): void => {
        const i = this.line.indexOf(waiter);
        if (i >= 0) this.line.splice(i, 1);
        reject(new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal?.reason }));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.line.push(waiter);
    });
  }

  /** Hands `value` to the first waiter, which leaves the line; false when nobody waits. */
  handFirst(value: T): boolean {
    const first = this.line.shift();
    first?.resolve(value);
    return first !== undefined;
  }

  /** Empties the line, handing every waiter `value`. */
  resolveAll(value: T): void {
    for (const w of this.line.splice(0)) w.resolve(value);
  }

  /** Empties the line, failing every waiter with `err`. */
  rejectAll(err: unknown): void {
    for (const w of this.line.splice(0)) w.reject(err);
  }
}

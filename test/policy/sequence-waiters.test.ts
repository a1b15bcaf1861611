/**
 * The line of callers waiting for a free sequence (src/policy/waiters.ts), which the llama.cpp and
 * remote policies share: first come first served, an abort takes a waiter out and fails it.
 */
import { describe, expect, it } from "vitest";
import { ReexError } from "../../src/errors/index.js";
import { SequenceWaiters } from "../../src/policy/waiters.js";

/** Whether `p` has settled after pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

describe("SequenceWaiters", () => {
  it("hands values to the waiters in the order they came", async () => {
    const waiters = new SequenceWaiters<string>();
    const a = waiters.wait();
    const b = waiters.wait();
    const c = waiters.wait();
    expect(waiters.size).toBe(3);
    expect(waiters.handFirst("one")).toBe(true);
    expect(waiters.handFirst("two")).toBe(true);
    expect(await a).toBe("one");
    expect(await b).toBe("two");
    expect(await settled(c)).toBe(false);
    expect(waiters.size).toBe(1);
    waiters.handFirst("three");
    expect(await c).toBe("three");
    expect(waiters.size).toBe(0);
    expect(waiters.handFirst("nobody")).toBe(false);
  });

  it("an abort takes the waiter out of the line and fails it with CANCELLED; the next one is handed the value", async () => {
    const waiters = new SequenceWaiters<number>();
    const ac = new AbortController();
    const first = waiters.wait(ac.signal);
    const second = waiters.wait();
    ac.abort(new Error("gone"));
    const err = await first.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ReexError);
    expect(err).toMatchObject({ code: "CANCELLED" });
    expect((err as Error).cause).toEqual(new Error("gone"));
    expect(waiters.size).toBe(1);
    waiters.handFirst(7);
    expect(await second).toBe(7);
  });

  it("an already aborted signal fails at once without joining the line", async () => {
    const waiters = new SequenceWaiters<number>();
    const ac = new AbortController();
    ac.abort();
    await expect(waiters.wait(ac.signal)).rejects.toMatchObject({ code: "CANCELLED" });
    expect(waiters.size).toBe(0);
  });

  it("an abort after the value was handed changes nothing", async () => {
    const waiters = new SequenceWaiters<number>();
    const ac = new AbortController();
    const p = waiters.wait(ac.signal);
    waiters.handFirst(1);
    ac.abort();
    expect(await p).toBe(1);
  });

  it("resolveAll and rejectAll empty the line", async () => {
    const waiters = new SequenceWaiters<number | null>();
    const a = waiters.wait();
    const b = waiters.wait();
    waiters.resolveAll(null);
    expect([await a, await b]).toEqual([null, null]);
    const c = waiters.wait();
    waiters.rejectAll(new ReexError("SHUTTING_DOWN", "the policy is closing"));
    await expect(c).rejects.toMatchObject({ code: "SHUTTING_DOWN" });
    expect(waiters.size).toBe(0);
  });

  it("with nothing to hand (void), handFirst wakes the first waiter", async () => {
    const waiters = new SequenceWaiters<void>();
    const a = waiters.wait();
    const b = waiters.wait();
    waiters.handFirst();
    await a;
    expect(await settled(b)).toBe(false);
    waiters.rejectAll(new Error("closing"));
    await expect(b).rejects.toThrow("closing");
  });
});

import { afterEach, describe, expect, it } from "vitest";
import { GenerationQueue } from "../../src/server/testing.js";
import { ScriptedDecoder, makeApp, until, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("the generation queue", () => {
  it("runs maxConcurrent decodes, queues maxQueued, and answers 503 QUEUE_FULL at once beyond that", async () => {
    const decoder = new ScriptedDecoder(60, 4);
    t = await makeApp({ server: { maxConcurrent: 2, maxQueued: 1 }, decoder });
    const ask = () => t!.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t!.dbId, question: "q" } });
    const accepted = [ask(), ask(), ask()];
    await until(() => decoder.started === 2, 2_000, "two decodes running");
    const metrics = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(metrics).toContain("reex_queue_depth 1");
    const t0 = Date.now();
    const full = await ask();
    expect(Date.now() - t0).toBeLessThan(200);
    expect(full.statusCode).toBe(503);
    expect(full.json().code).toBe("QUEUE_FULL");
    expect(decoder.started).toBe(2);
    const done = await Promise.all(accepted);
    expect(done.map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect(decoder.started).toBe(3);
    expect((await ask()).statusCode).toBe(200);
  });

  it("skips a queued decode whose deadline passed while it waited, and keeps the slot until a late decode really stops", async () => {
    const decoder = new ScriptedDecoder(5, 1);
    let calls = 0;
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const decode = async (...args: Parameters<typeof decoder.decode>) => {
      calls++;
      if (calls === 1) await stuck;
      return decoder.decode(...args);
    };
    t = await makeApp({ server: { maxConcurrent: 1, maxQueued: 4, requestTimeoutMs: 100 }, decoder, deps: { decode } });
    const ask = () => t!.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t!.dbId, question: "q" } });
    const [first, second] = await Promise.all([ask(), ask()]);
    expect(first.json().code).toBe("DEADLINE_EXCEEDED");
    expect(second.json().code).toBe("DEADLINE_EXCEEDED");
    const readyz = (await t.app.inject({ method: "GET", url: "/readyz" })).json();
    // the stuck decode keeps its slot; the second, aborted while it waited, has left the queue
    expect(readyz.queue).toMatchObject({ running: 1, waiting: 0 });
    release();
    await until(() => decoder.started === 1 && decoder.live === 0, 2_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(calls).toBe(1);
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).json().queue).toMatchObject({ running: 0, waiting: 0 });
  });

  it("caps each tenant's waiting requests and hands free slots round-robin, the tenant with the fewest running first", async () => {
    const q = new GenerationQueue({ maxConcurrent: 1, maxQueued: 8, maxQueuedPerTenant: 3 });
    const order: string[] = [];
    const gates: (() => void)[] = [];
    const job = (name: string) => () =>
      new Promise<void>((resolve) => {
        order.push(name);
        gates.push(resolve);
      });
    const submit = (tenant: string, name: string) => q.submit(new AbortController(), job(name), tenant);
    const done = [submit("a", "a0"), submit("a", "a1"), submit("a", "a2"), submit("a", "a3")];
    expect(() => submit("a", "a4")).toThrow(expect.objectContaining({ code: "QUEUE_FULL", message: expect.stringContaining("server.maxQueuedPerKey") }));
    done.push(submit("b", "b0"), submit("b", "b1"), submit("c", "c0"));
    expect(q.waiting).toBe(6);
    while (gates.length > 0 || q.waiting > 0) {
      await until(() => gates.length > 0, 1_000, "a job running");
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(done);
    expect(order).toEqual(["a0", "b0", "c0", "a1", "b1", "a2", "a3"]);
    expect(q.inFlight).toBe(0);
  });

  it("drops a waiting job whose request was aborted at once, freeing its tenant's share", async () => {
    const q = new GenerationQueue({ maxConcurrent: 1, maxQueued: 8, maxQueuedPerTenant: 1 });
    let release!: () => void;
    const running = q.submit(new AbortController(), () => new Promise<void>((r) => (release = r)), "a");
    const controller = new AbortController();
    const waiting = q.submit(controller, async () => "ran", "a");
    expect(() => q.submit(new AbortController(), async () => "x", "a")).toThrow(expect.objectContaining({ code: "QUEUE_FULL" }));
    controller.abort(new Error("client gone"));
    await expect(waiting).rejects.toThrow("client gone");
    expect(q.waiting).toBe(0);
    const next = q.submit(new AbortController(), async () => "next", "a");
    release();
    await running;
    await expect(next).resolves.toBe("next");
  });
});

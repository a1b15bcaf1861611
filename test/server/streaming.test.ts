import { afterEach, describe, expect, it } from "vitest";
import type { ReexError } from "../../src/errors/index.js";
import { ScriptedDecoder, listen, makeApp, until, type TestApp } from "./helpers.js";
import { connect } from "./ws-client.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

async function wsUrl(app: TestApp["app"], query = ""): Promise<string> {
  const { port } = await listen(app);
  return `ws://127.0.0.1:${port}/v1/stream${query}`;
}

describe("GET /v1/stream", () => {
  it("streams every event as JSON and ends with done and the answer, then closes with 1000", async () => {
    t = await makeApp();
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ database: t.dbId, question: "Who is older than 30?", strategy: "tree-prune", candidates: 2 }));
    const closed = await c.closed;
    expect(closed.code).toBe(1000);
    const types = c.messages.map((m) => m.type);
    expect(types).toEqual([
      "branch",
      "token",
      "token",
      "token",
      "probe",
      "result",
      "branch",
      "branch",
      "token",
      "token",
      "prune",
      "candidate",
      "vote",
      "final",
      "done",
    ]);
    expect(c.messages[5]).toMatchObject({ type: "result", step: 1, result: { ok: true, rows: [[4]] } });
    const done = c.messages.at(-1) as { answer: Record<string, unknown> };
    expect(done.answer).toMatchObject({ sql: "SELECT name FROM singer WHERE age > 30", winner: 0, result: { rowCount: 2 } });
    expect(t.decoder.calls[0]).toMatchObject({ strategy: "tree-prune", candidates: 2 });
  });

  it("accepts a request tagged type 'ask'", async () => {
    t = await makeApp();
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ type: "ask", database: t.dbId, question: "q" }));
    expect((await c.next("done")).answer).toBeTruthy();
  });

  it("ends with a terminal BAD_REQUEST error (close 1008) for an invalid or non-JSON request", async () => {
    t = await makeApp();
    const url = await wsUrl(t.app);
    const bad = connect(url);
    await bad.opened;
    bad.ws.send(JSON.stringify({ database: t.dbId, candidates: 0 }));
    expect(await bad.next("error")).toMatchObject({
      code: "BAD_REQUEST",
      terminal: true,
      issues: expect.arrayContaining([expect.objectContaining({ path: ["message", "question"] })]),
    });
    expect((await bad.closed).code).toBe(1008);
    const junk = connect(url);
    await junk.opened;
    junk.ws.send("not json");
    expect(await junk.next("error")).toMatchObject({ code: "BAD_REQUEST" });
    expect((await junk.closed).code).toBe(1008);
    expect(t.decoder.calls).toHaveLength(0);
  });

  it("ends with DB_NOT_FOUND for an unknown database", async () => {
    t = await makeApp();
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ database: "nope", question: "q" }));
    expect(await c.next("error")).toMatchObject({ code: "DB_NOT_FOUND", terminal: true });
    expect((await c.closed).code).toBe(1000);
  });

  it("a cancel message aborts the decode, ends with CANCELLED and frees its sequences", async () => {
    const decoder = new ScriptedDecoder(50, 200);
    t = await makeApp({ decoder });
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    await c.next("token");
    expect(decoder.live).toBeGreaterThan(0);
    c.ws.send(JSON.stringify({ type: "cancel" }));
    expect(await c.next("error")).toMatchObject({ type: "error", code: "CANCELLED", terminal: true });
    expect((await c.closed).code).toBe(1000);
    expect(decoder.signals[0]!.aborted).toBe(true);
    expect((decoder.signals[0]!.reason as ReexError).code).toBe("CANCELLED");
    await until(() => t!.policy.liveTrajectories() === 0, 2_000, "sequences freed");
    expect(decoder.finished).toBe(0);
  });

  it("closing the socket aborts the decode and frees its sequences", async () => {
    const decoder = new ScriptedDecoder(50, 200);
    t = await makeApp({ decoder });
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    await c.next("token");
    c.ws.close();
    await until(() => decoder.signals[0]?.aborted === true, 2_000, "abort signal");
    expect((decoder.signals[0]!.reason as ReexError).code).toBe("CANCELLED");
    await until(() => t!.policy.liveTrajectories() === 0, 2_000, "sequences freed");
    const readyz = (await t.app.inject({ method: "GET", url: "/readyz" })).json();
    expect(readyz.queue.running).toBe(0);
  });

  it("authenticates with the Authorization header or ?key=, and refuses the upgrade with 401 otherwise", async () => {
    t = await makeApp({ server: { apiKeys: ["stream-key-0123"] } });
    const url = await wsUrl(t.app);
    await expect(connect(url).opened).rejects.toMatchObject({ statusCode: 401 });
    await expect(connect(`${url}?key=wrong-key-000`).opened).rejects.toMatchObject({ statusCode: 401 });
    for (const c of [connect(`${url}?key=stream-key-0123`), connect(url, { authorization: "Bearer stream-key-0123" })]) {
      await c.opened;
      c.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
      expect((await c.next("done")).answer).toBeTruthy();
    }
  });

  it("closes with 1009 when a message exceeds server.wsMaxPayloadBytes", async () => {
    t = await makeApp({ server: { wsMaxPayloadBytes: 1024 } });
    const c = connect(await wsUrl(t.app));
    await c.opened;
    c.ws.send(JSON.stringify({ database: t.dbId, question: "x".repeat(4096) }));
    const closed = await c.closed;
    expect(closed).toEqual({ code: 1009, reason: "PAYLOAD_TOO_LARGE" });
    expect(await c.next("error")).toMatchObject({ code: "PAYLOAD_TOO_LARGE", terminal: true });
    expect(String((c.messages.find((m) => m.type === "error") as { message: string }).message)).toContain("server.wsMaxPayloadBytes (1024)");
    expect(t.decoder.calls).toHaveLength(0);
  });

  it("ends with QUEUE_FULL when the generation queue is full", async () => {
    const decoder = new ScriptedDecoder(50, 20);
    t = await makeApp({ server: { maxConcurrent: 1, maxQueued: 0 }, decoder });
    const url = await wsUrl(t.app);
    const first = connect(url);
    await first.opened;
    first.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    await first.next("token");
    const second = connect(url);
    await second.opened;
    second.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    expect(await second.next("error")).toMatchObject({ code: "QUEUE_FULL", terminal: true });
    first.ws.close();
  });

  it("ends an idle socket that sends no request within server.connectionTimeoutMs", async () => {
    t = await makeApp({ server: { connectionTimeoutMs: 150 } });
    const c = connect(await wsUrl(t.app));
    await c.opened;
    expect(await c.next("error")).toMatchObject({ code: "BAD_REQUEST", terminal: true });
    expect((await c.closed).code).toBe(1008);
  });
});

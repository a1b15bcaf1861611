import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { ScriptedDecoder, listen, makeApp, until, type TestApp } from "./helpers.js";
import { connect } from "./ws-client.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

function post(port: number, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

describe("graceful shutdown", () => {
  it("lets in-flight work finish, refuses new work, turns /readyz to 503 and closes idle sockets with 1001", async () => {
    const decoder = new ScriptedDecoder(150, 6);
    let closedDeps = 0;
    t = await makeApp({ decoder, deps: { shutdownGraceMs: 5_000, close: async () => void closedDeps++ } });
    const { port, url } = await listen(t.app);

    const inflight = post(port, "/v1/sql", { database: t.dbId, question: "q" });
    const stream = connect(`ws://127.0.0.1:${port}/v1/stream`);
    const idle = connect(`ws://127.0.0.1:${port}/v1/stream`);
    await Promise.all([stream.opened, idle.opened]);
    stream.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    await until(() => decoder.started === 2, 2_000, "both decodes running");

    const closing = t.app.close();
    await new Promise((r) => setTimeout(r, 20));
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { code: string }).code).toBe("SHUTTING_DOWN");
    const refused = await post(port, "/v1/sql", { database: t.dbId, question: "q" });
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe("SHUTTING_DOWN");
    await expect(connect(`ws://127.0.0.1:${port}/v1/stream`).opened).rejects.toMatchObject({ statusCode: 503 });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(decoder.started).toBe(2);
    expect(closedDeps).toBe(0);

    const answered = await inflight;
    expect(answered.status).toBe(200);
    expect(answered.body.sql).toBe("SELECT name FROM singer WHERE age > 30");
    expect((await stream.next("done")).answer).toBeTruthy();
    expect((await stream.closed).code).toBe(1000);
    expect((await idle.closed).code).toBe(1001);
    await closing;
    expect(decoder.finished).toBe(2);
    expect(closedDeps).toBe(1);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  });

  it("aborts work still running after the grace period with SHUTTING_DOWN and closes its stream with 1001", async () => {
    const decoder = new ScriptedDecoder(50, 1000);
    t = await makeApp({ decoder, deps: { shutdownGraceMs: 200 } });
    const { port } = await listen(t.app);
    const inflight = post(port, "/v1/sql", { database: t.dbId, question: "q" });
    const stream = connect(`ws://127.0.0.1:${port}/v1/stream`);
    await stream.opened;
    stream.ws.send(JSON.stringify({ database: t.dbId, question: "q" }));
    await until(() => decoder.started === 2, 2_000, "both decodes running");

    const t0 = Date.now();
    await t.app.close();
    expect(Date.now() - t0).toBeLessThan(3_000);
    const answered = await inflight;
    expect(answered.status).toBe(503);
    expect(answered.body.code).toBe("SHUTTING_DOWN");
    expect(await stream.next("error")).toMatchObject({ code: "SHUTTING_DOWN", terminal: true });
    expect((await stream.closed).code).toBe(1001);
    expect(decoder.signals.every((s) => s.aborted)).toBe(true);
    expect(t.policy.liveTrajectories()).toBe(0);
    expect(t.policy.closed).toBe(true);
  });
});

import { afterEach, describe, expect, it } from "vitest";
import { makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("health and readiness", () => {
  it("GET /healthz answers 200 while the process runs", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "GET", url: "/healthz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
  });

  it("GET /readyz answers 200 with the policy info when the model is loaded", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "GET", url: "/readyz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      status: "ready",
      policy: { backend: "scripted", model: "scripted-test", device: "cpu" },
      queue: { running: 0, waiting: 0 },
    });
  });

  it("GET /readyz says where the model came from when the runtime tells it, and nothing otherwise", async () => {
    t = await makeApp({ deps: { model: { origin: "starter" } } });
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).json()).toMatchObject({ status: "ready", modelOrigin: "starter" });
    await t.cleanup();
    t = await makeApp();
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).json()).not.toHaveProperty("modelOrigin");
  });

  it("GET /readyz answers 503 MODEL_NOT_READY until the policy getter returns a policy", async () => {
    let loaded = false;
    t = await makeApp();
    const policy = t.policy;
    await t.app.close();
    t = await makeApp({ deps: { policy: () => (loaded ? policy : undefined) } });
    const before = await t.app.inject({ method: "GET", url: "/readyz" });
    expect(before.statusCode).toBe(503);
    expect(before.json()).toMatchObject({ code: "MODEL_NOT_READY" });
    loaded = true;
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
  });

  it("every response carries a request id, honouring a well-formed x-request-id", async () => {
    t = await makeApp();
    const given = await t.app.inject({ method: "GET", url: "/healthz", headers: { "x-request-id": "abc-123" } });
    expect(given.headers["x-request-id"]).toBe("abc-123");
    const bad = await t.app.inject({ method: "GET", url: "/healthz", headers: { "x-request-id": "bad id with spaces" } });
    expect(bad.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });
});

import { afterEach, describe, expect, it } from "vitest";
import { makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("rate limiting", () => {
  it("answers 429 RATE_LIMITED with retry-after past rateLimitPerMinute, per key, until the window resets", async () => {
    let now = 1_000_000 * 60_000 + 15_000;
    t = await makeApp({ server: { rateLimitPerMinute: 3, apiKeys: ["key-a-0123456789", "key-b-0123456789"] }, deps: { now: () => now } });
    const a = { authorization: "Bearer key-a-0123456789" };
    const b = { authorization: "Bearer key-b-0123456789" };
    for (let i = 0; i < 3; i++) expect((await t.app.inject({ method: "GET", url: "/v1/databases", headers: a })).statusCode).toBe(200);
    const limited = await t.app.inject({ method: "GET", url: "/v1/databases", headers: a });
    expect(limited.statusCode).toBe(429);
    expect(limited.json().code).toBe("RATE_LIMITED");
    expect(limited.headers["retry-after"]).toBe("45");
    expect((await t.app.inject({ method: "GET", url: "/v1/databases", headers: b })).statusCode).toBe(200);
    expect((await t.app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    now += 45_000;
    expect((await t.app.inject({ method: "GET", url: "/v1/databases", headers: a })).statusCode).toBe(200);
  });

  it("limits by client address when no keys are configured, and 0 turns it off", async () => {
    t = await makeApp({ server: { rateLimitPerMinute: 1 } });
    expect((await t.app.inject({ method: "GET", url: "/v1/databases" })).statusCode).toBe(200);
    expect((await t.app.inject({ method: "GET", url: "/v1/databases" })).statusCode).toBe(429);
    expect((await t.app.inject({ method: "GET", url: "/v1/databases", remoteAddress: "10.0.0.2" })).statusCode).toBe(200);
    await t.cleanup();
    t = await makeApp({ server: { rateLimitPerMinute: 0 } });
    for (let i = 0; i < 5; i++) expect((await t.app.inject({ method: "GET", url: "/v1/databases" })).statusCode).toBe(200);
  });
});

/**
 * Key guessing is throttled per client address before the key is checked, unknown API paths do not
 * tell a caller without a key which paths exist, and server.protectOpsEndpoints puts /metrics and
 * /readyz behind the keys. A real server on a real port.
 */
import { afterEach, describe, expect, it } from "vitest";
import { listen, makeApp, type TestApp } from "./helpers.js";

const KEY = "key-a-0123456789";
let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("failed authentication", () => {
  it("answers 429 with Retry-After before the 300th wrong-key request from one address, even to the right key", async () => {
    t = await makeApp({ server: { apiKeys: [KEY], rateLimitPerMinute: 0 } });
    const { url } = await listen(t.app);
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${url}/v1/databases`, { headers: { authorization: `Bearer wrong-key-${String(i).padStart(6, "0")}` } });
      statuses.push(res.status);
      if (res.status === 429) retryAfter ??= res.headers.get("retry-after");
      await res.arrayBuffer();
    }
    const first429 = statuses.indexOf(429);
    expect(first429).toBeGreaterThan(0);
    expect(first429).toBeLessThan(299);
    expect(statuses.slice(0, first429).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(first429).every((s) => s === 429)).toBe(true);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
    const right = await fetch(`${url}/v1/databases`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(right.status).toBe(429);
    expect(((await right.json()) as { code: string }).code).toBe("RATE_LIMITED");
  });

  it("does not count requests with a valid key", async () => {
    t = await makeApp({ server: { apiKeys: [KEY], rateLimitPerMinute: 0, authFailuresPerMinute: 3 } });
    for (let i = 0; i < 10; i++)
      expect((await t.app.inject({ method: "GET", url: "/v1/databases", headers: { authorization: `Bearer ${KEY}` } })).statusCode).toBe(200);
    for (let i = 0; i < 3; i++) expect((await t.app.inject({ method: "GET", url: "/v1/databases" })).statusCode).toBe(401);
    expect((await t.app.inject({ method: "GET", url: "/v1/databases" })).statusCode).toBe(429);
  });
});

describe("unknown API paths with keys on", () => {
  it("answer 401 without a key, like known ones, and 404 only to a valid key", async () => {
    t = await makeApp({ server: { apiKeys: [KEY] } });
    const { url } = await listen(t.app);
    for (const path of ["/v1/nothing-here", "/v1/databases/x/y/z", "/v1", "/v1/admin"]) {
      const anon = await fetch(`${url}${path}`);
      expect(anon.status, path).toBe(401);
      expect(((await anon.json()) as { code: string }).code).toBe("UNAUTHORIZED");
      const keyed = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(keyed.status, path).toBe(404);
      await keyed.arrayBuffer();
    }
  });
});

describe("server.protectOpsEndpoints", () => {
  it("is off by default: /metrics and /readyz answer without a key", async () => {
    t = await makeApp({ server: { apiKeys: [KEY] } });
    for (const path of ["/metrics", "/readyz"]) expect((await t.app.inject({ method: "GET", url: path })).statusCode, path).toBe(200);
  });

  it("on, /metrics and /readyz need a key while /healthz stays open", async () => {
    t = await makeApp({ server: { apiKeys: [KEY], protectOpsEndpoints: true } });
    const { url } = await listen(t.app);
    for (const path of ["/metrics", "/readyz"]) {
      expect((await fetch(`${url}${path}`)).status, path).toBe(401);
      expect((await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${KEY}` } })).status, path).toBe(200);
    }
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
  });
});

/**
 * Key guessing is throttled per client address and per presented key prefix (a valid key always
 * gets through), unknown API paths do not
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
  it("answers 429 with Retry-After before the 300th wrong-key request from one address, but lets the right key through", async () => {
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
    expect(right.status).toBe(200);
    const wrong = await fetch(`${url}/v1/databases`, { headers: { authorization: "Bearer wrong-key-again" } });
    expect(wrong.status).toBe(429);
    expect(((await wrong.json()) as { code: string }).code).toBe("RATE_LIMITED");
  });

  it("counts a presented key prefix's failures from every address, and each address's apart from others", async () => {
    t = await makeApp({ server: { apiKeys: [KEY], rateLimitPerMinute: 0, authFailuresPerMinute: 3 } });
    const from = (remoteAddress: string, authorization?: string) =>
      t!.app.inject({ method: "GET", url: "/v1/databases", remoteAddress, ...(authorization ? { headers: { authorization } } : {}) });
    // one guesser spread over addresses, keeping the first 8 characters of a key it knows
    for (let i = 0; i < 3; i++) expect((await from(`10.0.0.${i + 1}`, `Bearer key-a-01-guess-${i}`)).statusCode).toBe(401);
    const blocked = await from("10.0.0.9", "Bearer key-a-01-guess-9");
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().message).toMatch(/first 8 characters/);
    // the key itself, with that prefix, still gets through from anywhere
    expect((await from("10.0.0.9", `Bearer ${KEY}`)).statusCode).toBe(200);
    // another address with other keys is not throttled by them
    expect((await from("10.0.0.10", "Bearer other-prefix-1")).statusCode).toBe(401);
    for (let i = 0; i < 3; i++) await from("10.0.0.11");
    const address = await from("10.0.0.11", "Bearer fresh-prefix-x");
    expect(address.statusCode).toBe(429);
    expect(address.json().message).toMatch(/from this address/);
    expect((await from("10.0.0.11", `Bearer ${KEY}`)).statusCode).toBe(200);
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

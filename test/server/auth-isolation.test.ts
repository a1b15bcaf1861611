import { afterEach, describe, expect, it } from "vitest";
import { keyIdentity } from "../../src/server/testing.js";
import { makeApp, sqliteBytes, type TestApp } from "./helpers.js";

const KEY_A = "key-a-0123456789";
const KEY_B = "key-b-9876543210";
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("API keys", () => {
  it("requires a valid Bearer key on every /v1 route when keys are configured", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B] } });
    const routes: [string, string][] = [
      ["GET", "/v1/databases"],
      ["POST", "/v1/databases"],
      ["GET", `/v1/databases/${t.dbId}`],
      ["DELETE", "/v1/databases/x"],
      ["POST", "/v1/sql"],
      ["GET", "/v1/stream"],
    ];
    for (const [method, url] of routes) {
      for (const headers of [{}, bearer("wrong-key-000000"), { authorization: "Basic abc" }]) {
        const res = await t.app.inject({ method: method as "GET", url, headers });
        expect(res.statusCode, `${method} ${url}`).toBe(401);
        expect(res.json().code).toBe("UNAUTHORIZED");
        expect(res.headers["www-authenticate"]).toContain("Bearer");
      }
    }
    expect((await t.app.inject({ method: "GET", url: "/v1/databases", headers: bearer(KEY_A) })).statusCode).toBe(200);
    for (const open of ["/healthz", "/readyz", "/metrics", "/openapi.json", "/"]) {
      expect((await t.app.inject({ method: "GET", url: open })).statusCode, open).toBe(200);
    }
  });

  it("accepts ?key= only on the WebSocket route", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A] } });
    const res = await t.app.inject({ method: "GET", url: `/v1/databases?key=${KEY_A}` });
    expect(res.statusCode).toBe(401);
  });

  it("keeps key A's upload invisible and undeletable to key B, while path databases are shared", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B] } });
    const up = await t.app.inject({
      method: "POST",
      url: "/v1/databases?name=mine",
      headers: { ...bearer(KEY_A), "content-type": "application/octet-stream" },
      payload: sqliteBytes(t.dir),
    });
    expect(up.statusCode).toBe(201);
    const id = up.json().id as string;
    expect(t.registry.get(id).owner).toBe(keyIdentity(KEY_A));

    const listA = (await t.app.inject({ method: "GET", url: "/v1/databases", headers: bearer(KEY_A) })).json().databases.map((d: { id: string }) => d.id);
    const listB = (await t.app.inject({ method: "GET", url: "/v1/databases", headers: bearer(KEY_B) })).json().databases.map((d: { id: string }) => d.id);
    expect(listA).toEqual(expect.arrayContaining([id, t.dbId]));
    expect(listB).toEqual([t.dbId]);

    for (const [method, url] of [
      ["GET", `/v1/databases/${id}`],
      ["DELETE", `/v1/databases/${id}`],
    ] as const) {
      const res = await t.app.inject({ method, url, headers: bearer(KEY_B) });
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe("DB_NOT_FOUND");
    }
    const ask = await t.app.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_B), payload: { database: id, question: "q" } });
    expect(ask.json().code).toBe("DB_NOT_FOUND");
    expect(t.decoder.calls).toHaveLength(0);

    expect((await t.app.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_A), payload: { database: id, question: "q" } })).statusCode).toBe(200);
    expect((await t.app.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_B), payload: { database: t.dbId, question: "q" } })).statusCode).toBe(200);
    expect((await t.app.inject({ method: "DELETE", url: `/v1/databases/${id}`, headers: bearer(KEY_A) })).statusCode).toBe(204);
  });

  it("refuses deleting a shared upload with a key with FORBIDDEN", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A] } });
    const shared = await t.registry.registerBytes(sqliteBytes(t.dir), { name: "shared-upload" });
    const res = await t.app.inject({ method: "DELETE", url: `/v1/databases/${shared.id}`, headers: bearer(KEY_A) });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe("FORBIDDEN");
  });

  it("never logs the key", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A] } });
    await t.app.inject({ method: "GET", url: "/v1/databases", headers: bearer(KEY_A) });
    await t.app.inject({ method: "GET", url: `/v1/stream?key=${KEY_A}` });
    expect(t.logs.lines.length).toBeGreaterThan(0);
    expect(t.logs.text).not.toContain(KEY_A);
  });
});

/**
 * The response schemas registered on the routes (`schema.response`, per status) hold for the real
 * responses: every route that registers one is called for real, and each body is parsed with the
 * schema registered for its status, made strict all the way down, so a field the schema does not
 * document fails as surely as a missing or mistyped one.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import type { InjectOptions, LightMyRequestResponse } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { makeApp, makeSqlite, sqliteBytes, type TestApp } from "./helpers.js";

const KEY = "k-contract-0123456789";
const auth = { authorization: `Bearer ${KEY}` };

/** `schema` with every object in it strict (unknown keys fail) instead of stripping them. */
function strict(schema: z.ZodType): z.ZodType {
  const checks = (schema._zod.def as { checks?: unknown[] }).checks ?? [];
  if ((schema instanceof z.ZodObject || schema instanceof z.ZodArray) && checks.length > 0) throw new Error("strict() drops an object's or array's checks");
  if (schema instanceof z.ZodObject) return z.strictObject(Object.fromEntries(Object.entries(schema.shape).map(([k, v]) => [k, strict(v as z.ZodType)])));
  if (schema instanceof z.ZodArray) return z.array(strict(schema.element as z.ZodType));
  if (schema instanceof z.ZodOptional) return strict(schema.unwrap() as z.ZodType).optional();
  if (schema instanceof z.ZodNullable) return strict(schema.unwrap() as z.ZodType).nullable();
  if (schema instanceof z.ZodUnion) return z.union(schema.options.map((o) => strict(o as z.ZodType)));
  if (schema instanceof z.ZodRecord) return z.record(schema.keyType as z.ZodString, strict(schema.valueType as z.ZodType));
  return schema;
}

/** An app whose registered response schemas, and the route each request was served by, the test can see. */
interface Watched {
  t: TestApp;
  /** `METHOD url` of every route that registers response schemas → its schemas by status key (`200`, `4xx`). */
  registered: Map<string, Record<string, z.ZodType>>;
  /** Request id → `METHOD url` of the route that served it. */
  served: Map<string, string>;
}

async function watchedApp(options: Parameters<typeof makeApp>[0]): Promise<Watched> {
  const t = await makeApp(options);
  const registered = new Map<string, Record<string, z.ZodType>>();
  const served = new Map<string, string>();
  t.app.addHook("onRoute", (route) => {
    const response = route.schema?.response as Record<string, z.ZodType> | undefined;
    if (response && route.method !== "HEAD") registered.set(`${route.method} ${route.url}`, response);
  });
  t.app.addHook("onResponse", async (request) => {
    served.set(request.id, `${request.method} ${request.routeOptions.url}`);
  });
  await t.app.ready();
  return { t, registered, served };
}

/** Every `route status` checked, for the coverage assertions. */
const checked = new Set<string>();

/** Sends `request` and parses the body with the strict form of the schema its route registered for its status. */
async function expectContract(w: Watched, request: InjectOptions, status: number): Promise<LightMyRequestResponse> {
  const res = await w.t.app.inject(request);
  expect(res.statusCode, `${request.method} ${request.url}: ${res.body}`).toBe(status);
  const route = w.served.get(String(res.headers["x-request-id"])) ?? "unknown";
  const schemas = w.registered.get(route);
  expect(schemas, `${route} registers no response schema`).toBeDefined();
  const key = String(status) in schemas! ? String(status) : `${String(status)[0]}xx`;
  const schema = schemas![key];
  expect(schema, `${route} registers no response schema for ${status}`).toBeDefined();
  const parsed = strict(schema!).safeParse(res.body === "" ? undefined : res.json());
  expect(parsed.error?.issues ?? [], `${route} ${status} against its registered schema`).toEqual([]);
  checked.add(`${route} ${key}`);
  return res;
}

let apps: Watched[] = [];
afterEach(async () => {
  for (const w of apps) await w.t.cleanup();
  apps = [];
});

async function watch(options: Parameters<typeof makeApp>[0]): Promise<Watched> {
  const w = await watchedApp(options);
  apps.push(w);
  return w;
}

describe("response contract", () => {
  it("strict() fails a body with a field its schema does not document, at any depth", () => {
    const schema = z.object({ a: z.array(z.object({ b: z.string() }).optional()), c: z.record(z.string(), z.object({ d: z.number() })).nullable() });
    expect(strict(schema).safeParse({ a: [{ b: "x" }], c: { k: { d: 1 } } }).success).toBe(true);
    expect(strict(schema).safeParse({ a: [{ b: "x" }], c: null, extra: 1 }).success).toBe(false);
    expect(strict(schema).safeParse({ a: [{ b: "x", extra: 1 }], c: null }).success).toBe(false);
    expect(strict(schema).safeParse({ a: [], c: { k: { d: 1, extra: 1 } } }).success).toBe(false);
  });

  it("every registered response schema holds for real responses of its route", async () => {
    const root = mkdtempSync(join(tmpdir(), "reex-contract-"));
    const w = await watch({ server: { apiKeys: [KEY], protectOpsEndpoints: true, allowPathRegistration: true, allowedRoots: [root] } });
    const { t } = w;

    await expectContract(w, { method: "GET", url: "/healthz" }, 200);
    await expectContract(w, { method: "GET", url: "/readyz", headers: auth }, 200);
    await expectContract(w, { method: "GET", url: "/readyz" }, 401);
    await expectContract(w, { method: "GET", url: "/openapi.json" }, 200);

    const upload = { method: "POST" as const, url: "/v1/databases?name=up", headers: { ...auth, "content-type": "application/octet-stream" } };
    const created = await expectContract(w, { ...upload, payload: sqliteBytes(t.dir) }, 201);
    const emptyFile = join(t.dir, "empty.sqlite");
    const empty = new Database(emptyFile);
    empty.pragma("user_version = 1");
    empty.close();
    await expectContract(w, { ...upload, payload: Buffer.alloc(0) }, 400);
    const warned = await expectContract(w, { ...upload, url: "/v1/databases", payload: readFileSync(emptyFile) }, 201);
    expect(warned.json()).toHaveProperty("warning");
    await expectContract(w, { method: "POST", url: "/v1/databases", headers: auth, payload: { path: makeSqlite(root, "in.sqlite"), name: "inside" } }, 201);
    await expectContract(w, { method: "POST", url: "/v1/databases", headers: auth, payload: { path: "/etc/passwd" } }, 403);
    await expectContract(w, { method: "POST", url: "/v1/databases", headers: auth, payload: { path: 3, extra: true } }, 400);

    await expectContract(w, { method: "GET", url: "/v1/databases", headers: auth }, 200);
    await expectContract(w, { method: "GET", url: "/v1/databases" }, 401);
    await expectContract(w, { method: "GET", url: `/v1/databases/${created.json().id}`, headers: auth }, 200);
    await expectContract(w, { method: "GET", url: `/v1/databases/${t.dbId}`, headers: auth }, 200);
    await expectContract(w, { method: "GET", url: "/v1/databases/nope", headers: auth }, 404);
    await expectContract(w, { method: "DELETE", url: `/v1/databases/${created.json().id}`, headers: auth }, 204);
    await expectContract(w, { method: "DELETE", url: `/v1/databases/${t.dbId}`, headers: auth }, 403);

    await expectContract(w, { method: "POST", url: "/v1/sql", headers: auth, payload: { database: t.dbId, question: "Who is older than 30?" } }, 200);
    const traced = await expectContract(
      w,
      { method: "POST", url: "/v1/sql", headers: auth, payload: { database: t.dbId, question: "Who?", includeTrace: true } },
      200,
    );
    expect(traced.json().trace.length).toBeGreaterThan(0);
    await expectContract(w, { method: "POST", url: "/v1/sql", headers: auth, payload: { database: t.dbId, question: "", nope: 1 } }, 400);
    await expectContract(w, { method: "POST", url: "/v1/sql", headers: auth, payload: { database: "nope", question: "q" } }, 404);

    await expectContract(w, { method: "GET", url: "/v1/stream" }, 401);

    const examples = `/v1/databases/${t.dbId}/examples`;
    const example = await expectContract(
      w,
      { method: "POST", url: examples, headers: auth, payload: { question: "Who is older than 30?", sql: "SELECT name FROM singer WHERE age > 30" } },
      201,
    );
    await expectContract(
      w,
      { method: "POST", url: examples, headers: auth, payload: { question: "Who is older than 30?", sql: "SELECT name FROM singer WHERE age >= 31" } },
      200,
    );
    await expectContract(w, { method: "POST", url: examples, headers: auth, payload: { question: "q", sql: "SELECT nope FROM singer" } }, 400);
    await expectContract(w, { method: "GET", url: examples, headers: auth }, 200);
    await expectContract(w, { method: "DELETE", url: `${examples}/${example.json().id}`, headers: auth }, 204);
    await expectContract(w, { method: "DELETE", url: `${examples}/${example.json().id}`, headers: auth }, 404);
    await expectContract(w, { method: "POST", url: "/v1/sql", headers: auth, payload: { database: t.dbId, question: "Who?", conversation: "c-1" } }, 200);
    await expectContract(w, { method: "GET", url: "/v1/conversations", headers: auth }, 200);
    await expectContract(w, { method: "GET", url: "/v1/conversations/c-1", headers: auth }, 200);
    await expectContract(w, { method: "DELETE", url: "/v1/conversations/c-1", headers: auth }, 204);
    await expectContract(w, { method: "GET", url: "/v1/conversations/c-1", headers: auth }, 404);

    const limited = await watch({ server: { rateLimitPerMinute: 1 } });
    await expectContract(limited, { method: "GET", url: "/v1/databases" }, 200);
    const refused = await expectContract(limited, { method: "GET", url: "/v1/databases" }, 429);
    expect(refused.json().details.retryAfterSeconds).toBeGreaterThan(0);

    const loading = await watch({ deps: { policy: () => undefined } });
    await expectContract(loading, { method: "GET", url: "/readyz" }, 503);

    const routes = [...w.registered.keys()];
    expect(
      routes.filter((route) => ![...checked].some((c) => c.startsWith(`${route} `))),
      "routes with response schemas never called",
    ).toEqual([]);
    const successes = [...w.registered].flatMap(([route, schemas]) =>
      Object.keys(schemas)
        .filter((k) => /^\d+$/.test(k))
        .map((k) => `${route} ${k}`),
    );
    expect(
      successes.filter((s) => !checked.has(s)),
      "success statuses never seen",
    ).toEqual([]);
  });
});

/**
 * Teaching a database on the shipped starter model, through the real fastify app (app.inject and a
 * real WebSocket), a real registry in a temp folder, real SQLite files and the real executor: a
 * verified example is shown to the model for a similar question on its database only, to its key
 * only, and after a restart; a correction that does not run is refused and stores nothing; a
 * follow-up's prompt holds the previous turn's SQL. The starter is prompted in the `generic` profile
 * here: its own `reex` profile shows no examples (the starter answers worse with them).
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig, type Config } from "../../src/config/index.js";
import { createDecoder, type Decode } from "../../src/decoding/index.js";
import { createLlamaPolicy, type ChatMessage, type Policy } from "../../src/policy/index.js";
import { buildApp } from "../../src/server/index.js";
import { DatabaseRegistry, ExecutorPool } from "../../src/sql/index.js";
import { makeSqlite, sqliteBytes, listen } from "./helpers.js";
import { connect } from "./ws-client.js";

const STARTER = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const KEY_A = "key-aaaaaaaa-teaching";
const KEY_B = "key-bbbbbbbb-teaching";
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
/** Short, greedy answers: the tests are about what the prompt holds and what the API keeps, not about the answer. */
const ASK = { strategy: "greedy", maxInteractions: 1, maxTokens: 160 } as const;

let dir: string;
let config: Config;
let policy: Policy;
let executor: ExecutorPool;
let decode: Decode & { close(): void };
/** The user message of every prompt the policy rendered, in order. */
const prompts: string[] = [];

/** The starter policy, with each rendered prompt's user message recorded. */
function recording(inner: Policy): Policy {
  return new Proxy(inner, {
    get(target, key) {
      if (key === "renderChat")
        return (messages: ChatMessage[], options?: unknown) => {
          prompts.push(messages.find((m) => m.role === "user")?.content ?? "");
          return (target.renderChat as (m: ChatMessage[], o?: unknown) => unknown)(messages, options);
        };
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** An app over the registry folder `dataDir` (a new registry read from it, as after a restart). */
function app(): { app: FastifyInstance; registry: DatabaseRegistry } {
  const registry = new DatabaseRegistry({ dataDir: config.sql.dataDir });
  return { app: buildApp({ config, registry, decode, policy, executor, close: async () => undefined }), registry };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-teaching-"));
  config = parseConfig({
    server: { apiKeys: [KEY_A, KEY_B], logLevel: "silent", port: 0 },
    sql: { dataDir: join(dir, "data") },
    policy: { threads: 1, profile: "generic" },
  });
  policy = recording(await createLlamaPolicy({ model: STARTER, gpu: "cpu", threads: 1, contextSize: 4096, sequences: 4 }));
  executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  decode = createDecoder({ policy, executor, config, indexDir: join(dir, "indexes") });
}, 120_000);

afterAll(async () => {
  decode?.close();
  await executor?.close();
  await policy?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("verified examples, corrections and follow-ups on the starter model", () => {
  let shared: string;
  let other: string;
  let exampleId: string;

  it("shows an example added with one request to the model for a similar question on its database, and names it in the answer", {
    timeout: 180_000,
  }, async () => {
    const { app: a, registry } = app();
    try {
      shared = (await registry.registerPath(makeSqlite(dir, "singers.sqlite"), { name: "singers" })).id;
      other = (await registry.registerPath(makeSqlite(dir, "singers-2.sqlite"), { name: "singers-2" })).id;
      const sql = "SELECT COUNT(*) FROM singer WHERE country = 'France'";
      const added = await a.inject({
        method: "POST",
        url: `/v1/databases/${shared}/examples`,
        headers: bearer(KEY_A),
        payload: { question: "How many singers are from France?", sql },
      });
      expect(added.statusCode, added.body).toBe(201);
      const example = added.json();
      expect(example).toMatchObject({
        question: "How many singers are from France?",
        sql,
        columns: ["COUNT(*)"],
        rowCount: 1,
        origin: "added",
        shared: false,
        created: true,
      });
      exampleId = example.id;

      const asked = await a.inject({
        method: "POST",
        url: "/v1/sql",
        headers: bearer(KEY_A),
        payload: { database: shared, question: "How many singers are from the Netherlands?", ...ASK },
      });
      expect(asked.statusCode, asked.body).toBe(200);
      const answer = asked.json();
      expect(answer.examples).toEqual([{ id: exampleId, question: "How many singers are from France?", score: expect.any(Number) }]);
      expect(answer.examples[0].score).toBeGreaterThan(0);
      expect(answer.usage.exampleTokens).toBeGreaterThan(0);
      expect(typeof answer.answerId).toBe("string");
      expect(prompts.at(-1)).toContain("Verified examples on this database:");
      expect(prompts.at(-1)).toContain(`<final_sql>${sql}</final_sql>`);
    } finally {
      await a.close();
    }
  });

  it("does not show it on another database, nor to another key on the same one", { timeout: 180_000 }, async () => {
    const { app: a } = app();
    try {
      const question = "How many singers are from the Netherlands?";
      const elsewhere = await a.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_A), payload: { database: other, question, ...ASK } });
      expect(elsewhere.statusCode, elsewhere.body).toBe(200);
      expect(elsewhere.json().examples).toEqual([]);
      expect(prompts.at(-1)).not.toContain("Verified examples");
      const otherKey = await a.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_B), payload: { database: shared, question, ...ASK } });
      expect(otherKey.json().examples).toEqual([]);
      expect(prompts.at(-1)).not.toContain("Verified examples");
      const listed = await a.inject({ method: "GET", url: `/v1/databases/${shared}/examples`, headers: bearer(KEY_B) });
      expect(listed.json()).toEqual({ examples: [] });
      const taken = await a.inject({ method: "DELETE", url: `/v1/databases/${shared}/examples/${exampleId}`, headers: bearer(KEY_B) });
      expect(taken.statusCode).toBe(404);
      expect(taken.json().code).toBe("EXAMPLE_NOT_FOUND");
    } finally {
      await a.close();
    }
  });

  it("keeps it across a restart over the same registry folder", { timeout: 180_000 }, async () => {
    const { app: a } = app();
    try {
      const listed = await a.inject({ method: "GET", url: `/v1/databases/${shared}/examples`, headers: bearer(KEY_A) });
      expect(listed.json().examples.map((e: { id: string }) => e.id)).toEqual([exampleId]);
      const asked = await a.inject({
        method: "POST",
        url: "/v1/sql",
        headers: bearer(KEY_A),
        payload: { database: shared, question: "How many singers are from France?", ...ASK },
      });
      expect(asked.json().examples.map((e: { id: string }) => e.id)).toEqual([exampleId]);
      const none = await a.inject({
        method: "POST",
        url: "/v1/sql",
        headers: bearer(KEY_A),
        payload: { database: shared, question: "How many singers are from France?", examples: 0, ...ASK },
      });
      expect(none.json().examples).toEqual([]);
    } finally {
      await a.close();
    }
  });

  it("refuses a correction whose SQL does not run with a typed 400 and the SQLite error, and stores nothing", { timeout: 180_000 }, async () => {
    const { app: a } = app();
    try {
      const asked = await a.inject({
        method: "POST",
        url: "/v1/sql",
        headers: bearer(KEY_A),
        payload: { database: shared, question: "Which singers are older than 40?", ...ASK },
      });
      const { answerId } = asked.json();
      const files = readdirSync(join(config.sql.dataDir, "examples")).sort();
      const wrong = await a.inject({
        method: "POST",
        url: `/v1/databases/${shared}/examples`,
        headers: bearer(KEY_A),
        payload: { answerId, sql: "SELECT nme FROM singer WHERE age > 40" },
      });
      expect(wrong.statusCode).toBe(400);
      expect(wrong.json()).toMatchObject({ code: "EXAMPLE_SQL_FAILED", details: { sqlCode: "SQL_NO_SUCH_COLUMN" } });
      expect(wrong.json().details.sqlMessage).toContain("nme");
      const written = await a.inject({
        method: "POST",
        url: `/v1/databases/${shared}/examples`,
        headers: bearer(KEY_A),
        payload: { answerId, sql: "DELETE FROM singer" },
      });
      expect(written.json()).toMatchObject({ code: "EXAMPLE_SQL_FAILED", details: { sqlCode: "SQL_REFUSED" } });
      const listed = await a.inject({ method: "GET", url: `/v1/databases/${shared}/examples`, headers: bearer(KEY_A) });
      expect(listed.json().examples.map((e: { id: string }) => e.id)).toEqual([exampleId]);
      expect(readdirSync(join(config.sql.dataDir, "examples")).sort()).toEqual(files);
      const foreign = await a.inject({ method: "POST", url: `/v1/databases/${shared}/examples`, headers: bearer(KEY_B), payload: { answerId } });
      expect(foreign.statusCode).toBe(404);
      expect(foreign.json().code).toBe("ANSWER_NOT_FOUND");
      const corrected = await a.inject({
        method: "POST",
        url: `/v1/databases/${shared}/examples`,
        headers: bearer(KEY_A),
        payload: { answerId, sql: "SELECT name FROM singer WHERE age > 40" },
      });
      expect(corrected.statusCode, corrected.body).toBe(201);
      expect(corrected.json()).toMatchObject({ question: "Which singers are older than 40?", origin: "corrected", answerId, rowCount: 2 });
    } finally {
      await a.close();
    }
  });

  it("puts the previous turn's question and SQL in a follow-up's prompt, over REST and the WebSocket", { timeout: 240_000 }, async () => {
    const { app: a } = app();
    try {
      const first = await a.inject({
        method: "POST",
        url: "/v1/sql",
        headers: bearer(KEY_A),
        payload: { database: shared, question: "Which singers are from France?", conversation: "tour-1", examples: 0, ...ASK },
      });
      const turn1 = first.json();
      expect(turn1.conversation).toEqual({ id: "tour-1", turn: 1, turnsShown: 0 });
      const { url } = await listen(a);
      const client = connect(`${url.replace("http", "ws")}/v1/stream`, bearer(KEY_A));
      await client.opened;
      client.ws.send(JSON.stringify({ database: shared, question: "And which of them are older than 40?", conversation: "tour-1", examples: 0, ...ASK }));
      const done = (await client.next("done")) as { answer: { conversation: unknown; answerId: string } };
      expect(done.answer.conversation).toEqual({ id: "tour-1", turn: 2, turnsShown: 1 });
      const prompt = prompts.at(-1)!;
      expect(prompt).toContain("Earlier in this conversation");
      expect(prompt).toContain("Question: Which singers are from France?");
      if (turn1.sql) expect(prompt).toContain(`<final_sql>${turn1.sql}</final_sql>`);
      expect(prompt.indexOf("Which singers are from France?")).toBeLessThan(prompt.indexOf("And which of them are older than 40?"));
      const thread = await a.inject({ method: "GET", url: "/v1/conversations/tour-1", headers: bearer(KEY_A) });
      expect(thread.json().turns.map((t: { question: string }) => t.question)).toEqual([
        "Which singers are from France?",
        "And which of them are older than 40?",
      ]);
      expect((await a.inject({ method: "GET", url: "/v1/conversations/tour-1", headers: bearer(KEY_B) })).statusCode).toBe(404);
    } finally {
      await a.close();
    }
  });

  it("forgets a deleted upload's examples", { timeout: 60_000 }, async () => {
    const { app: a } = app();
    try {
      const up = await a.inject({
        method: "POST",
        url: "/v1/databases?name=mine",
        headers: { ...bearer(KEY_A), "content-type": "application/octet-stream" },
        payload: sqliteBytes(dir, "up.sqlite"),
      });
      const id = up.json().id;
      const added = await a.inject({
        method: "POST",
        url: `/v1/databases/${id}/examples`,
        headers: bearer(KEY_A),
        payload: { question: "How many singers?", sql: "SELECT COUNT(*) FROM singer" },
      });
      expect(added.statusCode).toBe(201);
      expect((await a.inject({ method: "DELETE", url: `/v1/databases/${id}`, headers: bearer(KEY_A) })).statusCode).toBe(204);
      expect(readdirSync(join(config.sql.dataDir, "examples"))).not.toContain(`${id}.json`);
    } finally {
      await a.close();
    }
  });
});

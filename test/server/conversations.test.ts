/**
 * Conversations and answer ids over the real fastify app with a scripted decoder: each key's
 * conversation ids are its own, earlier turns reach the decoder as `turns`, conversations expire,
 * and they are listed and deleted through /v1/conversations.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { buildApp } from "../../src/server/index.js";
import { DatabaseRegistry } from "../../src/sql/index.js";
import { ScriptedDecoder, fakePolicy, makeSqlite, sleep } from "./helpers.js";

const KEY_A = "key-aaaaaaaa-convo";
const KEY_B = "key-bbbbbbbb-convo";
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

let dir: string | undefined;
let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  app = undefined;
  dir = undefined;
});

async function start(teach: Record<string, number> = {}): Promise<{ app: FastifyInstance; decoder: ScriptedDecoder; db: string }> {
  dir = mkdtempSync(join(tmpdir(), "reex-convo-"));
  const config = parseConfig({ server: { apiKeys: [KEY_A, KEY_B], logLevel: "silent" }, sql: { dataDir: join(dir, "data") }, teach });
  const registry = new DatabaseRegistry({ dataDir: config.sql.dataDir });
  const db = (await registry.registerPath(makeSqlite(dir), { name: "singers" })).id;
  const decoder = new ScriptedDecoder(1, 1);
  app = buildApp({ config, registry, decode: decoder.decode, policy: fakePolicy() });
  return { app, decoder, db };
}

const ask = (a: FastifyInstance, key: string, payload: Record<string, unknown>) =>
  a.inject({ method: "POST", url: "/v1/sql", headers: bearer(key), payload: { strategy: "greedy", ...payload } });

describe("conversations", () => {
  it("hands the decoder each earlier turn's question, SQL and result summary, for the key that asked them only", async () => {
    const { app: a, decoder, db } = await start();
    const first = await ask(a, KEY_A, { database: db, question: "Who is older than 30?", conversation: "c1" });
    expect(first.json().conversation).toEqual({ id: "c1", turn: 1, turnsShown: 0 });
    expect(decoder.calls[0]!.turns).toBeUndefined();
    await ask(a, KEY_A, { database: db, question: "And of those, who is from France?", conversation: "c1" });
    expect(decoder.calls[1]!.turns).toEqual([
      {
        question: "Who is older than 30?",
        sql: "SELECT name FROM singer WHERE age > 30",
        summary: "columns name, blob, big; 2 rows; first row: Joe Sharp | <3 bytes> | 9007199254740993",
      },
    ]);
    // the same id under another key is another conversation
    const b = await ask(a, KEY_B, { database: db, question: "How many concerts?", conversation: "c1" });
    expect(b.json().conversation).toMatchObject({ id: "c1", turn: 1 });
    expect(decoder.calls[2]!.turns).toBeUndefined();

    const listA = (await a.inject({ method: "GET", url: "/v1/conversations", headers: bearer(KEY_A) })).json();
    expect(listA.conversations).toEqual([expect.objectContaining({ id: "c1", turns: 2, databases: [db] })]);
    const readB = (await a.inject({ method: "GET", url: "/v1/conversations/c1", headers: bearer(KEY_B) })).json();
    expect(readB.turns.map((t: { question: string }) => t.question)).toEqual(["How many concerts?"]);

    expect((await a.inject({ method: "DELETE", url: "/v1/conversations/c1", headers: bearer(KEY_B) })).statusCode).toBe(204);
    expect((await a.inject({ method: "GET", url: "/v1/conversations/c1", headers: bearer(KEY_B) })).json().code).toBe("CONVERSATION_NOT_FOUND");
    expect((await a.inject({ method: "GET", url: "/v1/conversations/c1", headers: bearer(KEY_A) })).json().turns).toHaveLength(2);
  });

  it("forgets a conversation unused for teach.conversationTtlMs", async () => {
    const { app: a, decoder, db } = await start({ conversationTtlMs: 200 });
    await ask(a, KEY_A, { database: db, question: "Who is older than 30?", conversation: "short" });
    await sleep(300);
    const res = await a.inject({ method: "GET", url: "/v1/conversations/short", headers: bearer(KEY_A) });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe("CONVERSATION_NOT_FOUND");
    const again = await ask(a, KEY_A, { database: db, question: "And from France?", conversation: "short" });
    expect(again.json().conversation).toEqual({ id: "short", turn: 1, turnsShown: 0 });
    expect(decoder.calls[1]!.turns).toBeUndefined();
  });

  it("refuses a malformed conversation id and an unknown one's deletion", async () => {
    const { app: a, db } = await start();
    const bad = await ask(a, KEY_A, { database: db, question: "q", conversation: "no spaces please" });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().issues[0].path).toEqual(["body", "conversation"]);
    expect((await a.inject({ method: "DELETE", url: "/v1/conversations/nope", headers: bearer(KEY_A) })).json().code).toBe("CONVERSATION_NOT_FOUND");
  });

  it("keeps an answer citable by its id for its key and database only, for teach.answerTtlMs", async () => {
    const { app: a, db } = await start({ answerTtlMs: 1000 });
    // the first example starts the executor pool, which takes longer than the answers are kept here
    const warm = await a.inject({
      method: "POST",
      url: `/v1/databases/${db}/examples`,
      headers: bearer(KEY_A),
      payload: { question: "warm", sql: "SELECT 1" },
    });
    expect(warm.statusCode).toBe(201);
    const { answerId } = (await ask(a, KEY_A, { database: db, question: "Who is older than 30?" })).json();
    expect(answerId).toMatch(/^ans-/);
    const right = await a.inject({ method: "POST", url: `/v1/databases/${db}/examples`, headers: bearer(KEY_A), payload: { answerId } });
    expect(right.statusCode, right.body).toBe(201);
    expect(right.json()).toMatchObject({ question: "Who is older than 30?", sql: "SELECT name FROM singer WHERE age > 30", origin: "confirmed", rowCount: 3 });
    const again = await a.inject({ method: "POST", url: `/v1/databases/${db}/examples`, headers: bearer(KEY_A), payload: { answerId } });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ id: right.json().id, created: false });
    const { answerId: late } = (await ask(a, KEY_A, { database: db, question: "Who is younger than 30?" })).json();
    await sleep(1100);
    const expired = await a.inject({ method: "POST", url: `/v1/databases/${db}/examples`, headers: bearer(KEY_A), payload: { answerId: late } });
    expect(expired.statusCode).toBe(404);
    expect(expired.json().code).toBe("ANSWER_NOT_FOUND");
  });

  it("caps a key's examples per database with EXAMPLES_FULL", async () => {
    const { app: a, db } = await start({ maxExamples: 1 });
    const add = (key: string, question: string) =>
      a.inject({ method: "POST", url: `/v1/databases/${db}/examples`, headers: bearer(key), payload: { question, sql: "SELECT 1" } });
    expect((await add(KEY_A, "one")).statusCode).toBe(201);
    const full = await add(KEY_A, "two");
    expect(full.statusCode).toBe(409);
    expect(full.json().code).toBe("EXAMPLES_FULL");
    expect((await add(KEY_B, "two")).statusCode).toBe(201);
  });
});

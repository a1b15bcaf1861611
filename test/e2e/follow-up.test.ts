/**
 * A follow-up in a conversation on a real model: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, served at
 * the profile reex picks for it) through the real runtime and app, on the retail example database.
 * "How many orders were shipped to the United Kingdom?", then, in the same conversation, "And how
 * many of those were placed in 2023?": the second SQL keeps the first one's condition on the
 * country and adds the year. Skipped where models/ lacks the GGUF (`reex models pull
 * qwen2.5-coder-0.5b` fetches it).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { buildApp } from "../../src/server/index.js";

const QWEN = fileURLToPath(new URL("../../models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", import.meta.url));

let dataDir: string;
let runtime: Runtime;
let app: FastifyInstance;

beforeAll(async () => {
  if (!existsSync(QWEN)) return;
  dataDir = mkdtempSync(join(tmpdir(), "reex-follow-up-"));
  const config = parseConfig({ server: { logLevel: "silent" }, sql: { dataDir }, policy: { model: QWEN, gpu: "cpu", threads: 1, sequences: 4 } });
  runtime = await createRuntime(config);
  app = buildApp({ ...runtime, config });
}, 300_000);

afterAll(async () => {
  await app?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** The WHERE clause's conditions other than the year, lower-cased, spaces squeezed. */
function conditions(sql: string): string[] {
  const where = /\bwhere\b([\s\S]*?)(?:\bgroup\b|\border\b|\blimit\b|$)/i.exec(sql)?.[1] ?? "";
  return where
    .split(/\band\b/i)
    .map((c) => c.trim().replace(/\s+/g, " ").toLowerCase())
    .filter((c) => c.length > 0 && !c.includes("2023"));
}

describe.skipIf(!existsSync(QWEN))("a follow-up question in a conversation (Qwen2.5-Coder 0.5B)", () => {
  it("keeps the first question's conditions and adds the year", { timeout: 600_000 }, async () => {
    const ask = async (question: string) => {
      const res = await app.inject({ method: "POST", url: "/v1/sql", payload: { database: "retail", question, conversation: "uk", strategy: "greedy" } });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as { sql: string; conversation: { turn: number; turnsShown: number } };
    };
    const first = await ask("How many orders were shipped to the United Kingdom?");
    const second = await ask("And how many of those were placed in 2023?");
    expect(second.conversation).toMatchObject({ turn: 2, turnsShown: 1 });
    const kept = conditions(first.sql);
    expect(kept.length, first.sql).toBeGreaterThan(0);
    const now = conditions(second.sql);
    for (const c of kept) expect(now, `${second.sql} keeps ${c}`).toContain(c);
    expect(second.sql).toMatch(/2023/);
  });
});

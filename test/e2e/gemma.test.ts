/**
 * A real pretrained model through the whole loop: Gemma 3 270M (the base model, Q4_K_M, 262k-token
 * vocabulary, sliding-window attention) pulled by `reex models pull`, served by the real runtime
 * behind the real server on a real port. Its probes run and their results come back into its
 * context, a tree's branches share the prompt's KV, the generic profile's stop tags (split into
 * several tokens by Gemma's tokenizer) end its probes, constrained decoding gives SQL that parses,
 * and the WebSocket streams the same loop. What it answers is not checked: a 270M base model is
 * not accurate, and the README reports how often it is right.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { ensureGemma } from "../helpers/gemma.js";
import { connect } from "../server/ws-client.js";

const QUESTION = "How many doctors specialise in dermatology?";

let runtime: Runtime;
let server: RunningServer;
let dataDir: string;

interface Answer {
  sql: string | null;
  candidates: { sql: string | null; text?: string }[];
  usage: { promptTokens: number; evaluatedTokens: number; generatedTokens: number };
  trace: { type: string; [k: string]: unknown }[];
}

async function ask(body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${server.url}/v1/sql`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ database: "clinic", question: QUESTION, includeTrace: true, ...body }),
  });
  const out = (await res.json()) as Answer;
  expect(res.status, JSON.stringify(out).slice(0, 500)).toBe(200);
  return out;
}

beforeAll(async () => {
  const model = await ensureGemma();
  dataDir = mkdtempSync(join(tmpdir(), "reex-gemma-"));
  const config = parseConfig({
    server: { port: 0, logLevel: "silent" },
    sql: { dataDir },
    policy: { model, threads: 1, contextSize: 4096, sequences: 8 },
    agent: { maxTokens: 160, maxInteractions: 2 },
  });
  runtime = await createRuntime(config);
  server = await startServer(config, runtime);
}, 600_000);

afterAll(async () => {
  await server?.close();
  await runtime?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("Gemma 3 270M through the whole loop", () => {
  it("is served under the generic profile, and its tokenizer splits the profile's tags into several tokens", async () => {
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { profile?: { id: string } };
    expect(JSON.stringify(ready)).toMatch(/generic/);
    for (const tag of ["<intermediate_sql>", "</intermediate_sql>", "</final_sql>"]) expect(runtime.policy.tokenize(tag).length, tag).toBeGreaterThan(1);
    // training's endOfTurn "auto" reads Gemma's own end of turn, one control token
    expect(runtime.policy.info.endOfTurn).toBe("<end_of_turn>");
    expect(runtime.policy.tokenize("<end_of_turn>")).toHaveLength(1);
  });

  it("answers over REST: its probes stop at the split closing tag, run, and their results come back into its context", async () => {
    const a = await ask({ strategy: "greedy" });
    const probes = a.trace.filter((e) => e.type === "probe");
    const results = a.trace.filter((e) => e.type === "result");
    expect(probes.length).toBeGreaterThan(0);
    expect(results.length).toBe(probes.length);
    // the model generated after a result was injected: tokens follow the first result event
    const firstResult = a.trace.findIndex((e) => e.type === "result");
    expect(a.trace.slice(firstResult).some((e) => e.type === "token")).toBe(true);
    expect(a.usage.generatedTokens).toBeGreaterThan(10);
    expect(a.trace.at(-1)?.type).toBe("final");
    expect(runtime.policy.liveTrajectories()).toBe(0);
  }, 300_000);

  it("forks a tree whose branches share the prompt's KV: far fewer tokens evaluated than the candidates' prompts", async () => {
    const a = await ask({ strategy: "tree", candidates: 4, seed: 1, maxTokens: 48 });
    expect(a.candidates).toHaveLength(4);
    expect(a.usage.evaluatedTokens).toBeLessThan(a.usage.promptTokens * 2);
    expect(runtime.policy.liveTrajectories()).toBe(0);
  }, 300_000);

  it("writes SQL that parses under constrained decoding", async () => {
    const a = await ask({ strategy: "greedy", constrained: true, maxInteractions: 1 });
    const sqls = [...a.trace.filter((e) => e.type === "probe").map((e) => String(e.sql)), ...(a.sql ? [a.sql] : [])];
    expect(sqls.length, JSON.stringify(a.candidates).slice(0, 1500)).toBeGreaterThan(0);
    for (const sql of sqls) expect(sql, sql).toMatch(/^\s*(SELECT|WITH)\b/i);
  }, 300_000);

  it("streams the loop over the WebSocket", async () => {
    const client = connect(`${server.url.replace("http", "ws")}/v1/stream`);
    await client.opened;
    client.ws.send(JSON.stringify({ database: "clinic", question: QUESTION, strategy: "greedy", maxTokens: 96 }));
    const final = await client.next("final");
    expect(final).toBeDefined();
    expect(client.messages.some((m) => m.type === "token")).toBe(true);
    client.ws.close();
    await client.closed;
  }, 300_000);
});

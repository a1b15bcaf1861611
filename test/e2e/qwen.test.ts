/**
 * The default model through the whole loop: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M, 152k-token
 * vocabulary), pulled by `reex models pull`, served by the real runtime behind the real server on a
 * real port at the profile reex picks for it. It answers a question of the README's quick start
 * right over REST and MCP, its probes run and come back into its context, a tree's branches share
 * the prompt's KV, constrained decoding on its vocabulary gives SQL that parses, and the WebSocket
 * streams the same loop.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { call } from "../mcp/helpers.js";
import { ensureQwen } from "../helpers/qwen.js";
import { connect } from "../server/ws-client.js";

const QUESTION = "How many doctors specialise in dermatology?";

let runtime: Runtime;
let server: RunningServer;
let dataDir: string;

interface Answer {
  sql: string | null;
  result: { rows: unknown[][] } | null;
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
  dataDir = mkdtempSync(join(tmpdir(), "reex-qwen-"));
  // the default model, as npm start serves it when nothing is configured
  const config = parseConfig({
    server: { port: 0, logLevel: "silent" },
    sql: { dataDir },
    policy: { defaultModel: "qwen2.5-coder-0.5b", threads: 1, sequences: 8 },
    agent: { maxTokens: 200 },
  });
  await ensureQwen();
  runtime = await createRuntime(config);
  server = await startServer(config, runtime);
}, 900_000);

afterAll(async () => {
  await server?.close();
  await runtime?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("Qwen2.5-Coder-0.5B, the default model, through the whole loop", () => {
  it("is what a runtime with no policy.model serves, and /readyz says so", async () => {
    expect(runtime.model.origin).toBe("default");
    expect(runtime.model.path).toMatch(/qwen2\.5-coder-0\.5b-instruct-q4_k_m\.gguf$/);
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { modelOrigin?: string; modelName?: string };
    expect(ready.modelOrigin).toBe("default");
    expect(ready.modelName).toMatch(/Qwen2\.5 Coder 0\.5B/i);
  });

  it("answers the quick start's question right over REST (11 dermatologists)", async () => {
    const a = await ask({ strategy: "greedy" });
    expect(a.sql, JSON.stringify(a.candidates).slice(0, 1500)).toMatch(/specialty/i);
    expect(a.result?.rows).toEqual([[11]]);
    expect(a.trace.at(-1)?.type).toBe("final");
    expect(runtime.policy.liveTrajectories()).toBe(0);
  }, 300_000);

  it("runs its probes and reads their results: the tokens after a result are the model's", async () => {
    const a = await ask({ strategy: "greedy", question: "Which specialty has the most doctors?" });
    const probes = a.trace.filter((e) => e.type === "probe");
    const results = a.trace.filter((e) => e.type === "result");
    expect(results.length).toBe(probes.length);
    if (probes.length > 0) {
      const firstResult = a.trace.findIndex((e) => e.type === "result");
      expect(a.trace.slice(firstResult).some((e) => e.type === "token")).toBe(true);
    }
    expect(a.usage.generatedTokens).toBeGreaterThan(5);
  }, 300_000);

  it("forks a tree whose branches share the prompt's KV: far fewer tokens evaluated than the candidates' prompts", async () => {
    const a = await ask({ strategy: "tree", candidates: 4, seed: 1, maxTokens: 64 });
    expect(a.candidates).toHaveLength(4);
    expect(a.usage.evaluatedTokens).toBeLessThan(a.usage.promptTokens * 2);
    expect(runtime.policy.liveTrajectories()).toBe(0);
  }, 300_000);

  it("writes SQL that parses under constrained decoding on its 152k vocabulary", async () => {
    const a = await ask({ strategy: "greedy", constrained: true });
    const sqls = [...a.trace.filter((e) => e.type === "probe").map((e) => String(e.sql)), ...(a.sql ? [a.sql] : [])];
    expect(sqls.length, JSON.stringify(a.candidates).slice(0, 1500)).toBeGreaterThan(0);
    for (const sql of sqls) expect(sql, sql).toMatch(/^\s*(SELECT|WITH)\b/i);
  }, 300_000);

  it("answers over MCP with the same engine", async () => {
    const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`));
    const client = new Client({ name: "reex-qwen-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const r = await call(client, "ask", { database: "clinic", question: QUESTION }, { timeout: 300_000 });
      expect(r.isError ?? false, JSON.stringify(r.content).slice(0, 500)).toBe(false);
      expect(r.structuredContent!.sql).toMatch(/specialty/i);
      expect(r.structuredContent!.result.rows).toEqual([[11]]);
    } finally {
      await client.close();
    }
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

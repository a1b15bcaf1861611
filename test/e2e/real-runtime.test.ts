/**
 * The whole product with no test doubles: the runtime built from a parsed config (example databases
 * registered, the real executor pool, node-llama-cpp with the tiny GGUF, the real decoder) behind
 * the real fastify server on a real port, asked over HTTP and over a WebSocket.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { ensureTestModel } from "../helpers/model.js";
import { connect } from "../server/ws-client.js";

let runtime: Runtime;
let server: RunningServer;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "reex-e2e-"));
  const config = parseConfig({
    server: { port: 0, logLevel: "silent" },
    sql: { dataDir },
    policy: { model: await ensureTestModel(), threads: 1, contextSize: 4096, sequences: 12 },
    agent: { maxTokens: 96 },
  });
  runtime = await createRuntime(config);
  server = await startServer(config, runtime);
});

afterAll(async () => {
  await server?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("reex with its real parts", () => {
  it("reports a configured model on /readyz", async () => {
    const res = await fetch(`${server.url}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ready", modelOrigin: "configured", policy: { backend: "llama" } });
  });

  it("lists the example databases, registered by name", async () => {
    const res = await fetch(`${server.url}/v1/databases`);
    const body = (await res.json()) as { databases: { name: string }[] };
    expect(res.status).toBe(200);
    expect(body.databases.map((d) => d.name).sort()).toEqual(["clinic", "music", "retail"]);
  });

  it("answers POST /v1/sql through llama.cpp with the requested candidates, usage and trace", async () => {
    const res = await fetch(`${server.url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        database: "retail",
        question: "How many customers are there?",
        strategy: "linear",
        candidates: 3,
        maxInteractions: 2,
        seed: 5,
        includeTrace: true,
      }),
    });
    const body = (await res.json()) as {
      candidates: unknown[];
      usage: { promptTokens: number; evaluatedTokens: number; generatedTokens: number };
      trace: { type: string }[];
    };
    expect(res.status).toBe(200);
    expect(body.candidates).toHaveLength(3);
    expect(body.usage.promptTokens).toBeGreaterThan(100);
    expect(body.usage.generatedTokens).toBeGreaterThan(0);
    expect(body.trace.some((e) => e.type === "token")).toBe(true);
    expect(body.trace.at(-1)?.type).toBe("final");
    expect(runtime.policy.liveTrajectories()).toBe(0);
  });

  it("streams events over the WebSocket and frees every sequence when the client closes mid-way", async () => {
    const client = connect(`${server.url.replace("http", "ws")}/v1/stream`);
    await client.opened;
    client.ws.send(JSON.stringify({ database: "clinic", question: "Which doctors work in Leeds?", strategy: "tree", candidates: 4, seed: 3 }));
    await client.next("token");
    expect(runtime.policy.liveTrajectories()).toBeGreaterThan(0);
    client.ws.close();
    await client.closed;
    const deadline = Date.now() + 5000;
    while (runtime.policy.liveTrajectories() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(runtime.policy.liveTrajectories()).toBe(0);
  });
});

/**
 * What an answer says of itself, over a real port: a placeholder model's answer says so over REST
 * and the WebSocket (the runtime with no starter model, node-llama-cpp with the placeholder it
 * writes), and a final SQL that failed is not answerable and says why at the top level.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import type { Answer } from "../../src/decoding/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { listen, makeApp, type TestApp } from "../server/helpers.js";
import { connect } from "../server/ws-client.js";

describe("an answer from the placeholder model", () => {
  let runtime: Runtime;
  let server: RunningServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "reex-placeholder-"));
    const config = parseConfig({
      server: { port: 0, logLevel: "silent" },
      sql: { dataDir: join(dir, "data") },
      policy: { modelsDir: join(dir, "models"), threads: 1, sequences: 4 },
      agent: { maxTokens: 24 },
    });
    runtime = await createRuntime(config);
    server = await startServer(config, runtime);
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("says so over REST and over the WebSocket", async () => {
    expect(runtime.model.origin).toBe("placeholder");
    expect(readdirSync(join(dir, "models"))).toEqual(["reex-tiny-random.gguf"]);
    const res = await fetch(`${server.url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "clinic", question: "How many doctors are there?", seed: 1 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { notice?: string; confidence: number | null };
    expect(body.notice).toMatch(/random-weight placeholder model/);
    expect(body.confidence).toBeGreaterThanOrEqual(0);
    expect(body.confidence).toBeLessThanOrEqual(1);

    const ws = connect(`${server.url.replace("http", "ws")}/v1/stream`);
    await ws.opened;
    ws.ws.send(JSON.stringify({ database: "clinic", question: "How many doctors are there?", seed: 1 }));
    const final = (await ws.next("final")) as { confidence?: number };
    const done = (await ws.next("done")) as { answer: { notice?: string; confidence: number | null } };
    expect(done.answer.notice).toMatch(/random-weight placeholder model/);
    expect(typeof done.answer.confidence).toBe("number");
    expect(Math.abs((final.confidence ?? -1) - (done.answer.confidence ?? 0))).toBeLessThan(0.001);
    ws.ws.close();
    await ws.closed;
  }, 120_000);
});

describe("an answer whose final SQL failed", () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it("is not answerable, and says why at the top level over REST and the WebSocket", async () => {
    const failed: Answer = {
      sql: "SELECT nme FROM singer",
      answerable: true,
      result: { ok: false, error: { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message: "no such column: nme" }, elapsedMs: 0.2 },
      candidates: [
        {
          index: 0,
          path: "0",
          sql: "SELECT nme FROM singer",
          answerable: true,
          group: null,
          votes: 0,
          error: "SQL_NO_SUCH_COLUMN: no such column: nme",
          interactions: 0,
          meanLogprob: -1,
          text: "",
        },
      ],
      winner: 0,
      decidedBy: "fallback-logprob",
      usage: { promptTokens: 10, evaluatedTokens: 10, generatedTokens: 5 },
      timings: { totalMs: 1 },
    };
    t = await makeApp({ deps: { decode: async () => failed } });
    const { url } = await listen(t.app);
    const res = await fetch(`${url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "shared", question: "Names?" }),
    });
    const body = (await res.json()) as { answerable: boolean; reason?: string; error?: { code: string }; result: unknown; notice?: string };
    expect(body).toMatchObject({ answerable: false, result: null, error: { code: "SQL_NO_SUCH_COLUMN", message: "no such column: nme" } });
    expect(body.reason).toBe("the final SQL failed: SQL_NO_SUCH_COLUMN: no such column: nme");
    expect(body.notice).toBeUndefined();

    const ws = connect(`${url.replace("http", "ws")}/v1/stream`);
    await ws.opened;
    ws.ws.send(JSON.stringify({ database: "shared", question: "Names?" }));
    const done = (await ws.next("done")) as { answer: { answerable: boolean; error?: { code: string } } };
    expect(done.answer).toMatchObject({ answerable: false, error: { code: "SQL_NO_SUCH_COLUMN" } });
    ws.ws.close();
    await ws.closed;
  });
});

/**
 * /mcp end to end: the real server on a real port with the real runtime (tiny GGUF through
 * node-llama-cpp, example SQLite files), driven by the MCP SDK's Streamable HTTP client.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import type { AnswerRequest, DecodeContext } from "../../src/decoding/types.js";
import { buildExamples } from "../../src/examples/index.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { keyIdentity } from "../../src/server/testing.js";
import { ensureTestModel } from "../helpers/model.js";
import { HOSTILE_SQL, call, fingerprint, until } from "./helpers.js";

const KEY = "mcp-test-key-alpha";
const OTHER_KEY = "mcp-test-key-bravo";

let dir: string;
let retail: string;
let runtime: Runtime;
let server: RunningServer;
/** Every decode the server started: its token events and when it settled. */
const decodes: { tokens: number; settledAt?: number; error?: unknown }[] = [];
const clients: Client[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-mcp-http-"));
  const sets = await buildExamples(join(dir, "examples"));
  retail = sets.find((s) => s.dbId === "retail")!.path;
  const model = await ensureTestModel();
  const config = parseConfig({
    server: { host: "127.0.0.1", port: 0, apiKeys: [KEY, OTHER_KEY], logLevel: "warn" },
    // `generic`: the test model is detected as reex's, whose profile shows no verified examples, and add_example is tested here
    policy: { model, gpu: "cpu", threads: 1, profile: "generic" },
    sql: { dataDir: join(dir, "data"), maxRows: 25 },
    agent: { maxTokens: 256 },
  });
  runtime = await createRuntime(config, { examples: false });
  await runtime.registry.registerPath(retail);
  await runtime.registry.registerPath(sets.find((s) => s.dbId !== "retail")!.path, { owner: keyIdentity(OTHER_KEY) });
  const decode = (request: AnswerRequest, ctx: DecodeContext) => {
    const record: (typeof decodes)[number] = { tokens: 0 };
    decodes.push(record);
    return runtime
      .decode(request, {
        ...(ctx.signal ? { signal: ctx.signal } : {}),
        sink: (event) => {
          if (event.type === "token") record.tokens++;
          ctx.sink?.(event);
        },
      })
      .then(
        (answer) => {
          record.settledAt = performance.now();
          return answer;
        },
        (err: unknown) => {
          record.settledAt = performance.now();
          record.error = err;
          throw err;
        },
      );
  };
  server = await startServer(config, { ...runtime, decode, close: () => runtime.close() });
});

afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
});

afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function connect(key: string | undefined): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(
    new URL(`${server.url}/mcp`),
    key ? { requestInit: { headers: { authorization: `Bearer ${key}` } } } : {},
  );
  const client = new Client({ name: "reex-test", version: "1.0.0" });
  clients.push(client);
  await client.connect(transport);
  return { client, transport };
}

describe("/mcp over Streamable HTTP", () => {
  it("refuses a client without an API key, or with an unknown one, with UNAUTHORIZED", async () => {
    await expect(connect(undefined)).rejects.toMatchObject({ code: 401 });
    await expect(connect("not-a-configured-key")).rejects.toMatchObject({ code: 401 });
    const raw = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(raw.status).toBe(401);
    expect(((await raw.json()) as { code: string }).code).toBe("UNAUTHORIZED");
  });

  it("lists the tools and only the databases the key may see", async () => {
    const { client } = await connect(KEY);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["add_example", "ask", "describe_database", "list_databases", "list_examples", "run_sql"]);
    const mine = (await call(client, "list_databases", {})).structuredContent!.databases as { name: string }[];
    expect(mine.map((d) => d.name)).toEqual(["retail"]);
    const { client: other } = await connect(OTHER_KEY);
    const theirs = (await call(other, "list_databases", {})).structuredContent!.databases as { name: string }[];
    expect(theirs.map((d) => d.name).sort()).toEqual(expect.arrayContaining(["retail"]));
    expect(theirs.length).toBe(2);
  });

  it("stores a verified example with add_example, names it in a similar ask, keeps it from another key, and corrects an answer by its id", async () => {
    const { client } = await connect(KEY);
    const db = ((await call(client, "list_databases", {})).structuredContent!.databases as { id: string }[])[0]!.id;
    const bad = await call(client, "add_example", { database: db, question: "How many products?", sql: "SELECT nope FROM products" });
    expect(bad.isError).toBe(true);
    expect(bad.structuredContent).toMatchObject({ code: "EXAMPLE_SQL_FAILED", details: { sqlCode: "SQL_NO_SUCH_COLUMN" } });
    const added = await call(client, "add_example", { database: db, question: "How many products are there?", sql: "SELECT COUNT(*) FROM products" });
    expect(added.isError, JSON.stringify(added.structuredContent)).toBeFalsy();
    const id = added.structuredContent!.id as string;
    const listed = await call(client, "list_examples", { database: db });
    expect((listed.structuredContent!.examples as { id: string }[]).map((e) => e.id)).toEqual([id]);
    const asked = await call(client, "ask", { database: db, question: "How many products are still sold?", conversation: "m-1" });
    expect(asked.structuredContent).toMatchObject({ examples: [{ id, question: "How many products are there?" }], conversation: { id: "m-1", turn: 1 } });
    const answerId = asked.structuredContent!.answerId as string;
    const corrected = await call(client, "add_example", { database: db, answerId, sql: "SELECT COUNT(*) FROM products WHERE discontinued = 0" });
    expect(corrected.isError, JSON.stringify(corrected.structuredContent)).toBeFalsy();
    expect(corrected.structuredContent).toMatchObject({ question: "How many products are still sold?", origin: "corrected" });
    const { client: other } = await connect(OTHER_KEY);
    expect((await call(other, "list_examples", { database: db })).structuredContent!.examples).toEqual([]);
    const theirs = await call(other, "ask", { database: db, question: "How many products are there?" });
    expect(theirs.structuredContent!.examples).toEqual([]);
  });

  it("does not let another key use a session", async () => {
    const { transport } = await connect(KEY);
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${OTHER_KEY}`,
        "mcp-session-id": transport.sessionId!,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { code: string }).code).toBe("NOT_FOUND");
  });

  it("describes the example database as the model sees it", async () => {
    const { client } = await connect(KEY);
    const r = await call(client, "describe_database", { database: "retail", question: "How many customers live in Montreal?" });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent!.schema).toContain("customers.first_name");
    expect(r.structuredContent!.prompt).toMatch(/city : 'Montreal'/);
  });

  it("runs a good query and refuses hostile ones with SQL_REFUSED, leaving the file unchanged", async () => {
    const { client } = await connect(KEY);
    const db = new Database(retail, { readonly: true });
    const expected = (db.prepare("SELECT count(*) AS n FROM orders").get() as { n: number }).n;
    db.close();
    const good = await call(client, "run_sql", { database: "retail", sql: "SELECT count(*) AS n FROM orders" });
    expect(good.structuredContent!.rows).toEqual([[expected]]);
    const before = fingerprint(retail);
    for (const sql of HOSTILE_SQL) {
      const r = await call(client, "run_sql", { database: "retail", sql });
      expect(r.isError, sql).toBe(true);
      expect(r.structuredContent!.code, sql).toBe("SQL_REFUSED");
    }
    expect(fingerprint(retail)).toEqual(before);
  });

  it("answers ask through the server's queue with progress notifications", async () => {
    const { client } = await connect(KEY);
    const progress: Progress[] = [];
    const started = decodes.length;
    const r = await call(
      client,
      "ask",
      { database: "retail", question: "How many orders are there?", strategy: "linear", candidates: 2 },
      { onprogress: (p) => progress.push(p) },
    );
    expect(r.isError).toBeFalsy();
    expect(decodes.length).toBe(started + 1);
    expect(r.structuredContent!.candidates).toHaveLength(2);
    expect(r.structuredContent!.confidence).toBeGreaterThanOrEqual(0);
    expect(r.structuredContent!.confidence).toBeLessThanOrEqual(1);
    expect(r.structuredContent!.usage.generatedTokens).toBeGreaterThan(0);
    expect(decodes.at(-1)!.error).toBeUndefined();
    expect(progress.some((p) => p.message?.startsWith("generating: "))).toBe(true);
    // not the vote's notification: it can share a read with the answer, and the SDK client then drops it (see the stdio test)
    expect(r.structuredContent!.trace.at(-1)).toMatch(/^vote: /);
  });

  it("stops decoding when the client cancels an ask", async () => {
    const { client } = await connect(KEY);
    const controller = new AbortController();
    let notified = 0;
    const pending = call(
      client,
      "ask",
      { database: "retail", question: "List every order with its products", strategy: "linear", candidates: 16 },
      {
        signal: controller.signal,
        onprogress: () => {
          notified++;
        },
      },
    );
    await until(() => notified > 0, 30_000, "a progress notification");
    const decode = decodes.at(-1)!;
    controller.abort();
    await expect(pending).rejects.toThrow();
    await until(() => decode.settledAt !== undefined, 10_000, "the decode to stop");
    expect(decode.error).toMatchObject({ code: "CANCELLED" });
    const tokensAtStop = decode.tokens;
    await new Promise((r) => setTimeout(r, 300));
    expect(decode.tokens).toBe(tokensAtStop);
    expect(runtime.policy.liveTrajectories()).toBe(0);
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { queue: { running: number } };
    expect(ready.queue.running).toBe(0);
  });

  it("counts MCP requests against the key's rate limit like /v1", async () => {
    const limited = await startServer(
      parseConfig({ server: { host: "127.0.0.1", port: 0, apiKeys: [KEY], rateLimitPerMinute: 2, logLevel: "warn" }, sql: { dataDir: join(dir, "data") } }),
      {
        registry: runtime.registry,
        decode: runtime.decode,
        close: async () => undefined,
      },
    );
    try {
      const init = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
      };
      const post = () =>
        fetch(`${limited.url}/mcp`, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${KEY}` },
          body: JSON.stringify(init),
        });
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 3; i++) {
        last = await post();
        statuses.push(last.status);
        if (last.status !== 429) await last.body?.cancel();
      }
      expect(statuses).toEqual([200, 200, 429]);
      expect(last!.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(((await last!.json()) as { code: string }).code).toBe("RATE_LIMITED");
    } finally {
      await limited.close();
    }
  });
});

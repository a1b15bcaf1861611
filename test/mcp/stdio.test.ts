/**
 * `reex mcp` end to end: a real process over stdio, driven by the MCP SDK's own client, with the
 * tiny GGUF through node-llama-cpp and the example databases as real SQLite files.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildExamples } from "../../src/examples/index.js";
import { ensureTestModel } from "../helpers/model.js";
import { HOSTILE_SQL, call, fingerprint, until } from "./helpers.js";

let dir: string;
let retail: string;
let client: Client;
let stderr = "";
let model: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-mcp-stdio-"));
  const sets = await buildExamples(join(dir, "examples"));
  retail = sets.find((s) => s.dbId === "retail")!.path;
  model = await ensureTestModel();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "src/cli.ts", "mcp", "--no-examples", "--db", retail, "--policy.model", model, "--policy.gpu", "cpu", "--sql.maxRows", "25"],
    env: { ...(process.env as Record<string, string>), REEX_POLICY_THREADS: "1", REEX_SQL_DATA_DIR: join(dir, "data"), REEX_AGENT_MAX_TOKENS: "256" },
    stderr: "pipe",
  });
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  client = new Client({ name: "reex-test", version: "1.0.0" });
  await client.connect(transport);
});

afterAll(async () => {
  await client?.close();
  rmSync(dir, { recursive: true, force: true });
});

function logLines(): Record<string, unknown>[] {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe("reex mcp over stdio", () => {
  it("lists the six tools, each with a JSON schema of its arguments", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["add_example", "ask", "describe_database", "list_databases", "list_examples", "run_sql"]);
    const ask = tools.find((t) => t.name === "ask")!;
    expect(Object.keys(ask.inputSchema.properties ?? {}).sort()).toEqual([
      "candidates",
      "conversation",
      "database",
      "evidence",
      "examples",
      "question",
      "strategy",
    ]);
    expect(ask.inputSchema.required).toEqual(expect.arrayContaining(["database", "question"]));
  });

  it("lists the database given with --db, with its tables", async () => {
    const r = await call(client, "list_databases", {});
    expect(r.isError).toBeFalsy();
    const dbs = r.structuredContent!.databases as { id: string; name: string; tables: string[] }[];
    expect(dbs).toHaveLength(1);
    expect(dbs[0]!.name).toBe("retail");
    expect(dbs[0]!.tables.sort()).toEqual(["customers", "order_items", "orders", "products"]);
    const byId = await call(client, "run_sql", { database: dbs[0]!.id, sql: "SELECT count(*) FROM products" });
    expect(byId.isError).toBeFalsy();
    expect(byId.structuredContent!.database).toBe(dbs[0]!.id);
  });

  it("describes the example database by name as the model sees it, with the values a question matches", async () => {
    const plain = await call(client, "describe_database", { database: "retail" });
    expect(plain.isError).toBeFalsy();
    expect(plain.structuredContent!.schema).toContain("customers.first_name");
    expect(plain.structuredContent!.prompt).toBeUndefined();
    const asked = await call(client, "describe_database", { database: "retail", question: "How many customers live in Montreal?" });
    expect(asked.structuredContent!.prompt).toContain("How many customers live in Montreal?");
    expect(asked.structuredContent!.prompt).toMatch(/city : 'Montreal'/);
  });

  it("runs a read-only query with the row cap and returns the rows SQLite gives", async () => {
    const db = new Database(retail, { readonly: true });
    const expected = (db.prepare("SELECT count(*) AS n FROM customers WHERE city = 'Montreal'").get() as { n: number }).n;
    db.close();
    const count = await call(client, "run_sql", { database: "retail", sql: "SELECT count(*) AS n FROM customers WHERE city = 'Montreal'" });
    expect(count.isError).toBeFalsy();
    expect(count.structuredContent!.rows).toEqual([[expected]]);
    const all = await call(client, "run_sql", { database: "retail", sql: "SELECT customer_id FROM customers" });
    expect(all.structuredContent!.rows).toHaveLength(25);
    expect(all.structuredContent!.truncated).toBe(true);
  });

  it("refuses hostile SQL with SQL_REFUSED and leaves the file unchanged", async () => {
    const before = fingerprint(retail);
    for (const sql of HOSTILE_SQL) {
      const r = await call(client, "run_sql", { database: "retail", sql });
      expect(r.isError, sql).toBe(true);
      expect(r.structuredContent!.code, sql).toBe("SQL_REFUSED");
    }
    expect(fingerprint(retail)).toEqual(before);
  });

  it("answers an unknown database with DB_NOT_FOUND and bad arguments with BAD_REQUEST", async () => {
    const missing = await call(client, "run_sql", { database: "nope", sql: "SELECT 1" });
    expect(missing.structuredContent!.code).toBe("DB_NOT_FOUND");
    const bad = await call(client, "ask", { database: "retail", question: "", candidates: 0 });
    expect(bad.isError).toBe(true);
    expect(bad.structuredContent!.code).toBe("BAD_REQUEST");
    expect((bad.structuredContent!.issues as { path: string[] }[]).map((i) => i.path.join("."))).toEqual(
      expect.arrayContaining(["arguments.question", "arguments.candidates"]),
    );
  });

  it("serves each database's schema as a resource", async () => {
    const { resources } = await client.listResources();
    expect(resources).toHaveLength(1);
    const read = await client.readResource({ uri: resources[0]!.uri });
    const text = (read.contents[0] as { text: string }).text;
    expect(text).toContain("customers.first_name");
    await expect(client.readResource({ uri: "reex://databases/nope/schema" })).rejects.toMatchObject({ code: -32002 });
  });

  it("answers ask with the final SQL, candidates and their votes, a trace, and progress notifications while it decodes", async () => {
    const progress: Progress[] = [];
    const r = await call(
      client,
      "ask",
      { database: "retail", question: "How many customers are there?", strategy: "linear", candidates: 2 },
      { onprogress: (p) => progress.push(p) },
    );
    expect(r.isError).toBeFalsy();
    const answer = r.structuredContent!;
    expect(answer.candidates).toHaveLength(2);
    for (const c of answer.candidates as { votes: number; path: string }[]) expect(typeof c.votes).toBe("number");
    expect(Array.isArray(answer.trace)).toBe(true);
    expect(answer.trace.at(-1)).toMatch(/^vote: /);
    expect(answer.usage.generatedTokens).toBeGreaterThan(0);
    expect(progress.some((p) => p.message?.startsWith("generating: "))).toBe(true);
    // the later notifications (the candidates' final lines, the vote's) are not asserted: the SDK client
    // handles a notification a microtask after reading it but a response at once, so when one read holds
    // both, the client drops that progress (a clean-clone CI run got only the "generating" one, the
    // two candidates having finished together in a 323 ms answer)
    for (let i = 1; i < progress.length; i++) expect(progress[i]!.progress).toBeGreaterThan(progress[i - 1]!.progress);
  });

  it("stops decoding when the client cancels an ask, and frees the model's sequences", async () => {
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
    controller.abort();
    await expect(pending).rejects.toThrow();
    await until(() => logLines().some((l) => l.tool === "ask" && l.code === "CANCELLED"), 10_000, "the cancelled ask's log line");
    const asks = logLines().filter((l) => l.tool === "ask");
    expect(asks.at(-1)).toMatchObject({ msg: "mcp tool refused", code: "CANCELLED", liveTrajectories: 0 });
    const after = await call(client, "list_databases", {});
    expect(after.isError).toBeFalsy();
  });

  it("writes nothing but protocol messages to stdout and exits when the client closes stdin", async () => {
    const messages = [
      { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } } },
      { jsonrpc: "2.0", method: "notifications/initialized" },
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list_databases", arguments: {} } },
    ];
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "src/cli.ts", "mcp", "--no-examples", "--db", retail, "--policy.model", model, "--policy.gpu", "cpu"],
      {
        env: { ...process.env, REEX_POLICY_THREADS: "1", REEX_SQL_DATA_DIR: join(dir, "data-raw") },
        stdio: ["pipe", "pipe", "ignore"],
      },
    );
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
    child.stdin.write(messages.map((m) => JSON.stringify(m)).join("\n") + "\n");
    await until(() => stdout.split("\n").length > 2, 30_000, "two answers on stdout");
    child.stdin.end();
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r("still running"), 15_000))]);
    if (code === "still running") child.kill();
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split("\n");
    const parsed = lines.map((l) => JSON.parse(l) as { jsonrpc: string; id?: number; result?: { structuredContent?: { databases: { name: string }[] } } });
    expect(parsed.every((m) => m.jsonrpc === "2.0")).toBe(true);
    expect(parsed.map((m) => m.id)).toEqual([1, 2]);
    expect(parsed[1]!.result!.structuredContent!.databases.map((d) => d.name)).toEqual(["retail"]);
  });
});

/**
 * The front ends on a real PostgreSQL server, through the real CLI processes: `reex serve` with a
 * `--db postgres://…` flag and the `sql.postgres` setting (one password inline, one from the
 * environment), asked over POST /v1/sql and the WebSocket stream with the tiny GGUF; `reex mcp`
 * listing and querying it; `reex exec`. Every answer, log line, metric and error is then grepped
 * for the password and the server's address.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTestModel } from "../helpers/model.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";
import { call } from "../mcp/helpers.js";
import { connect } from "../server/ws-client.js";

let pgServer: PgServer;
let dir: string;
let model: string;
let serve: ChildProcess | undefined;
let baseUrl: string;
/** Everything any front end said: process output, HTTP bodies, WebSocket messages, MCP results. */
let seen = "";

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

async function get(path: string, init?: RequestInit): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${baseUrl}${path}`, init);
  const text = await res.text();
  seen += `\n${text}`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text };
}

const env = (): Record<string, string> => ({
  ...(process.env as Record<string, string>),
  REEX_POLICY_THREADS: "1",
  REEX_TEST_PG_PW: pgServer.readerPassword,
  REEX_SQL_DATA_DIR: join(dir, "data"),
});

beforeAll(async () => {
  pgServer = await startPostgres();
  await loadExamples(pgServer);
  dir = mkdtempSync(join(tmpdir(), "reex-pg-front-"));
  model = await ensureTestModel();
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  const fromEnv = pgServer.readerUrl("reex_clinic").replace(pgServer.readerPassword, "${REEX_TEST_PG_PW}");
  serve = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cli.ts",
      "serve",
      "--db",
      pgServer.readerUrl("reex_retail"),
      "--server.port",
      String(port),
      "--policy.model",
      model,
      "--policy.gpu",
      "cpu",
      "--agent.maxTokens",
      "64",
    ],
    { env: { ...env(), REEX_SQL_POSTGRES: `clinic-pg=${fromEnv}`, REEX_SERVER_LOG_LEVEL: "info" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  serve.stdout!.on("data", (c: Buffer) => (seen += c.toString()));
  serve.stderr!.on("data", (c: Buffer) => (seen += c.toString()));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (serve.exitCode !== null) throw new Error(`reex serve exited: ${seen}`);
    try {
      if ((await fetch(`${baseUrl}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`reex serve did not become ready: ${seen}`);
    await new Promise((r) => setTimeout(r, 250));
  }
});

afterAll(async () => {
  if (serve && serve.exitCode === null) {
    const exited = new Promise((r) => serve!.once("exit", r));
    serve.kill("SIGINT");
    await exited;
  }
  await pgServer?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("reex serve with PostgreSQL sources", () => {
  it("lists both Postgres databases by name beside the examples, with their tables and no path", async () => {
    const { status, body } = await get("/v1/databases");
    expect(status).toBe(200);
    const byName = new Map((body.databases as { id: string; name: string; source: string; tables: string[]; path?: string }[]).map((d) => [d.name, d]));
    expect([...byName.keys()]).toEqual(expect.arrayContaining(["reex_retail", "clinic-pg", "retail", "clinic", "music"]));
    expect(byName.get("reex_retail")).toMatchObject({ source: "postgres", tables: ["customers", "order_items", "orders", "products"] });
    expect(byName.get("clinic-pg")!.source).toBe("postgres");
    expect(byName.get("reex_retail")!.path).toBeUndefined();
    const schema = await get(`/v1/databases/${byName.get("reex_retail")!.id}`);
    expect(schema.status).toBe(200);
    expect(schema.text).toMatch(/"customers"/);
  });

  it("answers POST /v1/sql on a Postgres database through the real decoder", async () => {
    const { status, body } = await get("/v1/sql", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        database: "reex_retail",
        question: "How many customers live in Germany?",
        strategy: "linear",
        candidates: 2,
        maxInteractions: 1,
        seed: 3,
        includeTrace: true,
      }),
    });
    expect(status).toBe(200);
    expect(body.candidates).toHaveLength(2);
    expect(body.trace.at(-1).type).toBe("final");
  });

  it("streams an answer about the clinic database over the WebSocket", async () => {
    const client = connect(`${baseUrl.replace("http", "ws")}/v1/stream`);
    await client.opened;
    client.ws.send(JSON.stringify({ database: "clinic-pg", question: "How many doctors are dermatologists?", strategy: "greedy", seed: 1 }));
    await client.next("final");
    client.ws.close();
    await client.closed;
    seen += JSON.stringify(client.messages);
    expect(client.messages.some((m) => m.type === "token")).toBe(true);
  });

  it("answers a bad database with DB_NOT_FOUND and exposes metrics, and no output anywhere holds the password or the server address", async () => {
    const missing = await get("/v1/sql", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "nope", question: "x" }),
    });
    expect(missing.body.code).toBe("DB_NOT_FOUND");
    await get("/metrics");
    await get("/readyz");
    await get("/openapi.json");
    expect(seen).toMatch(/connected PostgreSQL database reex_retail/);
    expect(seen).not.toContain(pgServer.readerPassword);
    expect(seen).not.toContain(`127.0.0.1:${pgServer.port}`);
    expect(seen).not.toContain("REEX_TEST_PG_PW");
  });
});

describe("reex mcp and reex exec with --db postgres://", () => {
  it("lists the database over MCP, runs a read, refuses a write, and never shows the password", async () => {
    let stderr = "";
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [
        "--import",
        "tsx",
        "src/cli.ts",
        "mcp",
        "--no-examples",
        "--db",
        pgServer.readerUrl("reex_music"),
        "--policy.model",
        model,
        "--policy.gpu",
        "cpu",
        "--agent.maxTokens",
        "48",
      ],
      env: { ...env(), REEX_SQL_DATA_DIR: join(dir, "mcp-data") },
      stderr: "pipe",
    });
    transport.stderr?.on("data", (c: Buffer) => (stderr += c.toString()));
    const client = new Client({ name: "reex-pg-test", version: "1.0.0" });
    await client.connect(transport);
    try {
      const list = await call(client, "list_databases", {});
      const dbs = list.structuredContent!.databases as { id: string; name: string; tables: string[] }[];
      expect(dbs.map((d) => d.name)).toEqual(["reex_music"]);
      expect(dbs[0]!.tables).toEqual(["albums", "artists", "tracks"]);
      const read = await call(client, "run_sql", { database: "reex_music", sql: "SELECT count(*) FROM artists WHERE country = 'KR'" });
      expect(read.isError).toBeFalsy();
      const write = await call(client, "run_sql", { database: "reex_music", sql: "DELETE FROM tracks" });
      expect(write.isError).toBe(true);
      expect(JSON.stringify(write)).toMatch(/SQL_REFUSED/);
      const ask = await call(client, "ask", { database: "reex_music", question: "How many Korean artists are there?", strategy: "greedy" });
      expect(ask.structuredContent).toBeDefined();
      seen += JSON.stringify([list, read, write, ask]);
    } finally {
      await client.close();
    }
    expect(stderr + seen).not.toContain(pgServer.readerPassword);
  }, 180_000);

  it("reex ask answers a question about a Postgres database, naming it without its URL", async () => {
    const result = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "src/cli.ts",
          "ask",
          "--db",
          pgServer.readerUrl("reex_retail"),
          "--model",
          model,
          "--strategy",
          "greedy",
          "--max-interactions",
          "1",
          "--json",
          "How many customers live in Germany?",
        ],
        { env: { ...env(), REEX_SQL_DATA_DIR: join(dir, "ask-data"), REEX_AGENT_MAX_TOKENS: "48", REEX_POLICY_GPU: "cpu" } },
      );
      let out = "";
      p.stdout.on("data", (c: Buffer) => (out += c.toString()));
      p.stderr.on("data", (c: Buffer) => (out += c.toString()));
      p.on("exit", (code) => resolve({ code, out }));
    });
    expect([0, 1], result.out).toContain(result.code);
    const answer = JSON.parse(result.out.slice(result.out.indexOf("{"))) as { candidates: unknown[]; profile: { id: string } };
    expect(answer.candidates.length).toBeGreaterThan(0);
    expect(result.out).not.toContain(pgServer.readerPassword);
    expect(result.out).not.toContain(`127.0.0.1:${pgServer.port}`);
  }, 180_000);

  it("reex exec runs one read on Postgres and refuses a write, without echoing the URL", async () => {
    const exec = (sql: string): Promise<{ code: number | null; out: string }> =>
      new Promise((resolve) => {
        const p = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--db", pgServer.readerUrl("reex_retail"), "--json", sql], { env: env() });
        let out = "";
        p.stdout.on("data", (c: Buffer) => (out += c.toString()));
        p.stderr.on("data", (c: Buffer) => (out += c.toString()));
        p.on("exit", (code) => resolve({ code, out }));
      });
    const ok = await exec("SELECT count(*) AS n FROM customers WHERE country = 'DE'");
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ ok: true, columns: ["n"] });
    const refused = await exec("UPDATE customers SET tier = 'P'");
    expect(refused.code).toBe(1);
    expect(refused.out).toMatch(/SQL_REFUSED/);
    for (const out of [ok.out, refused.out]) expect(out).not.toContain(pgServer.readerPassword);
  }, 180_000);
});

/**
 * The hostile corpus (test/security/data: one attack a line, JSON strings): every SQL input through
 * MCP `run_sql` on a real server at /mcp (and a sample through the real `reex exec`), every
 * malformed HTTP request as raw bytes on a real socket. Each gets a typed refusal or a read-only
 * answer, no answer is a 5xx, every database file keeps its sha256, and no answer contains the
 * data folder's absolute path.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool } from "../../src/sql/index.js";
import { listen, makeApp, sqliteBytes, type TestApp } from "../server/helpers.js";

const DATA = join(import.meta.dirname, "data");
const lines = (file: string): string[] =>
  readFileSync(join(DATA, file), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as string);
const SQL = lines("hostile-sql.jsonl");
const HTTP = lines("malformed-http.jsonl");
const TYPED = new Set([
  "SQL_REFUSED",
  "SQL_SYNTAX",
  "SQL_NO_SUCH_TABLE",
  "SQL_NO_SUCH_COLUMN",
  "SQL_FUNCTION",
  "SQL_RUNTIME",
  "SQL_TIMEOUT",
  "SQL_MEMORY_LIMIT",
  "BAD_REQUEST",
]);
const hash = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

let t: TestApp;
let url: string;
let port: number;
let executor: ExecutorPool;
let files: string[];
let before: string[];
let uploadId: string;
const answers: string[] = [];

beforeAll(async () => {
  executor = new ExecutorPool({ workers: 2, timeoutMs: 1000, maxQueryMemoryMB: 256 });
  t = await makeApp({ server: { rateLimitPerMinute: 0 }, deps: { executor } });
  ({ url, port } = await listen(t.app));
  const up = await t.app.inject({
    method: "POST",
    url: "/v1/databases?name=up",
    headers: { "content-type": "application/octet-stream" },
    payload: sqliteBytes(t.dir),
  });
  uploadId = up.json().id;
  files = (await t.registry.list()).map((e) => e.path);
  before = files.map(hash);
});

afterAll(async () => {
  await t?.cleanup();
  await executor?.close();
});

async function rpc(session: string | undefined, body: unknown): Promise<{ status: number; text: string; session: string | null }> {
  const res = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
      ...(session ? { "mcp-session-id": session } : {}),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), session: res.headers.get("mcp-session-id") };
}

describe("the hostile corpus", () => {
  it("holds at least 300 SQL inputs and 80 malformed HTTP requests", () => {
    expect(SQL.length).toBeGreaterThanOrEqual(300);
    expect(HTTP.length).toBeGreaterThanOrEqual(80);
  });

  it("every SQL input through MCP run_sql gets a typed refusal or a read-only answer, and no file changes", async () => {
    const init = await rpc(undefined, {
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "corpus", version: "1" } },
    });
    const session = init.session!;
    const outcomes: { sql: string; verdict: string }[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < SQL.length * 2) {
        const i = next++;
        const sql = SQL[i % SQL.length]!;
        const database = i < SQL.length ? t.dbId : uploadId;
        const r = await rpc(session, { jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "run_sql", arguments: { database, sql } } });
        answers.push(r.text);
        expect(r.status, sql.slice(0, 80)).toBeLessThan(500);
        const data = r.text.split("\n").find((l) => l.startsWith("data: "));
        const msg = JSON.parse(data ? data.slice(6) : r.text) as { result?: { isError?: boolean; content: { text: string }[] }; error?: unknown };
        if (msg.error) {
          outcomes.push({ sql, verdict: "BAD_REQUEST" });
          continue;
        }
        const text = msg.result!.content.map((c) => c.text).join("\n");
        if (msg.result!.isError) {
          const code = /\b([A-Z]+(?:_[A-Z]+)+)\b/.exec(text)?.[1] ?? "";
          outcomes.push({ sql, verdict: TYPED.has(code) ? code : `UNTYPED ${text.slice(0, 120)}` });
        } else outcomes.push({ sql, verdict: "read-only answer" });
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    expect(outcomes.filter((o) => o.verdict.startsWith("UNTYPED")).map((o) => `${o.sql.slice(0, 60)} → ${o.verdict}`)).toEqual([]);
    for (const o of outcomes) if (/pragma_(database_list|temp_store_directory|data_store_directory)/i.test(o.sql)) expect(o.verdict, o.sql).toBe("SQL_REFUSED");
    expect(files.map(hash)).toEqual(before);
  }, 120_000);

  it("a sample of the SQL inputs through the real `reex exec` gets the same kind of answer", async () => {
    const run = promisify(execFile);
    const sample = SQL.filter((_, i) => i % 40 === 0);
    for (const sql of sample) {
      const r = await run(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--json", "--timeout-ms", "1000", "--db", files[0]!, sql], {
        env: { ...process.env, REEX_SQL_DATA_DIR: join(t.dir, "cli") },
        maxBuffer: 64 << 20,
      }).then(
        (x) => x.stdout,
        (e: { stdout: string; stderr: string }) => e.stdout || e.stderr,
      );
      answers.push(r);
      const out = JSON.parse(r) as { ok: boolean; error?: { code: string } };
      if (!out.ok) expect(TYPED.has(out.error!.code), `${sql.slice(0, 60)} → ${r.slice(0, 200)}`).toBe(true);
    }
    expect(files.map(hash)).toEqual(before);
  }, 120_000);

  it("every malformed HTTP request gets an answer under 500 (or a closed connection), and no file changes", async () => {
    const statuses: number[] = [];
    for (const raw of HTTP) {
      const text = await new Promise<string>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        let out = "";
        socket.setTimeout(5000, () => socket.destroy());
        socket.on("data", (c) => (out += c.toString("latin1")));
        socket.on("close", () => resolve(out));
        socket.on("error", () => resolve(out));
        socket.end(Buffer.from(raw, "latin1"));
      });
      answers.push(text);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      statuses.push(status);
      expect(status, raw.slice(0, 100)).toBeLessThan(500);
    }
    expect(statuses.filter((s) => s > 0).length).toBeGreaterThan(HTTP.length / 2);
    expect(files.map(hash)).toEqual(before);
  }, 120_000);

  it("no answer of the corpus run contains the data folder's absolute path", async () => {
    for (const path of ["/v1/databases", "/readyz", `/v1/databases/${uploadId}`, `/v1/databases/${t.dbId}`])
      answers.push(await (await fetch(`${url}${path}`)).text());
    expect(answers.length).toBeGreaterThan(SQL.length);
    const leaks = answers.filter((a) => a.includes(t.dir) || a.includes(t.config.sql.dataDir));
    expect(leaks.map((a) => a.slice(0, 200))).toEqual([]);
  });
});

/**
 * No tenant locks out or starves another (issue #83, items 5, 6, 7 and 10), each break as the probe
 * reproduced it, on a real server on a real port with the scripted decoder:
 * - keyless (or wrong-key) requests from one address never lock out a valid key from it;
 * - one key filling its share of the generation queue leaves other keys' requests answered, over
 *   REST and MCP alike;
 * - uploads are held to a quota per key (413) and in total (507), refused before anything is kept;
 * - a second file under an upload name in use is refused with 409, and the name keeps answering.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { listen, makeApp, ScriptedDecoder, until, type TestApp } from "../server/helpers.js";

const KEY_A = "key-a-0123456789";
const KEY_B = "key-b-9876543210";
const KEY_C = "key-c-5555555555";
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

const made = new Map<string, Buffer>();

/** The bytes of a small SQLite file (two pages, all the same size) that differs from every other `n`'s. */
function distinctDb(dir: string, n: number): Buffer {
  const path = join(dir, `distinct-${n}.sqlite`);
  let bytes = made.get(path);
  if (!bytes) {
    const db = new Database(path);
    db.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); INSERT INTO t (v) VALUES ('row ${n}')`);
    db.close();
    bytes = readFileSync(path);
    made.set(path, bytes);
  }
  return bytes;
}

async function upload(url: string, bytes: Buffer, key: string | undefined, name?: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await fetch(`${url}/v1/databases${name ? `?name=${name}` : ""}`, {
    method: "POST",
    headers: { "content-type": "application/octet-stream", ...(key ? bearer(key) : {}) },
    body: bytes,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

/** Files under uploads/: kept databases and any temp file a refused upload would have left. */
function uploadFiles(t: TestApp): string[] {
  const dir = join(t.config.sql.dataDir, "uploads");
  return existsSync(dir) ? readdirSync(dir).sort() : [];
}

describe("failed authentications never lock out a valid key (#83 item 5)", () => {
  it("after 21 keyless requests from one address, a valid key from it gets 200", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A], rateLimitPerMinute: 0 } });
    const { url } = await listen(t.app);
    const statuses: number[] = [];
    for (let i = 0; i < 21; i++) {
      const res = await fetch(`${url}/v1/databases`);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    expect(statuses.slice(0, 20).every((s) => s === 401)).toBe(true);
    expect(statuses[20]).toBe(429);
    const valid = await fetch(`${url}/v1/databases`, { headers: bearer(KEY_A) });
    expect(valid.status).toBe(200);
    await valid.arrayBuffer();
    // the address stays throttled for requests without a valid key
    expect((await fetch(`${url}/v1/databases`)).status).toBe(429);
  });

  it("after 300 wrong keys from one address, valid keys from it get 200 over REST, MCP and the stream's ?key=", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B], rateLimitPerMinute: 0 } });
    const { url } = await listen(t.app);
    for (let i = 0; i < 300; i++) {
      const res = await fetch(`${url}/v1/databases`, { headers: bearer(`guess-${String(i).padStart(4, "0")}-${i * 7919}`) });
      expect([401, 429]).toContain(res.status);
      await res.arrayBuffer();
    }
    expect((await fetch(`${url}/v1/databases`, { headers: bearer(KEY_A) })).status).toBe(200);
    const client = new Client({ name: "tenant-b", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(KEY_B) } }));
    try {
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await client.close();
    }
    // a plain GET of the stream route without the upgrade: past authentication it is a 4xx other than 401/429
    const stream = await fetch(`${url}/v1/stream?key=${KEY_A}`);
    expect([401, 429]).not.toContain(stream.status);
    await stream.arrayBuffer();
  });
});

describe("one key cannot fill the generation queue for everyone (#83 item 6)", () => {
  it("while key A has its full share queued, keys B (REST) and C (MCP) are answered, ahead of A's waiting requests", async () => {
    const decoder = new ScriptedDecoder(100, 3);
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B, KEY_C], rateLimitPerMinute: 0, maxConcurrent: 2, maxQueued: 16 }, decoder });
    const { url } = await listen(t.app);
    const share = t.config.server.maxQueuedPerKey;
    const ask = (key: string, question: string): Promise<Response> =>
      fetch(`${url}/v1/sql`, {
        method: "POST",
        headers: { "content-type": "application/json", ...bearer(key) },
        body: JSON.stringify({ database: t!.dbId, question, strategy: "tree-prune", candidates: 16 }),
      });
    const client = new Client({ name: "tenant-c", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: bearer(KEY_C) } }));
    try {
      // the probe's 18 concurrent tree-prune-16 requests from one key
      const flood = Array.from({ length: 18 }, (_, i) => ask(KEY_A, `A${i}`));
      await until(() => decoder.started === 2 && t!.app.reex.queue.waiting === share, 5_000, "two of A's decodes running and its share queued");
      const [b, c] = await Promise.all([
        ask(KEY_B, "B"),
        client.callTool({ name: "ask", arguments: { database: t.dbId, question: "C" } }) as Promise<{ isError?: boolean }>,
      ]);
      expect(b.status).toBe(200);
      expect(c.isError ?? false).toBe(false);
      const statuses = await Promise.all(
        (await Promise.all(flood)).map(async (r) => {
          const body = (await r.json()) as { code?: string; message?: string };
          return r.status === 503 ? `503 ${body.code}` : String(r.status);
        }),
      );
      expect(statuses.filter((s) => s === "200")).toHaveLength(2 + share);
      expect(statuses.filter((s) => s === "503 QUEUE_FULL")).toHaveLength(18 - 2 - share);
      // round-robin: B took the first free slot, ahead of A's waiting requests, and C one before A's last
      const order = decoder.calls.map((r) => r.question);
      expect(order.indexOf("B")).toBe(2);
      expect(order.indexOf("C")).toBeGreaterThan(1);
      expect(order.indexOf("C")).toBeLessThan(order.length - 1);
    } finally {
      await client.close();
    }
  });

  it("a key over its share is told so: QUEUE_FULL names server.maxQueuedPerKey", async () => {
    const decoder = new ScriptedDecoder(40, 3);
    t = await makeApp({ server: { apiKeys: [KEY_A], rateLimitPerMinute: 0, maxConcurrent: 1, maxQueued: 16, maxQueuedPerKey: 1 }, decoder });
    const ask = () => t!.app.inject({ method: "POST", url: "/v1/sql", headers: bearer(KEY_A), payload: { database: t!.dbId, question: "q" } });
    const accepted = [ask(), ask()];
    await until(() => decoder.started === 1 && t!.app.reex.queue.waiting === 1, 5_000, "one running, one waiting");
    const refused = await ask();
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ code: "QUEUE_FULL", message: expect.stringContaining("server.maxQueuedPerKey") });
    expect((await Promise.all(accepted)).map((r) => r.statusCode)).toEqual([200, 200]);
  });
});

describe("uploads are held to a storage quota (#83 item 7)", () => {
  it("refuses a key's upload past its quota with 413 and all keys' past the total with 507, keeping nothing of either", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "reex-quota-"));
    const one = distinctDb(scratch, 0).length;
    rmSync(scratch, { recursive: true, force: true });
    // room for two of one key's uploads, and for five of all keys'
    t = await makeApp({
      server: { apiKeys: [KEY_A, KEY_B, KEY_C], rateLimitPerMinute: 0, uploadQuotaBytesPerKey: Math.floor(2.5 * one), uploadQuotaBytes: Math.floor(5.5 * one) },
    });
    const { url } = await listen(t.app);
    expect((await upload(url, distinctDb(t.dir, 1), KEY_A)).status).toBe(201);
    expect((await upload(url, distinctDb(t.dir, 2), KEY_A)).status).toBe(201);
    const kept = uploadFiles(t);
    const over = await upload(url, distinctDb(t.dir, 3), KEY_A, "third");
    expect(over.status).toBe(413);
    expect(over.body).toMatchObject({ code: "UPLOAD_QUOTA_EXCEEDED", details: { quotaBytes: Math.floor(2.5 * one) } });
    expect(over.body.message).toContain("server.uploadQuotaBytesPerKey");
    expect(uploadFiles(t)).toEqual(kept);
    // the same bytes again take no more room
    expect((await upload(url, distinctDb(t.dir, 1), KEY_A)).status).toBe(201);
    // another key still has its own quota, until all uploads together reach the total
    expect((await upload(url, distinctDb(t.dir, 4), KEY_B)).status).toBe(201);
    expect((await upload(url, distinctDb(t.dir, 5), KEY_B)).status).toBe(201);
    expect((await upload(url, distinctDb(t.dir, 6), KEY_C)).status).toBe(201);
    const before = uploadFiles(t);
    const full = await upload(url, distinctDb(t.dir, 7), KEY_C);
    expect(full.status).toBe(507);
    expect(full.body.code).toBe("STORAGE_FULL");
    expect(full.body.message).toContain("server.uploadQuotaBytes");
    expect(uploadFiles(t)).toEqual(before);
    expect(uploadFiles(t).some((f) => f.endsWith(".tmp"))).toBe(false);
    // deleting an upload makes room again
    const mine = (await (await fetch(`${url}/v1/databases`, { headers: bearer(KEY_A) })).json()) as { databases: { id: string; source: string }[] };
    const first = mine.databases.find((d) => d.source === "upload")!;
    expect((await fetch(`${url}/v1/databases/${first.id}`, { method: "DELETE", headers: bearer(KEY_A) })).status).toBe(204);
    expect((await upload(url, distinctDb(t.dir, 3), KEY_A, "third")).status).toBe(201);
  });

  it("has defaults that stop the probe's 30 uploads of 60 MB by one key well before 1.7 GB", async () => {
    t = await makeApp();
    expect(30 * 60e6).toBeGreaterThan(3 * t.config.server.uploadQuotaBytesPerKey);
    expect(t.config.server.uploadQuotaBytesPerKey).toBeGreaterThanOrEqual(t.config.server.bodyLimitBytes);
    expect(t.config.server.uploadQuotaBytes).toBeGreaterThan(t.config.server.uploadQuotaBytesPerKey);
  });
});

describe("upload names are unique per tenant (#83 item 10)", () => {
  it("refuses a different file under a name in use with 409 DB_NAME_TAKEN, and the name keeps answering", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B], rateLimitPerMinute: 0 } });
    const { url } = await listen(t.app);
    const first = await upload(url, distinctDb(t.dir, 1), KEY_A, "sales");
    expect(first.status).toBe(201);
    const kept = uploadFiles(t);
    for (let i = 2; i <= 13; i++) {
      const again = await upload(url, distinctDb(t.dir, i), KEY_A, "sales");
      expect(again.status).toBe(409);
      expect(again.body).toMatchObject({ code: "DB_NAME_TAKEN", details: { ids: [first.body.id] } });
    }
    expect(uploadFiles(t)).toEqual(kept);
    // the same bytes under their own name are the same entry, not a conflict
    expect(await upload(url, distinctDb(t.dir, 1), KEY_A, "sales")).toMatchObject({ status: 201, body: { id: first.body.id } });
    const res = await fetch(`${url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json", ...bearer(KEY_A) },
      body: JSON.stringify({ database: "sales", question: "How many rows?" }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    // another key has names of its own
    expect((await upload(url, distinctDb(t.dir, 2), KEY_B, "sales")).status).toBe(201);
    // unnamed uploads take the first free name
    const names = [];
    for (let i = 20; i < 23; i++) names.push((await upload(url, distinctDb(t.dir, i), KEY_A)).body.name);
    expect(names).toEqual(["upload", "upload-2", "upload-3"]);
  });
});

/**
 * MCP sessions at /mcp are capped per tenant (API key, or client address without keys), so one
 * tenant opening many sessions closes only its own, and idle sessions expire. A real server on a
 * real port; sessions opened with raw JSON-RPC `initialize` requests and the SDK's own client.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { listen, makeApp, sleep, type TestApp } from "./helpers.js";

const KEY_A = "key-a-0123456789";
const KEY_B = "key-b-9876543210";
let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

const INIT = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
});

async function openRaw(url: string, key: string | undefined): Promise<string> {
  const res = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: INIT,
  });
  await res.arrayBuffer();
  const id = res.headers.get("mcp-session-id");
  if (res.status !== 200 || !id) throw new Error(`initialize answered ${res.status}`);
  return id;
}

async function listTools(url: string, key: string | undefined, session: string): Promise<number> {
  const res = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": session,
      "mcp-protocol-version": "2025-06-18",
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function sdkClient(url: string, key: string): Promise<Client> {
  const client = new Client({ name: "tenant-a", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

describe("MCP sessions per tenant", () => {
  it("key B opening 1,000 sessions leaves key A's session working and keeps at most the cap of B's", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A, KEY_B], rateLimitPerMinute: 0, mcpSessionsPerKey: 32 } });
    const { url } = await listen(t.app);
    const a = await sdkClient(url, KEY_A);
    try {
      const bSessions: string[] = [];
      for (let i = 0; i < 968; i += 8) bSessions.push(...(await Promise.all(Array.from({ length: 8 }, () => openRaw(url, KEY_B)))));
      for (let i = 0; i < 32; i++) bSessions.push(await openRaw(url, KEY_B));
      const { tools } = await a.listTools();
      expect(tools.length).toBe(6);
      expect(await listTools(url, KEY_B, bSessions.at(-1)!)).toBe(200);
      expect(await listTools(url, KEY_B, bSessions[0]!)).toBe(404);
      expect(await listTools(url, KEY_B, bSessions.at(-32)!)).toBe(200);
      expect(await listTools(url, KEY_B, bSessions.at(-33)!)).toBe(404);
    } finally {
      await a.close();
    }
  });

  it("without keys, caps each client address on its own", async () => {
    t = await makeApp({ server: { rateLimitPerMinute: 0, mcpSessionsPerKey: 4 } });
    const { url } = await listen(t.app);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await openRaw(url, undefined));
    expect(await listTools(url, undefined, ids[0]!)).toBe(404);
    expect(await listTools(url, undefined, ids[1]!)).toBe(404);
    for (const id of ids.slice(2)) expect(await listTools(url, undefined, id)).toBe(200);
  });

  it("closes a session left idle past server.mcpSessionIdleMs", async () => {
    t = await makeApp({ server: { apiKeys: [KEY_A], mcpSessionIdleMs: 300 } });
    const { url } = await listen(t.app);
    const id = await openRaw(url, KEY_A);
    expect(await listTools(url, KEY_A, id)).toBe(200);
    await sleep(700);
    expect(await listTools(url, KEY_A, id)).toBe(404);
  });
});

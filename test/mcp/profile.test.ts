/**
 * describe_database and the schema resources show the schema in the decoder's profile, the way
 * the model is prompted: the SDK's client over its in-memory transport, a real registry and file.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { ReexError } from "../../src/errors/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { createMcpServer } from "../../src/mcp/index.js";
import { DatabaseRegistry, ExecutorPool } from "../../src/sql/index.js";
import { call } from "./helpers.js";

let dir: string;
let registry: DatabaseRegistry;
let executor: ExecutorPool;
const clients: Client[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-mcp-profile-"));
  const sets = await buildExamples(join(dir, "examples"));
  registry = new DatabaseRegistry({ dataDir: join(dir, "data") });
  await registry.registerPath(sets.find((s) => s.dbId === "retail")!.path);
  executor = new ExecutorPool({ workers: 1, timeoutMs: 2000, maxRows: 10 });
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await executor.close();
  rmSync(dir, { recursive: true, force: true });
});

async function clientFor(profile: string | undefined): Promise<Client> {
  const config = parseConfig({ sql: { dataDir: join(dir, "data") } });
  const server = createMcpServer({
    config,
    registry,
    executor,
    decode: async () => {
      throw new ReexError("INTERNAL", "ask is not used here");
    },
    ...(profile !== undefined ? { profile } : {}),
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "reex-test", version: "1.0.0" });
  await client.connect(clientSide);
  clients.push(client);
  return client;
}

describe("the schema MCP clients see", () => {
  it("is the reex profile's compact listing by default", async () => {
    const client = await clientFor(undefined);
    const r = await call(client, "describe_database", { database: "retail" });
    expect(r.structuredContent!.schema).toContain("customers.first_name");
    expect(r.structuredContent!.schema).not.toContain("CREATE TABLE");
  });

  it("is CREATE TABLE statements for a profile prompted with DDL, in the tool and the resource alike", async () => {
    const client = await clientFor("omnisql");
    const r = await call(client, "describe_database", { database: "retail" });
    expect(r.structuredContent!.schema).toContain("CREATE TABLE");
    const { resources } = await client.listResources();
    const read = await client.readResource({ uri: resources[0]!.uri });
    expect((read.contents[0] as { text: string }).text).toContain("CREATE TABLE");
  });
});

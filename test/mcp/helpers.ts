/** Shared fixtures of the MCP tests: the example databases in a temp folder and what proves a file unchanged. */
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";

/** Statements every front end must refuse; each one would change the file or reach outside it. */
export const HOSTILE_SQL = [
  "DELETE FROM customers",
  "DROP TABLE customers",
  "UPDATE customers SET first_name = 'x'",
  "INSERT INTO customers (customer_id) VALUES (999999)",
  "SELECT 1; DELETE FROM customers",
  "ATTACH DATABASE 'other.sqlite' AS other",
  "PRAGMA writable_schema = ON",
  "CREATE TABLE pwned (x)",
];

/** The bytes' hash and the modification time of `path`. */
export function fingerprint(path: string): { sha256: string; mtimeMs: number; size: number } {
  const st = statSync(path);
  return { sha256: createHash("sha256").update(readFileSync(path)).digest("hex"), mtimeMs: st.mtimeMs, size: st.size };
}

/** Calls a tool and returns its result with `structuredContent` typed loosely. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  options?: Parameters<Client["callTool"]>[2],
): Promise<CallToolResult & { structuredContent?: Record<string, any> }> {
  return (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult & { structuredContent?: Record<string, any> };
}

/** Resolves once `predicate` holds, polling every 20 ms; rejects after `ms`. */
export async function until(predicate: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

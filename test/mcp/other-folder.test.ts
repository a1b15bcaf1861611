/**
 * `reex mcp` as a desktop client starts it: from a folder of the client's choosing. The package's
 * own files (the starter model, the data folder, the example databases) are found from the
 * package, and nothing is written to the working folder.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterEach, describe, expect, it } from "vitest";
import { call } from "./helpers.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function startIn(cwd: string, args: string[] = []): Promise<{ client: Client; stderr: () => string }> {
  let stderr = "";
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("REEX_"))) as Record<string, string>;
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", TSX, join(ROOT, "src", "cli.ts"), "mcp", "--policy.threads", "1", "--policy.defaultModel", "starter", ...args],
    cwd,
    env,
    stderr: "pipe",
  });
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const client = new Client({ name: "reex-test", version: "1.0.0" });
  await client.connect(transport);
  cleanup.push(() => client.close());
  return { client, stderr: () => stderr };
}

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe("reex mcp started from another folder", () => {
  it("answers the dermatology question with the starter model and writes nothing in the working folder", async () => {
    const cwd = tempDir("reex-mcp-cwd-");
    const { client, stderr } = await startIn(cwd);
    const r = await call(client, "ask", { database: "clinic", question: "How many doctors specialise in dermatology?" });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect(stderr()).toContain(join(ROOT, "models", "reex-starter.gguf"));
    expect(r.structuredContent!.result).toMatchObject({ rows: [[11]] });
    expect(r.structuredContent!.answerable).toBe(true);
    expect(r.structuredContent!.notice).toBeUndefined();
    expect(readdirSync(cwd)).toEqual([]);
  }, 180_000);

  it("says in the ask result that a placeholder model answered", async () => {
    const cwd = tempDir("reex-mcp-cwd-");
    const models = tempDir("reex-mcp-models-");
    const { client } = await startIn(cwd, ["--policy.modelsDir", models, "--agent.maxTokens", "32"]);
    const r = await call(client, "ask", { database: "clinic", question: "How many doctors specialise in dermatology?" });
    expect(r.isError, JSON.stringify(r.content)).toBeFalsy();
    expect(r.structuredContent!.notice).toMatch(/random-weight placeholder model/);
    expect(readdirSync(models)).toEqual(["reex-tiny-random.gguf"]);
    expect(readdirSync(cwd)).toEqual([]);
  }, 180_000);
});

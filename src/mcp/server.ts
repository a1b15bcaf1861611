/**
 * One MCP server (one client connection) over reex's registry, executor, prompt builder and decoder:
 * tools with zod-validated input and typed errors, and each database's schema as a resource.
 * Uses the SDK's low-level `Server` so that bad input is answered with the catalog's BAD_REQUEST
 * and its issues, as everywhere else in reex, instead of the SDK's untyped validation message.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ErrorCode,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { createPromptBuilder, roundMs, type PromptBuilder } from "../decoding/index.js";
import { capMessage, ReexError, issuesFrom } from "../errors/index.js";
import { packageRoot } from "../paths/index.js";
import { createTools, promptStyle, schemaText, type ToolContext, type ToolOutput } from "./tools.js";
import type { McpDeps } from "./types.js";

/** URI of a database's schema resource. */
export function schemaUri(id: string): string {
  return `reex://databases/${encodeURIComponent(id)}/schema`;
}

const SCHEMA_URI = /^reex:\/\/databases\/([^/]+)\/schema$/;

let version: string | undefined;
function reexVersion(): string {
  if (version === undefined) {
    try {
      version = String((JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version?: unknown }).version ?? "0.0.0");
    } catch {
      version = "0.0.0";
    }
  }
  return version;
}

const INSTRUCTIONS =
  "reex answers questions over SQLite databases with SQL. list_databases names the databases; describe_database shows a schema as the model sees it; run_sql runs one guarded read-only query; ask turns a question into SQL by letting the model probe the database, and returns the SQL with its rows (pass the same conversation id to ask a follow-up). Where the server keeps verified examples, add_example stores a question's right SQL (or corrects an ask answer by its answerId) and ask shows the model the most similar ones; list_examples lists them. Errors carry reex's stable codes (SQL_REFUSED, DB_NOT_FOUND, …).";

/**
 * Longest text block of a tool result, in characters. The result's JSON is serialised once for the
 * text block and once more by the transport for `structuredContent`; past this size the text block
 * carries the result without its rows (they are in `structuredContent` only), so a 32 MiB result is
 * not held three times over (object, text, message).
 */
const MAX_TEXT_CHARS = 1024 * 1024;

function success(out: ToolOutput): CallToolResult {
  let text = JSON.stringify(out);
  if (text.length > MAX_TEXT_CHARS) {
    const without = JSON.stringify(out, (key, value: unknown) =>
      key === "rows" && Array.isArray(value) ? `${value.length} rows, in structuredContent only (the text would pass ${MAX_TEXT_CHARS} characters)` : value,
    );
    text = capMessage(without, MAX_TEXT_CHARS);
  }
  return { content: [{ type: "text", text }], structuredContent: out };
}

/** A failed call: `CODE: message` as text and the error's JSON as structured content, the message capped once (ReexError caps it). */
function failure(err: ReexError): CallToolResult {
  const body = err.toJSON();
  return { content: [{ type: "text", text: capMessage(`${body.code}: ${body.message}`) }], structuredContent: body, isError: true };
}

/**
 * Builds an MCP server over `deps` (not connected: pass it to a transport with `connect`). It
 * closes the prompt builder it made itself when it closes; a `deps.prompts` stays open.
 */
export function createMcpServer(deps: McpDeps): Server {
  const owned = deps.prompts ? undefined : createPromptBuilder({ indexDir: join(deps.config.sql.dataDir, "indexes") });
  const prompts: PromptBuilder = deps.prompts ?? owned!;
  const tools = createTools(deps, prompts);
  const style = promptStyle(deps.profile);
  const byName = new Map(tools.map((t) => [t.name, t]));
  const listed = tools.map((t) => ({
    name: t.name,
    title: t.title,
    description: t.description,
    inputSchema: z.toJSONSchema(t.input, { io: "input" }) as { type: "object"; [k: string]: unknown },
    annotations: { title: t.title, ...t.annotations },
  }));

  const server = new Server(
    { name: "reex", title: "reex text-to-SQL", version: reexVersion() },
    { capabilities: { tools: {}, resources: {} }, instructions: INSTRUCTIONS },
  );
  server.onclose = () => owned?.close();

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const started = performance.now();
    const name = request.params.name;
    const tool = byName.get(name);
    if (!tool) return failure(new ReexError("NOT_FOUND", `no tool "${name}"; the tools are ${tools.map((t) => t.name).join(", ")}`));
    const parsed = tool.input.safeParse(request.params.arguments ?? {});
    if (!parsed.success) {
      const issues = issuesFrom(parsed.error.issues).map((i) => ({ ...i, path: ["arguments", ...i.path] }));
      return failure(
        new ReexError("BAD_REQUEST", `invalid arguments for ${name}: ${issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, { issues }),
      );
    }
    const token = extra._meta?.progressToken;
    // a client drops progress for a request it has the answer to, so the answer is written after every notification
    let sent: Promise<unknown> = Promise.resolve();
    const ctx: ToolContext = {
      signal: extra.signal,
      ...(token !== undefined
        ? {
            progress: (update) => {
              if (extra.signal.aborted) return;
              const notified = extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, ...update } }).catch(() => undefined);
              sent = Promise.all([sent, notified]);
            },
          }
        : {}),
    };
    const database = typeof parsed.data.database === "string" ? parsed.data.database : undefined;
    try {
      const out = await tool.run(parsed.data, ctx);
      await sent;
      deps.log?.info({ tool: name, ...(database ? { database } : {}), ms: roundMs(performance.now() - started), ...live(deps) }, "mcp tool answered");
      return success(out);
    } catch (err) {
      const e =
        err instanceof ReexError
          ? err
          : extra.signal.aborted
            ? new ReexError("CANCELLED", "cancelled by the client")
            : new ReexError("INTERNAL", "internal error; the server log has the details", { cause: err });
      if (e.code === "INTERNAL")
        deps.log?.error({ tool: name, errName: (err as Error)?.name, stack: (err as Error)?.stack?.split("\n").slice(0, 8).join("\n") }, "mcp tool failed");
      else
        deps.log?.info(
          { tool: name, ...(database ? { database } : {}), code: e.code, ms: roundMs(performance.now() - started), ...live(deps) },
          "mcp tool refused",
        );
      return failure(e);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: (await deps.registry.list(deps.owner)).map((entry) => ({
      uri: schemaUri(entry.id),
      name: entry.name,
      title: `${entry.name} schema`,
      description: `Schema of the database "${entry.name}" (${entry.tables.length} tables) as the model sees it.`,
      mimeType: "text/plain",
    })),
  }));

  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    try {
      const m = SCHEMA_URI.exec(request.params.uri);
      if (!m) throw new ReexError("NOT_FOUND", `no resource ${request.params.uri}; schema resources are reex://databases/<id>/schema`);
      const entry = await deps.registry.get(decodeURIComponent(m[1]!), deps.owner);
      return { contents: [{ uri: request.params.uri, mimeType: "text/plain", text: await schemaText(prompts, entry, style) }] };
    } catch (err) {
      throw rpcError(err);
    }
  });

  return server;
}

/** A JSON-RPC error for a failed resource read: -32002 (resource not found) or internal, with the reex error as `data`. */
function rpcError(err: unknown): McpError {
  if (!(err instanceof ReexError)) return new McpError(ErrorCode.InternalError, "internal error");
  const notFound = err.code === "NOT_FOUND" || err.code === "DB_NOT_FOUND";
  return new McpError(notFound ? RESOURCE_NOT_FOUND : ErrorCode.InternalError, err.message, err.toJSON());
}

/** MCP's JSON-RPC code for an unknown resource. */
const RESOURCE_NOT_FOUND = -32002;

function live(deps: McpDeps): { liveTrajectories?: number } {
  return deps.liveTrajectories ? { liveTrajectories: deps.liveTrajectories() } : {};
}

/** GET /openapi.json: an OpenAPI 3.1 document generated from the API's zod schemas. */
import { z } from "zod";
import type { Config } from "../config/index.js";
import { ERROR_CATALOG } from "../errors/index.js";
import { databaseSchema, errorSchema, registerPathSchema, sqlRequestSchema, sqlResponseSchema, uploadQuerySchema } from "./schemas.js";

function jsonSchema(schema: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as Record<string, unknown>;
  return rest;
}

const errorRef = { $ref: "#/components/schemas/Error" };

function errors(...codes: (keyof typeof ERROR_CATALOG)[]): Record<string, unknown> {
  const byStatus = new Map<number, string[]>();
  for (const code of [...codes, "BAD_REQUEST", "UNAUTHORIZED", "RATE_LIMITED", "SHUTTING_DOWN", "INTERNAL"] as const) {
    const status = ERROR_CATALOG[code].status;
    const list = byStatus.get(status) ?? [];
    if (!list.includes(code)) list.push(code);
    byStatus.set(status, list);
  }
  const out: Record<string, unknown> = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    out[String(status)] = { description: list.join(", "), content: { "application/json": { schema: errorRef } } };
  }
  return out;
}

function json(ref: string): Record<string, unknown> {
  return { "application/json": { schema: { $ref: `#/components/schemas/${ref}` } } };
}

/** Builds the OpenAPI document for an app configured with `config` (request bounds come from it). */
export function buildOpenApi(config: Config): Record<string, unknown> {
  const security = config.server.apiKeys.length > 0 ? [{ bearer: [] }] : [];
  const idParam = { name: "id", in: "path", required: true, schema: { type: "string" } };
  return {
    openapi: "3.1.0",
    info: {
      title: "reex",
      version: "0.1.0",
      description: "Execution-aware text-to-SQL. Errors are `{code, message, issues?}` with the status of the code (see docs/errors.md).",
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "One of server.apiKeys (required on /v1 when any is configured)." } },
      schemas: {
        SqlRequest: jsonSchema(sqlRequestSchema(config), "input"),
        SqlResponse: jsonSchema(sqlResponseSchema, "output"),
        RegisterPath: jsonSchema(registerPathSchema, "input"),
        Database: jsonSchema(databaseSchema, "output"),
        DatabaseDetail: jsonSchema(
          databaseSchema.extend({ schema: z.unknown().describe("The database's schema as the SQL layer describes it, or null.") }),
          "output",
        ),
        DatabaseCreated: jsonSchema(databaseSchema.pick({ id: true, name: true, tables: true, source: true }), "output"),
        Error: jsonSchema(errorSchema, "output"),
      },
    },
    paths: {
      "/v1/databases": {
        post: {
          summary: "Upload a SQLite file (raw body) or register a server-side path (JSON)",
          security,
          parameters: Object.entries((jsonSchema(uploadQuerySchema, "input").properties ?? {}) as Record<string, unknown>).map(([name, schema]) => ({
            name,
            in: "query",
            required: false,
            schema,
          })),
          requestBody: {
            required: true,
            content: {
              "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } },
              "application/vnd.sqlite3": { schema: { type: "string", contentMediaType: "application/vnd.sqlite3" } },
              ...json("RegisterPath"),
            },
          },
          responses: {
            "201": { description: "Registered", content: json("DatabaseCreated") },
            ...errors("PAYLOAD_TOO_LARGE", "DB_INVALID", "DB_FILE_NOT_FOUND", "DB_PATH_NOT_ALLOWED"),
          },
        },
        get: {
          summary: "The caller's uploads and every path registration",
          security,
          responses: {
            "200": {
              description: "Databases",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: { databases: { type: "array", items: { $ref: "#/components/schemas/Database" } } },
                    required: ["databases"],
                  },
                },
              },
            },
            ...errors(),
          },
        },
      },
      "/v1/databases/{id}": {
        get: {
          summary: "One database with its schema",
          security,
          parameters: [idParam],
          responses: { "200": { description: "The database", content: json("DatabaseDetail") }, ...errors("DB_NOT_FOUND") },
        },
        delete: {
          summary: "Delete an upload",
          security,
          parameters: [idParam],
          responses: { "204": { description: "Deleted" }, ...errors("DB_NOT_FOUND", "DB_READ_ONLY_ENTRY") },
        },
      },
      "/v1/sql": {
        post: {
          summary: "Answer a question with one SQL query, its result, candidates and votes",
          security,
          requestBody: { required: true, content: json("SqlRequest") },
          responses: {
            "200": { description: "The answer", content: json("SqlResponse") },
            ...errors("DB_NOT_FOUND", "QUEUE_FULL", "DEADLINE_EXCEEDED", "CANCELLED", "POLICY_ERROR", "CONTEXT_EXHAUSTED", "EXECUTOR_UNAVAILABLE"),
          },
        },
      },
      "/v1/stream": {
        get: {
          summary:
            "WebSocket: send one SqlRequest message; receive every event as {type, ...}, then {type:'done', answer} or {type:'error', code, message, terminal:true}. Send {type:'cancel'} to stop. Auth: Authorization header or ?key=.",
          security,
          parameters: [
            { name: "key", in: "query", required: false, schema: { type: "string" }, description: "API key for browsers, which cannot set WebSocket headers." },
          ],
          responses: { "101": { description: "Switching protocols" }, ...errors() },
        },
      },
      "/healthz": { get: { summary: "Liveness: 200 while the process runs", responses: { "200": { description: "Alive" } } } },
      "/readyz": {
        get: {
          summary:
            "Readiness: 200 with policy info (and modelOrigin: configured, starter or placeholder; profile; constrained: the default of requests that do not say) when the model is loaded and the server is not draining",
          responses: {
            "200": { description: "Ready" },
            "503": { description: "MODEL_NOT_READY, SHUTTING_DOWN", content: { "application/json": { schema: errorRef } } },
          },
        },
      },
      "/metrics": {
        get: {
          summary: "Prometheus text exposition",
          responses: { "200": { description: "Metrics", content: { "text/plain": { schema: { type: "string" } } } } },
        },
      },
      "/openapi.json": { get: { summary: "This document", responses: { "200": { description: "OpenAPI 3.1" } } } },
      "/": { get: { summary: "The playground page", responses: { "200": { description: "HTML", content: { "text/html": { schema: { type: "string" } } } } } } },
    },
  };
}

/** /v1/databases: upload, register by path, list, describe and delete SQLite databases. */
import { realpath } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import type { FastifyPluginAsync } from "fastify";
import type { Config } from "../../config/index.js";
import { ReexError } from "../../errors/index.js";
import { loadSchema } from "../../sql/index.js";
import { UPLOAD_TYPES } from "../http-errors.js";
import type { ZodTypeProvider } from "../provider.js";
import type { RouteDoc } from "../route-doc.js";
import {
  databaseCreatedSchema,
  databaseDetailSchema,
  databaseListSchema,
  databaseParamsSchema,
  errorResponses,
  noBodySchema,
  parseWith,
  registerPathSchema,
  uploadQuerySchema,
  type DatabaseView,
} from "../schemas.js";
import type { RegistryEntry } from "../types.js";

function isInside(child: string, root: string): boolean {
  const rel = relative(root, child);
  return rel === "" || (!rel.startsWith(".." + sep) && rel !== ".." && !isAbsolute(rel));
}

async function realOrResolved(p: string): Promise<string> {
  try {
    return await realpath(p);
  } catch {
    return resolve(p);
  }
}

/**
 * The real path to register, when path registration is on and `requested` lies under an allowed
 * root after symlinks are resolved; DB_PATH_NOT_ALLOWED otherwise, DB_FILE_NOT_FOUND for a
 * missing file inside a root.
 */
async function allowedPath(requested: string, config: Config): Promise<string> {
  if (!config.server.allowPathRegistration) {
    throw new ReexError("DB_PATH_NOT_ALLOWED", "registering server-side paths is disabled (server.allowPathRegistration)");
  }
  if (config.server.allowedRoots.length === 0)
    throw new ReexError("DB_PATH_NOT_ALLOWED", "no folder is open to path registration (server.allowedRoots is empty)");
  const lexical = resolve(requested);
  const roots = await Promise.all(config.server.allowedRoots.map((r) => realOrResolved(r)));
  const lexicalRoots = config.server.allowedRoots.map((r) => resolve(r));
  const notAllowed = (): ReexError => new ReexError("DB_PATH_NOT_ALLOWED", "the path is outside server.allowedRoots");
  if (!lexicalRoots.some((r) => isInside(lexical, r)) && !roots.some((r) => isInside(lexical, r))) throw notAllowed();
  let real: string;
  try {
    real = await realpath(lexical);
  } catch {
    throw new ReexError("DB_FILE_NOT_FOUND", `no file at ${requested}`);
  }
  if (!roots.some((r) => isInside(real, r))) throw notAllowed();
  return real;
}

/** An entry as the API shows it: no owner and no server path, for uploads and path registrations alike. */
export function publicEntry(entry: RegistryEntry): DatabaseView {
  return {
    id: entry.id,
    name: entry.name,
    source: entry.source,
    tables: entry.tables,
    sizeBytes: entry.sizeBytes,
    registeredAt: entry.registeredAt,
  };
}

/** The schema GET /v1/databases/:id shows by default: tables, columns, example values and foreign keys. */
export function describeSchema(entry: RegistryEntry): unknown {
  return loadSchema(entry.path);
}

/** The schema without a top-level `path`, so an upload's location on the server never leaks. */
function withoutPath(schema: unknown): unknown {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema) || !("path" in schema)) return schema;
  const { path: _path, ...rest } = schema as Record<string, unknown>;
  return rest;
}

/** POST /v1/databases: the handler parses the query and the body itself, as the body is either a raw upload or JSON. */
const registerDoc: RouteDoc = {
  summary: "Upload a SQLite file (raw body) or register a server-side path (JSON)",
  guarded: true,
  errors: ["PAYLOAD_TOO_LARGE", "DB_INVALID", "DB_FILE_NOT_FOUND", "DB_PATH_NOT_ALLOWED", "DB_NAME_TAKEN", "UPLOAD_QUOTA_EXCEEDED", "STORAGE_FULL"],
  responses: { 201: "Registered" },
  query: uploadQuerySchema,
  bodies: { ...Object.fromEntries(UPLOAD_TYPES.map((type) => [type, "binary" as const])), "application/json": registerPathSchema },
};

/** Registers the /v1/databases routes. */
export const databaseRoutes: FastifyPluginAsync = async (instance) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const state = app.reex;
  const { registry } = state.deps;

  const describe = state.deps.describe ?? describeSchema;

  app.post("/databases", { schema: { response: { 201: databaseCreatedSchema, ...errorResponses } }, config: { doc: registerDoc } }, async (request, reply) => {
    const owner = request.reexOwner;
    let entry: RegistryEntry;
    if (Buffer.isBuffer(request.body)) {
      const query = parseWith(uploadQuerySchema, request.query, "query");
      if (request.body.length === 0) throw new ReexError("BAD_REQUEST", "the upload is empty; send the SQLite file as the request body");
      entry = await registry.registerBytes(request.body, {
        ...(owner !== undefined ? { owner } : {}),
        ...(query.name !== undefined ? { name: query.name } : {}),
      });
      request.log.info({ database: entry.id, sizeBytes: entry.sizeBytes, tables: entry.tables.length }, "database uploaded");
    } else {
      const body = parseWith(registerPathSchema, request.body, "body");
      const path = await allowedPath(body.path, state.config);
      entry = await registry.registerPath(path, body.name !== undefined ? { name: body.name } : {});
      request.log.info({ database: entry.id, tables: entry.tables.length }, "database registered by path");
    }
    const empty = entry.tables.length === 0 ? { warning: "the database has no tables: every question about it will fail; is this the file you meant?" } : {};
    return reply.code(201).send({ id: entry.id, name: entry.name, tables: entry.tables, source: entry.source, ...empty });
  });

  const listDoc: RouteDoc = { summary: "The caller's uploads and every path registration", guarded: true, responses: { 200: "Databases" } };
  app.get("/databases", { schema: { response: { 200: databaseListSchema, ...errorResponses } }, config: { doc: listDoc } }, async (request) => {
    const owner = request.reexOwner;
    return { databases: (await registry.list(owner)).map(publicEntry) };
  });

  const detail = { params: databaseParamsSchema, response: { 200: databaseDetailSchema, ...errorResponses } };
  const detailDoc: RouteDoc = { summary: "One database with its schema", guarded: true, errors: ["DB_NOT_FOUND"], responses: { 200: "The database" } };
  app.get("/databases/:id", { schema: detail, config: { doc: detailDoc } }, async (request) => {
    const { id } = request.params;
    const entry = await registry.get(id, request.reexOwner);
    return { ...publicEntry(entry), schema: withoutPath(await describe(entry)) ?? null };
  });

  const deleteDoc: RouteDoc = { summary: "Delete an upload", guarded: true, errors: ["DB_NOT_FOUND", "DB_READ_ONLY_ENTRY"], responses: { 204: "Deleted" } };
  app.delete(
    "/databases/:id",
    { schema: { params: databaseParamsSchema, response: { 204: noBodySchema, ...errorResponses } }, config: { doc: deleteDoc } },
    async (request, reply) => {
      const { id } = request.params;
      const entry = await registry.get(id, request.reexOwner);
      await registry.remove(id, request.reexOwner);
      state.teaching.store.removeDatabase(entry.id);
      request.log.info({ database: id }, "database deleted");
      return reply.code(204).send();
    },
  );
};

/** GET /openapi.json: an OpenAPI 3.1 document built from the documented routes as they registered: their zod schemas and their docs. */
import { z } from "zod";
import type { Config } from "../config/index.js";
import { ERROR_CATALOG, type ErrorCode } from "../errors/index.js";
import type { DocumentedRoute } from "./route-doc.js";
import { componentName, errorSchema, type OpenApiDocument } from "./schemas.js";

type Json = Record<string, unknown>;
type Io = "input" | "output";
type Schema = z.core.$ZodType;

/** The codes every route behind `guardApi` can answer, after its own. */
const GUARD_ERRORS: ErrorCode[] = ["BAD_REQUEST", "UNAUTHORIZED", "RATE_LIMITED", "SHUTTING_DOWN", "INTERNAL"];

/** The named schemas met so far as JSON Schemas, and the way every schema enters the document. */
interface Components {
  schemas: Record<string, Json>;
  /** `schema` as a $ref when it is a component, else inline with the components inside it as $refs. */
  use(schema: Schema, io: Io): Json;
}

function components(): Components {
  const schemas: Record<string, Json> = {};
  const ref = (name: string, schema: Schema, io: Io): Json => {
    if (!(name in schemas)) {
      schemas[name] = {};
      schemas[name] = inline(schema, io);
    }
    return { $ref: `#/components/schemas/${name}` };
  };
  const inline = (schema: Schema, io: Io): Json => {
    const { $schema: _drop, ...rest } = z.toJSONSchema(schema, {
      target: "draft-2020-12",
      io,
      unrepresentable: "any",
      override: ({ zodSchema, jsonSchema, path }) => {
        const name = path.length > 0 ? componentName(zodSchema) : undefined;
        if (name === undefined) return;
        const target = jsonSchema as Json;
        for (const key of Object.keys(target)) delete target[key];
        Object.assign(target, ref(name, zodSchema, io));
      },
    }) as Json;
    return rest;
  };
  return {
    schemas,
    use: (schema, io) => {
      const name = componentName(schema);
      return name === undefined ? inline(schema, io) : ref(name, schema, io);
    },
  };
}

function zodOf(value: unknown): z.ZodType | undefined {
  return value instanceof z.ZodType ? value : undefined;
}

/** The schema a route registered for `status`: the status's own, else its class's (`4xx`). */
function responseSchema(route: DocumentedRoute, status: number): z.ZodType | undefined {
  const response = (route.schema.response ?? {}) as Record<string, unknown>;
  return zodOf(response[String(status)]) ?? zodOf(response[`${String(status)[0]}xx`]);
}

/** One parameter per property of `schema` (an object), its description lifted onto the parameter. */
function parameters(where: "path" | "query", schema: Schema | undefined, c: Components): Json[] {
  if (!schema) return [];
  const json = c.use(schema, "input") as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, { description, ...rest }]) => ({
    name,
    in: where,
    required: json.required?.includes(name) ?? false,
    ...(description !== undefined ? { description } : {}),
    schema: rest,
  }));
}

function requestBody(route: DocumentedRoute, c: Components): Json | undefined {
  const content: Json = {};
  for (const [mediaType, body] of Object.entries(route.doc.bodies ?? {})) {
    content[mediaType] = { schema: body === "binary" ? { type: "string", contentMediaType: mediaType } : c.use(body, "input") };
  }
  const json = zodOf(route.schema.body);
  if (json) content["application/json"] = { schema: c.use(json, "input") };
  return Object.keys(content).length > 0 ? { required: true, content } : undefined;
}

function successes(route: DocumentedRoute, c: Components): Json {
  const out: Json = {};
  for (const [status, meaning] of Object.entries(route.doc.responses)) {
    if (typeof meaning !== "string") {
      out[status] = { description: meaning.description, content: { [meaning.mediaType]: { schema: { type: "string" } } } };
      continue;
    }
    const body = responseSchema(route, Number(status));
    out[status] =
      body && !(body instanceof z.ZodUndefined)
        ? { description: meaning, content: { "application/json": { schema: c.use(body, "output") } } }
        : { description: meaning };
  }
  return out;
}

/** One response per status of the route's codes (and a guarded route's), naming the codes. */
function errors(route: DocumentedRoute, c: Components): Json {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of [...(route.doc.errors ?? []), ...(route.doc.guarded ? GUARD_ERRORS : [])]) {
    const status = ERROR_CATALOG[code].status;
    const list = byStatus.get(status) ?? [];
    if (!list.includes(code)) list.push(code);
    byStatus.set(status, list);
  }
  const out: Json = {};
  for (const [status, list] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const schema = c.use(responseSchema(route, status) ?? errorSchema, "output");
    out[String(status)] = { description: list.join(", "), content: { "application/json": { schema } } };
  }
  return out;
}

function operation(route: DocumentedRoute, security: Json[], c: Components): Json {
  const params = [...parameters("path", zodOf(route.schema.params), c), ...parameters("query", zodOf(route.schema.querystring) ?? route.doc.query, c)];
  const body = requestBody(route, c);
  return {
    summary: route.doc.summary,
    ...(route.doc.guarded ? { security } : {}),
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(body ? { requestBody: body } : {}),
    responses: { ...successes(route, c), ...errors(route, c) },
  };
}

/** Builds the OpenAPI document of `routes` (recorded by `recordRoutes`) for an app configured with `config`. */
export function buildOpenApi(config: Config, routes: readonly DocumentedRoute[]): OpenApiDocument {
  const c = components();
  const security = config.server.apiKeys.length > 0 ? [{ bearer: [] }] : [];
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.url.replace(/:(\w+)/g, "{$1}");
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation(route, security, c) };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "reex",
      version: "0.1.0",
      description: "Execution-aware text-to-SQL. Errors are `{code, message, issues?}` with the status of the code (see docs/errors.md).",
    },
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "One of server.apiKeys (required on /v1 when any is configured)." } },
      schemas: c.schemas,
    },
    paths,
  };
}

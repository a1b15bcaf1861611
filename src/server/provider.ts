/**
 * A zod type provider for fastify: route schemas are zod schemas, `request.body`/`params`/`query`
 * are typed as their output, replies as their response schemas' input, validation failures are the
 * BAD_REQUEST `parseWith` throws, and responses are serialized with plain JSON.stringify.
 * Hand-written (about 20 lines) rather than fastify-type-provider-zod, whose versions for zod 4
 * require @fastify/swagger and openapi-types as peers; /openapi.json is built from the same
 * schemas by src/server/openapi.ts.
 */
import type { FastifyInstance, FastifySchemaCompiler, FastifySerializerCompiler, FastifyTypeProvider, RawServerDefault } from "fastify";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import type { z } from "zod";
import { ReexError, issuesFrom } from "../errors/index.js";
import { parseWith } from "./schemas.js";

/** Types a route's parts from its zod schemas. */
export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this["schema"] extends z.ZodType ? z.output<this["schema"]> : unknown;
  serializer: this["schema"] extends z.ZodType ? z.input<this["schema"]> : unknown;
}

/** The app as route plugins see it: zod schemas in, typed request parts out. */
export type ReexApp = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, ZodTypeProvider>;

const PART_NAMES: Record<string, string> = { body: "body", params: "params", querystring: "query", headers: "headers" };

/** Validates a request part with its zod schema; a failure is `parseWith`'s BAD_REQUEST, issues prefixed with the part. */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    try {
      // fastify hands a missing part over as null
      return { value: parseWith(schema, data === null ? undefined : data, PART_NAMES[httpPart ?? ""] ?? httpPart ?? "request") };
    } catch (error) {
      return { error: error as Error };
    }
  };

/**
 * Serializes every response with JSON.stringify after checking it against the route's response
 * schema for its status: a body the schema refuses is a server bug, thrown as INTERNAL (the error
 * handler answers 500) rather than sent. The check never reshapes the body: what is sent is the
 * body as built, not the schema's output (fastify's default, fast-json-stringify, would drop
 * undocumented fields and coerce types).
 */
export const jsonSerializerCompiler: FastifySerializerCompiler<z.ZodType> =
  ({ schema, url, httpStatus }) =>
  (data) => {
    if (typeof (schema as Partial<z.ZodType> | undefined)?.safeParse === "function") {
      const checked = schema.safeParse(data);
      if (!checked.success) {
        throw new ReexError("INTERNAL", `the response of ${url} (${httpStatus}) does not match its schema`, { issues: issuesFrom(checked.error.issues) });
      }
    }
    return JSON.stringify(data);
  };

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
 * Serializes every response with JSON.stringify, as fastify does for a route without a response
 * schema: a registered response schema types and documents the body but never reshapes it
 * (fastify's default, fast-json-stringify, would drop undocumented fields and coerce types).
 */
export const jsonSerializerCompiler: FastifySerializerCompiler<z.ZodType> = () => (data) => JSON.stringify(data);

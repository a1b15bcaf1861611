/** What a route says about itself for /openapi.json (its `config.doc`), and the record of the documented routes as fastify registers them. */
import type { FastifyInstance, FastifySchema } from "fastify";
import type { z } from "zod";
import type { ErrorCode } from "../errors/index.js";

/** A success response whose body is not JSON: what it means and its media type. */
export interface MediaResponse {
  description: string;
  mediaType: string;
}

/** What /openapi.json says about a route besides its fastify `schema` (body, querystring, params and response schemas). */
export interface RouteDoc {
  /** One line: what the route does. */
  summary: string;
  /** Whether `guardApi` runs first (API key, rate limit, draining): bearer security and the errors every guarded route can answer. Default false. */
  guarded?: boolean;
  /** The catalogue codes the route answers with, besides a guarded route's. Default none. */
  errors?: ErrorCode[];
  /** What each success status means: its description (the JSON body's schema is `schema.response[status]`, a status without one has no body), or a body of another media type. */
  responses: Record<number, string | MediaResponse>;
  /** The query the handler parses itself (fastify validates `schema.querystring` only). Default none. */
  query?: z.ZodObject;
  /** The bodies the handler parses itself, by media type: a zod schema for JSON, "binary" for raw bytes. Default none. */
  bodies?: Record<string, z.ZodType | "binary">;
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route's entry in /openapi.json; a route without one is left out. */
    doc?: RouteDoc;
  }
}

/** A route as /openapi.json describes it: method, URL with its prefix, fastify schema and doc. */
export interface DocumentedRoute {
  method: string;
  url: string;
  schema: FastifySchema;
  doc: RouteDoc;
}

/** The routes of `app` that carry a doc, filled in as they register (so call it before registering any); the HEAD routes fastify adds for GET are left out. */
export function recordRoutes(app: FastifyInstance): DocumentedRoute[] {
  const routes: DocumentedRoute[] = [];
  app.addHook("onRoute", (route) => {
    const doc = route.config?.doc;
    if (!doc) return;
    for (const method of [route.method].flat()) if (method !== "HEAD") routes.push({ method, url: route.url, schema: route.schema ?? {}, doc });
  });
  return routes;
}

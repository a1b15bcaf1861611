/** /v1/databases/:id/examples: add (or correct from an answer), list and delete a database's verified examples. */
import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "../provider.js";
import type { RouteDoc } from "../route-doc.js";
import {
  databaseParamsSchema,
  errorResponses,
  exampleBodySchema,
  exampleCreatedSchema,
  exampleListSchema,
  exampleParamsSchema,
  noBodySchema,
} from "../schemas.js";

/** Registers the /v1/databases/:id/examples routes. */
export const exampleRoutes: FastifyPluginAsync = async (instance) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const state = app.reex;
  const { registry } = state.deps;
  const teaching = state.teaching;

  const addDoc: RouteDoc = {
    summary:
      "Store a verified example ({question, sql, evidence?}) or correct an answer ({answerId, sql?}: without sql, the answer's own SQL is stored as right); the SQL must run",
    guarded: true,
    errors: ["DB_NOT_FOUND", "EXAMPLE_SQL_FAILED", "ANSWER_NOT_FOUND", "EXAMPLES_FULL"],
    responses: { 201: "Stored", 200: "Replaced the key's example of the same question" },
  };
  const addSchema = {
    params: databaseParamsSchema,
    body: exampleBodySchema,
    response: { 200: exampleCreatedSchema, 201: exampleCreatedSchema, ...errorResponses },
  };
  app.post("/databases/:id/examples", { schema: addSchema, config: { doc: addDoc } }, async (request, reply) => {
    const owner = request.reexOwner;
    const entry = await registry.get(request.params.id, owner);
    const { example, created } = await teaching.addExample(entry, owner, request.body);
    request.log.info({ database: entry.id, example: example.id, origin: example.origin, created }, "example stored");
    return reply.code(created ? 201 : 200).send({ ...example, created });
  });

  const listDoc: RouteDoc = {
    summary: "The database's verified examples this key sees (its own and the shared ones)",
    guarded: true,
    errors: ["DB_NOT_FOUND"],
    responses: { 200: "Examples" },
  };
  app.get(
    "/databases/:id/examples",
    { schema: { params: databaseParamsSchema, response: { 200: exampleListSchema, ...errorResponses } }, config: { doc: listDoc } },
    async (request) => {
      const entry = await registry.get(request.params.id, request.reexOwner);
      return { examples: teaching.listExamples(entry, request.reexOwner) };
    },
  );

  const deleteDoc: RouteDoc = {
    summary: "Delete a verified example",
    guarded: true,
    errors: ["DB_NOT_FOUND", "EXAMPLE_NOT_FOUND", "FORBIDDEN"],
    responses: { 204: "Deleted" },
  };
  app.delete(
    "/databases/:id/examples/:exampleId",
    { schema: { params: exampleParamsSchema, response: { 204: noBodySchema, ...errorResponses } }, config: { doc: deleteDoc } },
    async (request, reply) => {
      const owner = request.reexOwner;
      const entry = await registry.get(request.params.id, owner);
      teaching.store.remove(entry.id, request.params.exampleId, owner);
      request.log.info({ database: entry.id, example: request.params.exampleId }, "example deleted");
      return reply.code(204).send();
    },
  );
};

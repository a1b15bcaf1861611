/** /v1/conversations: the caller's conversations (ids it named on /v1/sql, the stream or MCP `ask`), listed, read and deleted. */
import type { FastifyPluginAsync } from "fastify";
import type { ZodTypeProvider } from "../provider.js";
import type { RouteDoc } from "../route-doc.js";
import { conversationListSchema, conversationParamsSchema, conversationSchema, errorResponses, noBodySchema } from "../schemas.js";

/** Registers the /v1/conversations routes. */
export const conversationRoutes: FastifyPluginAsync = async (instance) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const teaching = app.reex.teaching;

  const listDoc: RouteDoc = { summary: "This key's conversations, most recently used first", guarded: true, responses: { 200: "Conversations" } };
  app.get("/conversations", { schema: { response: { 200: conversationListSchema, ...errorResponses } }, config: { doc: listDoc } }, async (request) => ({
    conversations: teaching.listConversations(request.reexOwner),
  }));

  const readDoc: RouteDoc = {
    summary: "One conversation with its turns",
    guarded: true,
    errors: ["CONVERSATION_NOT_FOUND"],
    responses: { 200: "The conversation" },
  };
  app.get(
    "/conversations/:id",
    { schema: { params: conversationParamsSchema, response: { 200: conversationSchema, ...errorResponses } }, config: { doc: readDoc } },
    async (request) => teaching.conversation(request.reexOwner, request.params.id),
  );

  const deleteDoc: RouteDoc = { summary: "Forget a conversation", guarded: true, errors: ["CONVERSATION_NOT_FOUND"], responses: { 204: "Deleted" } };
  app.delete(
    "/conversations/:id",
    { schema: { params: conversationParamsSchema, response: { 204: noBodySchema, ...errorResponses } }, config: { doc: deleteDoc } },
    async (request, reply) => {
      teaching.deleteConversation(request.reexOwner, request.params.id);
      return reply.code(204).send();
    },
  );
};

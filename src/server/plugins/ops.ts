/** Operations: the x-request-id header, request metrics, /healthz, /readyz, /metrics and /openapi.json. */
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { z } from "zod";
import { ReexError } from "../../errors/index.js";
import { modelDisplayName, type PolicyInfo } from "../../policy/index.js";
import { buildOpenApi } from "../openapi.js";
import type { ZodTypeProvider } from "../provider.js";
import type { DocumentedRoute, RouteDoc } from "../route-doc.js";
import { errorResponses, healthSchema, openApiSchema, readySchema, type OpenApiDocument } from "../schemas.js";

/** Options of the operations plugin. */
export interface OpsOptions {
  /** The app's documented routes (`recordRoutes`), complete once the app is ready: /openapi.json describes them. */
  routes: readonly DocumentedRoute[];
}

const ops: FastifyPluginAsync<OpsOptions> = async (instance, { routes }) => {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const state = app.reex;
  const { config, deps, queue } = state;
  const sc = config.server;

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    state.metrics.requests.inc({ route, status: String(reply.statusCode) });
    state.metrics.duration.observe(reply.elapsedTime / 1000, { route });
  });

  const quiet = { logLevel: "warn" as const };
  const guarded = sc.protectOpsEndpoints ? { ...quiet, onRequest: async (request: FastifyRequest) => app.authenticate(request) } : quiet;
  const healthDoc: RouteDoc = { summary: "Liveness: 200 while the process runs", responses: { 200: "Alive" } };
  app.get("/healthz", { ...quiet, schema: { response: { 200: healthSchema } }, config: { doc: healthDoc } }, async () => ({ status: "ok" as const }));

  const readyDoc: RouteDoc = {
    summary:
      "Readiness: 200 with policy info (and modelOrigin: configured, default, starter or placeholder, with modelReason; profile; constrained: the default of requests that do not say) when the model is loaded and the server is not draining",
    errors: ["MODEL_NOT_READY", "SHUTTING_DOWN"],
    responses: { 200: "Ready" },
  };
  app.get("/readyz", { ...guarded, schema: { response: { 200: readySchema, ...errorResponses } }, config: { doc: readyDoc } }, async () => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    const p = state.policy();
    if (!p) throw new ReexError("MODEL_NOT_READY", "the model is still loading");
    return {
      status: "ready" as const,
      modelName: modelDisplayName(p.info),
      policy: publicPolicyInfo(p.info),
      ...(deps.model ? { modelOrigin: deps.model.origin } : {}),
      ...(deps.model?.reason ? { modelReason: deps.model.reason } : {}),
      ...(deps.profile ? { profile: deps.profile } : {}),
      ...(deps.constrained !== undefined ? { constrained: deps.constrained } : {}),
      queue: { running: queue.running, waiting: queue.waiting, maxConcurrent: sc.maxConcurrent, maxQueued: sc.maxQueued },
    };
  });

  const metricsDoc: RouteDoc = { summary: "Prometheus text exposition", responses: { 200: { description: "Metrics", mediaType: "text/plain" } } };
  app.get("/metrics", { ...guarded, config: { doc: metricsDoc } }, async (_request, reply) => {
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(state.metrics.registry.render());
  });

  let openapi: OpenApiDocument | undefined;
  const openapiDoc: RouteDoc = { summary: "This document", responses: { 200: "OpenAPI 3.1" } };
  app.get(
    "/openapi.json",
    { schema: { response: { 200: openApiSchema } }, config: { doc: openapiDoc } },
    async () => (openapi ??= buildOpenApi(config, routes)),
  );
};

/** What /readyz shows of the policy: names, never a path on the server's disk. */
function publicPolicyInfo(info: PolicyInfo): z.output<typeof readySchema>["policy"] {
  const base = (file: string): string => file.split(/[\\/]/).filter(Boolean).pop() ?? file;
  return {
    backend: info.backend,
    model: modelDisplayName(info),
    device: info.device,
    contextSize: info.contextSize,
    maxSequences: info.maxSequences,
    ...(info.lora ? { lora: info.lora.map(base) } : {}),
  };
}

/** Health, readiness, metrics and the OpenAPI document (readiness and metrics behind keys with server.protectOpsEndpoints). */
export const opsPlugin = fp<OpsOptions>(ops, { name: "reex-ops", dependencies: ["reex-auth"] });

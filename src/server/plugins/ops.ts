/** Operations: the x-request-id header, request metrics, /healthz, /readyz, /metrics and /openapi.json. */
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ReexError } from "../../errors/index.js";
import { modelDisplayName, type PolicyInfo } from "../../policy/index.js";
import { buildOpenApi } from "../openapi.js";

const ops: FastifyPluginAsync = async (app) => {
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
  app.get("/healthz", quiet, async () => ({ status: "ok" }));

  app.get("/readyz", guarded, async () => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    const p = state.policy();
    if (!p) throw new ReexError("MODEL_NOT_READY", "the model is still loading");
    return {
      status: "ready",
      modelName: modelDisplayName(p.info),
      policy: publicPolicyInfo(p.info),
      ...(deps.model ? { modelOrigin: deps.model.origin } : {}),
      ...(deps.profile ? { profile: deps.profile } : {}),
      ...(deps.constrained !== undefined ? { constrained: deps.constrained } : {}),
      queue: { running: queue.running, waiting: queue.waiting, maxConcurrent: sc.maxConcurrent, maxQueued: sc.maxQueued },
    };
  });

  app.get("/metrics", guarded, async (_request, reply) => {
    return reply.type("text/plain; version=0.0.4; charset=utf-8").send(state.metrics.registry.render());
  });

  const openapi = buildOpenApi(config);
  app.get("/openapi.json", async () => openapi);
};

/** What /readyz shows of the policy: names, never a path on the server's disk. */
function publicPolicyInfo(info: PolicyInfo): Record<string, unknown> {
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
export const opsPlugin = fp(ops, { name: "reex-ops", dependencies: ["reex-auth"] });

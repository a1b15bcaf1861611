/** Authentication and rate limits: the caller's key, failed-authentication throttling, and /v1's per-key limit. */
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ReexError } from "../../errors/index.js";
import { KEY_PREFIX_CHARS, failureIdentities, tenantOf } from "../auth.js";

declare module "fastify" {
  interface FastifyRequest {
    /** Identity of the caller's API key (undefined when auth is off). */
    reexOwner?: string;
  }
  interface FastifyInstance {
    /**
     * Sets `request.reexOwner` from the Bearer key (or `?key=` on /v1/stream). A valid key always
     * passes; otherwise UNAUTHORIZED, or RATE_LIMITED once its address or its key prefix has failed
     * server.authFailuresPerMinute times this minute. No-op with auth off.
     */
    authenticate(request: FastifyRequest): void;
    /** The API's gate: SHUTTING_DOWN while draining, then `authenticate`, then the per-key rate limit. */
    guardApi(request: FastifyRequest): Promise<void>;
  }
}

const auth: FastifyPluginAsync = async (app) => {
  const state = app.reex;
  const sc = state.config.server;
  app.decorateRequest("reexOwner", undefined);

  app.decorate("authenticate", (request: FastifyRequest): void => {
    if (!state.keys.enabled) return;
    const rawQueryKey = request.routeOptions.url === "/v1/stream" ? (request.query as Record<string, unknown>)?.key : undefined;
    const queryKey = typeof rawQueryKey === "string" ? rawQueryKey : undefined;
    try {
      // a valid key always gets through: failures of others from its address never lock it out
      request.reexOwner = state.keys.authenticate(request.headers.authorization, queryKey);
    } catch (err) {
      const identities = failureIdentities(request.headers.authorization, queryKey, request.ip);
      for (const identity of identities) {
        const blocked = state.authFailures.exhausted(identity);
        if (!blocked.allowed) {
          const from = identity.startsWith("ip:") ? "from this address" : `with this key's first ${KEY_PREFIX_CHARS} characters`;
          throw new ReexError("RATE_LIMITED", `more than ${sc.authFailuresPerMinute} failed authentications this minute ${from}`, {
            details: { retryAfterSeconds: blocked.retryAfterSeconds },
          });
        }
      }
      for (const identity of identities) state.authFailures.take(identity);
      throw err;
    }
  });

  app.decorate("guardApi", async (request: FastifyRequest): Promise<void> => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    app.authenticate(request);
    const decision = state.limiter.take(tenantOf(request.reexOwner, request.ip));
    if (!decision.allowed) {
      throw new ReexError("RATE_LIMITED", `more than ${sc.rateLimitPerMinute} requests this minute`, {
        details: { retryAfterSeconds: decision.retryAfterSeconds },
      });
    }
  });
};

/** Decorates `authenticate`, `guardApi` and `request.reexOwner`. */
export const authPlugin = fp(auth, { name: "reex-auth", decorators: { fastify: ["reex"] } });

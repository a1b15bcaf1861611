/** Authentication and rate limits: the caller's key, failed-authentication throttling, and /v1's per-key limit. */
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { ReexError } from "../../errors/index.js";

declare module "fastify" {
  interface FastifyRequest {
    /** Identity of the caller's API key (undefined when auth is off). */
    reexOwner?: string;
  }
  interface FastifyInstance {
    /** Sets `request.reexOwner` from the Bearer key (or `?key=` on /v1/stream); UNAUTHORIZED or RATE_LIMITED otherwise. No-op with auth off. */
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
    const address = `ip:${request.ip}`;
    const blocked = state.authFailures.exhausted(address);
    if (!blocked.allowed) {
      throw new ReexError("RATE_LIMITED", `more than ${sc.authFailuresPerMinute} failed authentications this minute from this address`, {
        details: { retryAfterSeconds: blocked.retryAfterSeconds },
      });
    }
    const queryKey = request.routeOptions.url === "/v1/stream" ? (request.query as Record<string, unknown>)?.key : undefined;
    try {
      request.reexOwner = state.keys.authenticate(request.headers.authorization, typeof queryKey === "string" ? queryKey : undefined);
    } catch (err) {
      state.authFailures.take(address);
      throw err;
    }
  });

  app.decorate("guardApi", async (request: FastifyRequest): Promise<void> => {
    if (state.draining) throw new ReexError("SHUTTING_DOWN", "the server is shutting down");
    app.authenticate(request);
    const decision = state.limiter.take(request.reexOwner ?? `ip:${request.ip}`);
    if (!decision.allowed) {
      throw new ReexError("RATE_LIMITED", `more than ${sc.rateLimitPerMinute} requests this minute`, {
        details: { retryAfterSeconds: decision.retryAfterSeconds },
      });
    }
  });
};

/** Decorates `authenticate`, `guardApi` and `request.reexOwner`. */
export const authPlugin = fp(auth, { name: "reex-auth", decorators: { fastify: ["reex"] } });

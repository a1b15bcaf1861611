/**
 * /mcp: the MCP front end over Streamable HTTP, one SDK transport and server per session. Each
 * request has passed the /v1 guard (API key, rate limit, draining) first; `ask` decodes through
 * the generation queue with the server's deadline and metrics, like POST /v1/sql.
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { createPromptBuilder } from "../../decoding/index.js";
import { ReexError } from "../../errors/index.js";
import { createMcpServer, type McpDecode } from "../../mcp/index.js";
import type { Executor } from "../../sql/index.js";
import { decodeQueued } from "../answer.js";
import { tenantOf } from "../auth.js";

/**
 * Open MCP sessions at most across all tenants; past it the least recently used session of the
 * tenant holding the most closes. Default 4096.
 */
export const MAX_MCP_SESSIONS = 4096;

interface Session {
  transport: StreamableHTTPServerTransport;
  /** The API key identity that opened it; other keys get SESSION_NOT_FOUND's 404. */
  owner: string | undefined;
  /** Whose cap it counts against: the key identity, or `ip:<address>` when keys are off. */
  tenant: string;
  usedAt: number;
}

function sessionHeader(request: FastifyRequest): string | undefined {
  const raw = request.headers["mcp-session-id"];
  return Array.isArray(raw) ? raw[0] : raw;
}

/** The open sessions, kept in use order (least recently used first), with how many each tenant holds. */
interface SessionTable {
  /** Records a session the transport has just initialized. */
  add(id: string, session: Session): void;
  /** Session `id` if `owner` opened it, marked as just used; undefined otherwise. */
  use(id: string, owner: string | undefined): Session | undefined;
  /** Drops session `id` from the table without closing its transport; returns it. */
  forget(id: string): Session | undefined;
  /** Closes the sessions unused for longer than `idleMs`. */
  closeIdle(idleMs: number): void;
  /** Closes the least recently used sessions that keep `tenant` from opening one more within `perTenantCap` and {@link MAX_MCP_SESSIONS}. */
  makeRoom(tenant: string, perTenantCap: number): void;
  closeAll(): void;
}

/** An empty {@link SessionTable}. */
function sessionTable(): SessionTable {
  const sessions = new Map<string, Session>();
  const perTenant = new Map<string, number>();
  const forget = (id: string): Session | undefined => {
    const session = sessions.get(id);
    if (!session) return undefined;
    sessions.delete(id);
    const left = (perTenant.get(session.tenant) ?? 1) - 1;
    if (left > 0) perTenant.set(session.tenant, left);
    else perTenant.delete(session.tenant);
    return session;
  };
  const close = (id: string): void => {
    forget(id)
      ?.transport.close()
      .catch(() => undefined);
  };
  /** The least recently used session of `tenant`. */
  const oldestOf = (tenant: string): string | undefined => {
    for (const [id, session] of sessions) if (session.tenant === tenant) return id;
    return undefined;
  };
  return {
    add(id, session) {
      sessions.set(id, session);
      perTenant.set(session.tenant, (perTenant.get(session.tenant) ?? 0) + 1);
    },
    use(id, owner) {
      const session = sessions.get(id);
      if (!session || session.owner !== owner) return undefined;
      session.usedAt = Date.now();
      sessions.delete(id);
      sessions.set(id, session);
      return session;
    },
    forget,
    closeIdle(idleMs) {
      const now = Date.now();
      for (const [id, session] of sessions) if (now - session.usedAt > idleMs) close(id);
    },
    makeRoom(tenant, perTenantCap) {
      for (let id = oldestOf(tenant); id !== undefined && (perTenant.get(tenant) ?? 0) >= perTenantCap; id = oldestOf(tenant)) close(id);
      if (sessions.size >= MAX_MCP_SESSIONS && perTenant.size > 0) {
        const largest = [...perTenant.entries()].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
        const id = oldestOf(largest);
        if (id !== undefined) close(id);
      }
    },
    closeAll() {
      for (const id of [...sessions.keys()]) close(id);
    },
  };
}

/** Registers POST, GET and DELETE /mcp. */
export async function mcpRoutes(app: FastifyInstance): Promise<void> {
  const state = app.reex;
  const { config } = state;
  const sessions = sessionTable();
  const prompts = createPromptBuilder({ indexDir: join(config.sql.dataDir, "indexes") });
  // the server's executor, or the pool the teaching state starts on first use (closed with the app)
  const executor: Executor = { execute: (...args) => state.teaching.executor.execute(...args), close: async () => undefined };

  /** The decode of one session: through the generation queue, on `tenant`'s share of it. */
  const decodeFor =
    (tenant: string): McpDecode =>
    async (request, ctx) => {
      const { answer } = await decodeQueued(state, request, {
        database: ctx.database,
        log: state.log,
        tenant,
        ...(ctx.sink ? { sink: ctx.sink } : {}),
        ...(ctx.signal ? { cancel: ctx.signal } : {}),
      });
      return answer;
    };

  const idleMs = config.server.mcpSessionIdleMs;
  const sweep = setInterval(() => sessions.closeIdle(idleMs), Math.max(10, Math.min(60_000, Math.floor(idleMs / 4))));
  sweep.unref();

  const open = async (owner: string | undefined, tenant: string): Promise<StreamableHTTPServerTransport> => {
    sessions.makeRoom(tenant, config.server.mcpSessionsPerKey);
    const log = state.log.child({ front: "mcp" });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.add(id, { transport, owner, tenant, usedAt: Date.now() }),
      onsessionclosed: (id) => {
        sessions.forget(id);
      },
    });
    const server = createMcpServer({
      config,
      registry: state.deps.registry,
      executor,
      decode: decodeFor(tenant),
      prompts,
      teaching: state.teaching,
      log,
      ...(owner !== undefined ? { owner } : {}),
      ...(state.deps.profile ? { profile: state.deps.profile.id } : {}),
      liveTrajectories: () => state.policy()?.liveTrajectories() ?? 0,
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.forget(transport.sessionId);
    };
    await server.connect(transport);
    return transport;
  };

  const handle = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const id = sessionHeader(request);
    let transport: StreamableHTTPServerTransport;
    if (id !== undefined) {
      const session = sessions.use(id, request.reexOwner);
      if (!session) throw new ReexError("NOT_FOUND", "no such MCP session; start a new one with an initialize request");
      transport = session.transport;
    } else {
      if (request.method !== "POST") throw new ReexError("BAD_REQUEST", "an Mcp-Session-Id header is required");
      transport = await open(request.reexOwner, tenantOf(request.reexOwner, request.ip));
    }
    reply.hijack();
    await transport.handleRequest(request.raw, reply.raw, request.body);
    if (id === undefined && transport.sessionId === undefined) await transport.close();
  };

  app.post("/mcp", handle);
  app.get("/mcp", handle);
  app.delete("/mcp", handle);

  app.addHook("onClose", async () => {
    clearInterval(sweep);
    sessions.closeAll();
    prompts.close();
    state.log.info("mcp sessions closed");
  });
}

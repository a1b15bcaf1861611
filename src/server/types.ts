/** What the server needs from the rest of reex, as structural types so tests can hand in fakes. */
import type { DestinationStream, Logger } from "pino";
import type { Config } from "../config/index.js";
import type { Answer, AnswerRequest, DecodeContext } from "../decoding/index.js";
import type { Policy } from "../policy/index.js";
import type { DatabaseEntry, Executor } from "../sql/index.js";

/** A value or a promise of it. */
export type Awaitable<T> = T | Promise<T>;

/** A registered database as the registry keeps it (src/sql's entry). */
export type RegistryEntry = DatabaseEntry;

/** The registry surface the server uses (src/sql's DatabaseRegistry satisfies it). */
export interface DatabaseRegistryLike {
  registerPath(path: string, options?: { owner?: string; name?: string }): Awaitable<RegistryEntry>;
  registerBytes(bytes: Uint8Array, options?: { owner?: string; name?: string }): Awaitable<RegistryEntry>;
  /** The owner's entries plus the shared (owner-less) ones; everything when `owner` is undefined. */
  list(owner?: string): Awaitable<RegistryEntry[]>;
  /** Throws DB_NOT_FOUND when missing or owned by someone else. */
  get(id: string, owner?: string): Awaitable<RegistryEntry>;
  /** Deletes an upload; DB_NOT_FOUND for another owner's, DB_READ_ONLY_ENTRY for path registrations, FORBIDDEN for a shared upload. */
  remove(id: string, owner?: string): Awaitable<unknown>;
}

/** The decoder seam: answers one request, emitting events to `ctx.sink` and honouring `ctx.signal`. */
export type DecodeFn = (request: AnswerRequest, ctx: DecodeContext) => Promise<Answer>;

/** Everything {@link buildApp} needs. */
export interface ServerDeps {
  config: Config;
  registry: DatabaseRegistryLike;
  decode: DecodeFn;
  /** The loaded policy, or a getter that returns undefined while it loads; /readyz reports MODEL_NOT_READY until it is there. */
  policy?: Policy | (() => Policy | undefined);
  /**
   * Where the loaded model came from (the runtime's `model`): /readyz reports the origin, and the
   * playground says when it is the starter or the random placeholder. Default: not reported.
   */
  model?: { origin: "configured" | "default" | "starter" | "placeholder"; reason?: string };
  /** The profile requests get when they name none, and why (the decoder's choice); /readyz and the playground show it. Default: not reported. */
  profile?: { id: string; reason: string };
  /** Whether requests that do not say `constrained` are decoded constrained (the decoder's default); /readyz shows it. Default: not reported. */
  constrained?: boolean;
  /** Closed when the app closes (unless `close` is given). */
  executor?: Executor;
  /** The schema shown by GET /v1/databases/:id; default: src/sql's loadSchema without the server path. */
  describe?: (entry: RegistryEntry) => Awaitable<unknown>;
  /** Called once when the app closes, after in-flight work ended; default closes `executor` and `policy`. */
  close?: () => Promise<void>;
  /** How long shutdown lets in-flight work finish before aborting it, ms. Default 10000. */
  shutdownGraceMs?: number;
  /** A pino logger to use instead of building one from config.server.logLevel. */
  logger?: Logger;
  /** Where the built logger writes; default stdout. */
  logStream?: DestinationStream;
  /** Clock for the rate limiter, ms. Default Date.now. */
  now?: () => number;
}

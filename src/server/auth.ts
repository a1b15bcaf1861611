/** API keys: Bearer (or `?key=` for WebSockets) checked against the configured keys by hash. */
import { createHash } from "node:crypto";
import { ReexError } from "../errors/index.js";

/** A short, stable, non-reversible identity for a key: the first 16 hex digits of its SHA-256. */
export function keyIdentity(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/**
 * Whose share of the per-tenant limits (rate limit, generation queue, MCP sessions) a request
 * takes: its key's identity, or `ip:<address>` when keys are off.
 */
export function tenantOf(owner: string | undefined, ip: string): string {
  return owner ?? `ip:${ip}`;
}

/** Checks presented keys against the configured set; no keys configured means auth is off. */
export class KeyRing {
  private readonly known: Set<string>;

  constructor(keys: readonly string[]) {
    this.known = new Set(keys.map((k) => createHash("sha256").update(k).digest("hex")));
  }

  /** True when at least one key is configured. */
  get enabled(): boolean {
    return this.known.size > 0;
  }

  /**
   * The owner identity for a request: undefined when auth is off; the key's identity when it is
   * valid; throws UNAUTHORIZED when missing or wrong.
   */
  authenticate(authorization: string | undefined, queryKey: string | undefined): string | undefined {
    if (!this.enabled) return undefined;
    const key = presentedKey(authorization, queryKey);
    if (!key) throw new ReexError("UNAUTHORIZED", "an API key is required (Authorization: Bearer <key>)");
    if (!this.known.has(createHash("sha256").update(key).digest("hex"))) throw new ReexError("UNAUTHORIZED", "unknown API key");
    return keyIdentity(key);
  }
}

/** Characters of a presented key whose failures are counted together (server.authFailuresPerMinute). */
export const KEY_PREFIX_CHARS = 8;

/**
 * The key a request presents: the Bearer token of `authorization`, else `queryKey`; undefined
 * when it presents none. Throws UNAUTHORIZED for an Authorization header that is not `Bearer <key>`.
 */
export function presentedKey(authorization: string | undefined, queryKey: string | undefined): string | undefined {
  if (authorization === undefined) return queryKey || undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) throw new ReexError("UNAUTHORIZED", "the Authorization header must be `Bearer <key>`");
  return m[1];
}

/**
 * The throttling identities of a failed authentication: its client address, and the presented
 * key's first {@link KEY_PREFIX_CHARS} characters (hashed, so no key text is kept) when it
 * presented one. Never throws.
 */
export function failureIdentities(authorization: string | undefined, queryKey: string | undefined, ip: string): string[] {
  let key: string | undefined;
  try {
    key = presentedKey(authorization, queryKey);
  } catch {
    key = undefined;
  }
  return [`ip:${ip}`, ...(key ? [`prefix:${keyIdentity(key.slice(0, KEY_PREFIX_CHARS))}`] : [])];
}

/** API keys: Bearer (or `?key=` for WebSockets) checked against the configured keys by hash. */
import { createHash } from "node:crypto";
import { ReexError } from "../errors/index.js";

/** A short, stable, non-reversible identity for a key: the first 16 hex digits of its SHA-256. */
export function keyIdentity(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
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
    let key: string | undefined;
    if (authorization !== undefined) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!m) throw new ReexError("UNAUTHORIZED", "the Authorization header must be `Bearer <key>`");
      key = m[1];
    } else {
      key = queryKey;
    }
    if (!key) throw new ReexError("UNAUTHORIZED", "an API key is required (Authorization: Bearer <key>)");
    if (!this.known.has(createHash("sha256").update(key).digest("hex"))) throw new ReexError("UNAUTHORIZED", "unknown API key");
    return keyIdentity(key);
  }
}

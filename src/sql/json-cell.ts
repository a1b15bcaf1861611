/** The one JSON form of a SQLite cell, for every front end (REST, WebSocket, MCP, `reex exec --json`). */
import type { SqlValue } from "./types.js";

/** A cell as clients get it: safe integers as numbers, larger bigints as decimal strings, BLOBs as `{base64}`, non-finite floats as strings. */
export type JsonCell = string | number | null | { base64: string };

/** Converts one SQLite value to its JSON form. */
export function jsonCell(value: SqlValue | undefined): JsonCell {
  if (value === undefined || value === null) return null;
  if (typeof value === "bigint") return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return { base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
}

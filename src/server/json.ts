/** JSON-safe views of SQL values and events (bigints and BLOBs do not survive JSON.stringify). */
import type { z } from "zod";
import type { ExecResult, SqlValue } from "../sql/index.js";
import type { cellSchema, resultSchema } from "./schemas.js";

/** A cell as the API sends it: safe integers as numbers, larger bigints as strings, BLOBs as `{base64}`. */
export type JsonCell = z.output<typeof cellSchema>;

/** Converts one SQLite value to its JSON form. */
export function jsonCell(value: SqlValue | undefined): JsonCell {
  if (value === undefined || value === null) return null;
  if (typeof value === "bigint") return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return { base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
}

/** A successful execution as the API shows it; null for failures and missing results. */
export function jsonResult(result: ExecResult | undefined): z.output<typeof resultSchema> | null {
  if (!result?.ok) return null;
  return { columns: result.columns, rows: result.rows.map((r) => r.map(jsonCell)), rowCount: result.rowCount, truncated: result.truncated };
}

/** Deep copy of any value with bigints and byte arrays made JSON-safe. */
export function jsonSafe(value: unknown): unknown {
  if (value === null || typeof value !== "object") return typeof value === "bigint" ? jsonCell(value) : value;
  if (value instanceof Uint8Array) return jsonCell(value);
  if (Array.isArray(value)) return value.map(jsonSafe);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = jsonSafe(v);
  return out;
}

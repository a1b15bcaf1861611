/** JSON-safe views of SQL values and events (bigints and BLOBs do not survive JSON.stringify). */
import type { z } from "zod";
import { jsonCell as sqlJsonCell, type ExecResult, type SqlValue } from "../sql/index.js";
import type { cellSchema, resultSchema } from "./schemas.js";

/** A cell as the API sends it (src/sql's one encoding, which `cellSchema` describes). */
export type JsonCell = z.output<typeof cellSchema>;

/** Converts one SQLite value to its JSON form: src/sql's `jsonCell`, checked here against the API's schema. */
export const jsonCell: (value: SqlValue | undefined) => JsonCell = sqlJsonCell;

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

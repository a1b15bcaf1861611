/**
 * How Postgres values become the cells reex compares: the same kinds SQLite returns, so that
 * voting and EX treat both engines alike (src/sql/compare.ts). Integers stay numbers (bigint past
 * ±2^53), numeric becomes a number (it is SQLite's REAL or INTEGER), booleans become 1 and 0,
 * dates and times keep PostgreSQL's text form (SQLite stores them as text), arrays and JSON become
 * JSON text of their normalised elements, bytea stays bytes, NULL stays null, anything else is text.
 */
import pg from "pg";
import { capMessage } from "../errors/index.js";
import type { SqlErrorInfo, SqlValue } from "../sql/index.js";

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function integer(text: string): number | bigint {
  const n = Number(text);
  if (Number.isSafeInteger(n)) return n;
  const b = BigInt(text);
  return b >= MIN_SAFE && b <= MAX_SAFE ? Number(b) : b;
}

function numeric(text: string): number | bigint | string {
  if (text === "NaN" || text === "Infinity" || text === "-Infinity") return Number(text);
  if (/^-?\d+$/.test(text)) return integer(text);
  if (/^-?\d+\.0*$/.test(text)) return integer(text.slice(0, text.indexOf(".")));
  return Number(text);
}

const float = (text: string): number => Number(text);
const bool = (text: string): number => (text === "t" ? 1 : 0);
const bytea = (text: string): Uint8Array => (pg.types.getTypeParser(17, "text") as (t: string) => Buffer)(text);

/** Element parsers of the array types reex normalises (others keep text elements). */
const SCALARS: Record<number, (text: string) => SqlValue | number> = {
  16: bool,
  20: integer,
  21: integer,
  23: integer,
  26: integer,
  700: float,
  701: float,
  1700: numeric,
};

/** Array OID → element OID, for the common array types. */
const ARRAYS: Record<number, number> = {
  1000: 16,
  1005: 21,
  1007: 23,
  1016: 20,
  1021: 700,
  1022: 701,
  1231: 1700,
  1009: 25,
  1015: 1043,
  1014: 1042,
  1182: 1082,
  1115: 1114,
  1185: 1184,
  2951: 2950,
};

const arrayParser = pg.types.getTypeParser(1009 as Parameters<typeof pg.types.getTypeParser>[0], "text") as (text: string) => unknown;

function jsonOfArray(text: string, elementOid: number): string {
  const scalar = SCALARS[elementOid];
  const fix = (v: unknown): unknown => (Array.isArray(v) ? v.map(fix) : v === null ? null : scalar ? normalizeJson(scalar(v as string)) : v);
  return JSON.stringify(fix(arrayParser(text)));
}

function normalizeJson(v: SqlValue | number): unknown {
  return typeof v === "bigint" ? v.toString() : v;
}

/** The parser of one type OID: text in, a {@link SqlValue} out. */
export function parserFor(oid: number): (text: string) => SqlValue {
  const scalar = SCALARS[oid];
  if (scalar) return scalar as (text: string) => SqlValue;
  if (oid === 17) return bytea;
  if (oid === 114 || oid === 3802) return (text) => JSON.stringify(JSON.parse(text));
  const element = ARRAYS[oid];
  if (element !== undefined) return (text) => jsonOfArray(text, element);
  return (text) => text;
}

/** The type parsers every reex Postgres connection uses (see the module comment). */
export const reexTypes = {
  getTypeParser: ((oid: number) => parserFor(oid)) as typeof pg.types.getTypeParser,
};

interface PgError {
  code?: string;
  message: string;
}

/**
 * Maps a PostgreSQL error (SQLSTATE in `code`) to the reex code and ReEx category the model and the
 * vote read; the message is capped (PostgreSQL echoes bad input in its errors).
 */
export function classifyPostgresError(err: unknown): SqlErrorInfo {
  const e = err as PgError;
  const message = capMessage(e?.message ?? String(err));
  const code = typeof e?.code === "string" ? e.code : "";
  if (code === "42703") return { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message };
  if (code === "42702") return { code: "SQL_NO_SUCH_COLUMN", category: "missing_column", message };
  if (code === "42P01") return { code: "SQL_NO_SUCH_TABLE", category: "missing_table", message };
  if (code === "42883" || code === "42725") return { code: "SQL_FUNCTION", category: "function", message };
  if (code === "57014") return { code: "SQL_TIMEOUT", category: "timeout", message: "the query ran past its time limit and was stopped" };
  if (code === "25006" || code === "42501" || code === "25P02")
    return { code: "SQL_REFUSED", category: "refused", message: `refused by PostgreSQL: ${message}` };
  if (code.startsWith("42")) return { code: "SQL_SYNTAX", category: "syntax", message };
  return { code: "SQL_RUNTIME", category: "runtime", message };
}

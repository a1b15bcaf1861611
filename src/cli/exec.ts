/**
 * `reex exec`: runs one guarded read-only query through the executor pool (so the time limit
 * holds) and prints an aligned table, or the ExecResult as JSON.
 */
import { parseArgs } from "node:util";
import { loadConfig } from "../config/index.js";
import { ExecutorPool } from "../sql/index.js";
import type { ExecResult, SqlValue } from "../sql/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "run one read-only SQL query against a SQLite file and print the result";

const USAGE = `usage: reex exec --db PATH "SQL" [--json] [--timeout-ms N] [--max-rows N]

Runs one read-only query (SELECT, WITH … SELECT, VALUES) with the same guard, time limit and
row cap the server uses. Exit code 0 on success, 1 when the query fails, 2 on bad usage.

options:
  --db PATH|URL     SQLite database file (opened read-only), or postgres://user@host/db
                    (password as \${ENV_VAR} or PGPASSWORD; every query in a READ ONLY transaction)
  --json            print the result as JSON (bigints as strings, BLOBs as {"blob_hex": "…"})
  --timeout-ms N    time limit in ms (default: sql.timeoutMs, 5000)
  --max-rows N      rows printed at most (default: sql.maxRows, 1000)
  -h, --help        show this help`;

const MAX_CELL = 80;

function cellText(value: SqlValue): string {
  if (value === null) return "NULL";
  if (value instanceof Uint8Array) {
    const hex = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex");
    return hex.length > 32 ? `x'${hex.slice(0, 32)}…' (${value.byteLength} bytes)` : `x'${hex}'`;
  }
  const text = String(value).replace(/\r?\n/g, "\\n").replace(/\t/g, "\\t");
  return text.length > MAX_CELL ? `${text.slice(0, MAX_CELL - 1)}…` : text;
}

/** Renders a successful result as an aligned text table with a row-count footer. */
export function formatTable(result: Extract<ExecResult, { ok: true }>): string {
  const header = result.columns;
  const body = result.rows.map((row) => row.map(cellText));
  const numeric = header.map(
    (_, j) => result.rows.length > 0 && result.rows.every((r) => r[j] === null || typeof r[j] === "number" || typeof r[j] === "bigint"),
  );
  const widths = header.map((h, j) => Math.max(h.length, ...body.map((r) => r[j]!.length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, j) => (numeric[j] ? c.padStart(widths[j]!) : c.padEnd(widths[j]!)))
      .join(" | ")
      .trimEnd();
  const n = result.rowCount;
  const footer = `${n} ${n === 1 ? "row" : "rows"}${result.truncated ? ` (truncated: more rows exist)` : ""} in ${result.elapsedMs} ms`;
  return [line(header), widths.map((w) => "-".repeat(w)).join("-+-"), ...body.map(line), footer].join("\n");
}

/** JSON text of any value holding SQL results: bigints as strings, BLOBs as `{"blob_hex": …}`. */
export function toJson(result: unknown): string {
  return JSON.stringify(
    result,
    (_key, value: unknown) => {
      if (typeof value === "bigint") return value.toString();
      if (value instanceof Uint8Array) return { blob_hex: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex") };
      if (value && typeof value === "object" && (value as { type?: unknown }).type === "Buffer" && Array.isArray((value as { data?: unknown }).data)) {
        return { blob_hex: Buffer.from((value as { data: number[] }).data).toString("hex") };
      }
      return value;
    },
    2,
  );
}

function positiveInt(flag: string, raw: string | undefined, zeroOk = false): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < (zeroOk ? 0 : 1)) throw new TypeError(`${flag} must be a ${zeroOk ? "non-negative" : "positive"} integer, got "${raw}"`);
  return n;
}

/** Runs `reex exec`; returns the process exit code. */
export async function run(argv: string[]): Promise<number> {
  let db: string | undefined;
  let sql: string | undefined;
  let json = false;
  let timeoutMs: number | undefined;
  let maxRows: number | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        db: { type: "string" },
        json: { type: "boolean", default: false },
        "timeout-ms": { type: "string" },
        "max-rows": { type: "string" },
        help: { type: "boolean", short: "h", default: false },
      },
    });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    db = values.db;
    json = values.json ?? false;
    timeoutMs = positiveInt("--timeout-ms", values["timeout-ms"]);
    maxRows = positiveInt("--max-rows", values["max-rows"], true);
    if (!db) throw new TypeError("--db PATH is required");
    if (positionals.length !== 1) throw new TypeError(positionals.length === 0 ? "the SQL query is missing" : "give the SQL as one quoted argument");
    sql = positionals[0]!;
  } catch (err) {
    console.error(`reex exec: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }

  const config = loadConfig({ env: process.env });
  const limits = { ...(timeoutMs ? { timeoutMs } : {}), ...(maxRows !== undefined ? { maxRows } : {}) };
  let result: ExecResult;
  const { isPostgresSetting, parseSourceSetting, PostgresSource } = await import("../pg/index.js");
  if (isPostgresSetting(db)) {
    let source;
    try {
      const { name, url } = parseSourceSetting(db);
      source = new PostgresSource({
        url,
        name,
        poolSize: 1,
        timeoutMs: config.sql.timeoutMs,
        maxRows: config.sql.maxRows,
        allowFunctions: config.sql.postgresFunctions,
      });
    } catch (err) {
      console.error(`reex exec: ${(err as Error).message}`);
      return 2;
    }
    try {
      result = await source.execute(sql, limits);
    } finally {
      await source.close();
    }
  } else {
    const pool = new ExecutorPool({ workers: 1, timeoutMs: config.sql.timeoutMs, maxRows: config.sql.maxRows, maxQueryMemoryMB: config.sql.maxQueryMemoryMB });
    try {
      result = await pool.execute(db, sql, limits);
    } finally {
      await pool.close();
    }
  }
  if (json) {
    console.log(toJson(result));
    return result.ok ? 0 : 1;
  }
  if (!result.ok) {
    console.error(`${result.error.code} (${result.error.category}): ${result.error.message}`);
    return 1;
  }
  console.log(formatTable(result));
  return 0;
}

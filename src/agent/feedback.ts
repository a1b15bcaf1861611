/**
 * What the model is shown of a probe's execution: the text placed inside `<result>…</result>`.
 * One function per feedback mode of the ReEx robustness study; cell values and error messages are
 * compacted, truncated and defused so that database content can never forge a tag.
 */
import type { DatabaseSchema, ExecResult, SqlValue } from "../sql/index.js";
import { identifiersIn } from "./grammar.js";
import { KNOWN_TAGS } from "./profiles/registry.js";
import type { FeedbackMode } from "./types.js";

/** Shown for every probe in "locked" mode. */
export const LOCKED_FEEDBACK = "Execution result hidden.";

/** Shown for every probe in "timeout" mode, and for probes that really timed out. */
export const TIMEOUT_FEEDBACK = "Timeout: the query did not finish within the time limit.";

/** Shown instead of executing a probe that repeats an earlier one. */
export const REPEATED_PROBE_FEEDBACK = "You already ran this query; its result was above.";

/** Shown for the repeated probe that reaches the rollout's `repeatLimit`; the server then opens `<final_sql>` for the model. */
export const REPEAT_LIMIT_FEEDBACK = "You already ran this query; no more queries can be run. Write the final SQL now.";

/** Shown for a probe written after the interaction limit; the server then opens `<final_sql>` for the model. */
export const LIMIT_FEEDBACK = "Interaction limit reached; no more queries can be run. Write the final SQL now.";

/** How feedback is rendered. */
export interface FeedbackOptions {
  /** Default "full". */
  mode?: FeedbackMode;
  /** Rows shown in "full" mode. Default 3. */
  rows?: number;
  /** Longest cell (and column name) shown before truncation with "…". Default 60. */
  maxCellChars?: number;
  /**
   * The probed database's schema, or a function that reads it (called only for a name error): a
   * missing-column error then lists the columns of the tables the query names, and a missing-table
   * error lists the tables ({@link schemaHint}). Default none.
   */
  schema?: SchemaTables | (() => SchemaTables | undefined);
  /** "lines" (`a | b` rows, the ReEx form) or "dataframe" (aligned columns under a row index, as SkyRL-SQL's executor prints). Default "lines". */
  style?: "lines" | "dataframe";
  /** Rows a "dataframe" shows, in place of `rows` (the protocol's own truncation: SkyRL-SQL shows 50). Default `rows`. */
  rowCap?: number;
}

/** What a schema hint needs of a schema. */
export type SchemaTables = Pick<DatabaseSchema, "tables">;

/** Tables listed at most by a schema hint. */
const HINT_TABLES = 4;
/** Columns listed at most per table by a schema hint. */
const HINT_COLUMNS = 30;

function nameList(names: string[], max: number, maxChars: number): string {
  const shown = names.slice(0, max).map((n) => cell(n, maxChars));
  return shown.join(", ") + (names.length > max ? `, … (${names.length} in all)` : "");
}

/**
 * The line added to a missing-column or missing-table error so the model can correct the name from
 * the executor's answer: `specimens columns: id, name, animal_class` for each table the query names
 * (all tables' names when it names none of them), or `Tables: a, b` for a missing table. Undefined
 * for other outcomes; `schema` is read only for a name error.
 */
export function schemaHint(result: ExecResult, sql: string, schema: SchemaTables | (() => SchemaTables | undefined), maxCellChars = 60): string | undefined {
  if (result.ok) return undefined;
  const category = result.error.category;
  if (category !== "missing_column" && category !== "missing_table") return undefined;
  const tables = (typeof schema === "function" ? schema() : schema)?.tables ?? [];
  if (tables.length === 0) return undefined;
  const allTables = `Tables: ${nameList(
    tables.map((t) => t.name),
    HINT_TABLES * HINT_COLUMNS,
    maxCellChars,
  )}`;
  if (category === "missing_table") return allTables;
  const named = new Set(identifiersIn(sql));
  const hit = tables.filter((t) => named.has(t.name.toLowerCase())).slice(0, HINT_TABLES);
  if (hit.length === 0) return allTables;
  return hit
    .map(
      (t) =>
        `${cell(t.name, maxCellChars)} columns: ${nameList(
          t.columns.map((c) => c.name),
          HINT_COLUMNS,
          maxCellChars,
        )}`,
    )
    .join("\n");
}

/** Any profile's tag, opening or closing; built on first use, since the profiles load after this module. */
let tagLike: RegExp | undefined;

/** Neutralises tag-like text from the database or an error message so it cannot open or close a block. */
export function defuse(text: string): string {
  tagLike ??= new RegExp(`<(\\/?)(${KNOWN_TAGS.join("|")})>`, "gi");
  return text.replace(tagLike, "‹$1$2›");
}

function cell(value: SqlValue, max: number): string {
  let s: string;
  if (value === null) s = "NULL";
  else if (value instanceof Uint8Array) s = `<blob ${value.byteLength} bytes>`;
  else if (typeof value === "number") s = Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(12)));
  else s = String(value);
  s = s.replace(/\s+/g, " ").replace(/\|/g, "¦");
  if (s.length > max) s = s.slice(0, Math.max(0, max - 1)) + "…";
  return defuse(s);
}

function failure(result: Extract<ExecResult, { ok: false }>, hint: string | undefined): string {
  if (result.error.category === "timeout") return TIMEOUT_FEEDBACK;
  const line = `Error (${result.error.category}): ${defuse(result.error.message.replace(/\s+/g, " ").trim())}`;
  return hint ? `${line}\n${hint}` : line;
}

function rowsTotal(result: Extract<ExecResult, { ok: true }>): string {
  const n = Math.max(result.rowCount, result.rows.length);
  return result.truncated ? `more than ${n} rows` : `${n} row${n === 1 ? "" : "s"}`;
}

/**
 * The text inside `<result>…</result>` for one execution. Modes: full (headers + first `rows` rows,
 * " | "-separated, a total when rows are left out), schema-only (column names), row-count,
 * error-only ("OK" or the error), locked (a fixed note), timeout (always a timeout note). With
 * `options.schema` and the probe's `sql`, a missing column or table error carries a {@link schemaHint}.
 */
export function formatFeedback(result: ExecResult, options: FeedbackOptions = {}, sql = ""): string {
  const mode = options.mode ?? "full";
  const k = Math.max(0, options.rows ?? 3);
  const max = Math.max(4, options.maxCellChars ?? 60);
  if (mode === "locked") return LOCKED_FEEDBACK;
  if (mode === "timeout") return TIMEOUT_FEEDBACK;
  if (!result.ok) return failure(result, options.schema ? schemaHint(result, sql, options.schema, max) : undefined);
  const header = result.columns.map((c) => cell(c, max)).join(" | ");
  const n = Math.max(result.rowCount, result.rows.length);
  switch (mode) {
    case "error-only":
      return "OK";
    case "row-count":
      return n === 0 ? "0 rows (empty result)" : rowsTotal(result);
    case "schema-only":
      return `Columns: ${header}`;
    case "full": {
      if (options.style === "dataframe") return dataframe(result, options.rowCap ?? k, max);
      if (n === 0) return `${header}\n(empty result)`;
      const shown = result.rows.slice(0, k).map((row) => row.map((v) => cell(v, max)).join(" | "));
      const lines = [header, ...shown];
      if (n > shown.length || result.truncated) lines.push(`… ${rowsTotal(result)} in total`);
      return lines.join("\n");
    }
  }
}

/** Wraps feedback as the injected block: `<result>\n…\n</result>\n`. */
export function resultBlock(feedback: string): string {
  return wrapFeedback(feedback);
}

/** Wraps feedback in a protocol's feedback markers (`<observation>`…), each on its own line. Default `<result>`. */
export function wrapFeedback(feedback: string, wrapper: { open: string; close: string } = { open: "<result>", close: "</result>" }): string {
  return `${wrapper.open}\n${feedback}\n${wrapper.close}\n`;
}

/**
 * A result as a dataframe prints: a row index, columns right-aligned under their names, at most
 * `rows` rows, then the total when rows were left out; an empty result prints as an empty frame.
 */
function dataframe(result: Extract<ExecResult, { ok: true }>, rows: number, max: number): string {
  const n = Math.max(result.rowCount, result.rows.length);
  const header = result.columns.map((c) => cell(c, max));
  if (n === 0) return `Empty DataFrame\nColumns: [${header.join(", ")}]\nIndex: []`;
  const shown = result.rows.slice(0, rows).map((row) => row.map((v) => cell(v, max)));
  const index = shown.map((_, i) => String(i));
  const indexWidth = Math.max(0, ...index.map((s) => s.length));
  const widths = header.map((h, c) => Math.max(h.length, ...shown.map((r) => (r[c] ?? "").length)));
  const line = (first: string, cells: string[]): string => [first.padEnd(indexWidth), ...cells.map((v, c) => v.padStart(widths[c]!))].join("  ");
  const lines = [line("", header), ...shown.map((r, i) => line(index[i]!, r))];
  if (n > shown.length || result.truncated) lines.push(`[${rowsTotal(result)} in total]`);
  return lines.join("\n");
}

/**
 * The first two layers of the Postgres guard, before anything reaches the server: PostgreSQL's own
 * parser (libpg_query compiled to WebAssembly) must find exactly one plain read statement, and no
 * call in it may name a function that reaches outside the database. The third layer, the READ ONLY
 * transaction with its limits, is in ./session.ts; the fourth is the operator's SELECT-only role.
 */
import { parse } from "libpg-query";
import type { SqlErrorInfo } from "../sql/index.js";

/** The single statement that may run, cut out of the text (no trailing `;` or comments after it). */
export type PgGuardResult = { ok: true; statement: string } | { ok: false; error: SqlErrorInfo };

const refusal = (message: string): SqlErrorInfo => ({ code: "SQL_REFUSED", category: "refused", message });

const ONLY_READS = "only one read-only query (SELECT, WITH … SELECT, VALUES, TABLE) may run";
const MULTIPLE = "only one statement may run: remove everything after the first `;`";

/** Statement kinds with a message the model can act on; every other kind gets {@link ONLY_READS}. */
const KIND_MESSAGES: Record<string, string> = {
  InsertStmt: "writes are not allowed: " + ONLY_READS,
  UpdateStmt: "writes are not allowed: " + ONLY_READS,
  DeleteStmt: "writes are not allowed: " + ONLY_READS,
  MergeStmt: "writes are not allowed: " + ONLY_READS,
  CopyStmt: "COPY is not allowed: " + ONLY_READS,
  DoStmt: "DO blocks are not allowed: " + ONLY_READS,
  CallStmt: "CALL is not allowed: " + ONLY_READS,
  TransactionStmt: "transaction control is not allowed: send one read-only query on its own",
  VariableSetStmt: "SET is not allowed: " + ONLY_READS,
  ExplainStmt: "EXPLAIN is not allowed: " + ONLY_READS,
};

/**
 * Functions refused by name (schema qualification ignored, case folded as PostgreSQL folds
 * unquoted names): files, large objects, other servers, sleeping, signalling backends, settings,
 * locks, notifications, replication, WAL and backups, sequences, and the *_to_xml family that runs
 * SQL given as a string.
 */
const DENIED_PREFIXES = [
  "pg_read_",
  "pg_ls_",
  "pg_stat_file",
  "pg_file_",
  "lo_",
  "dblink",
  "pg_sleep",
  "pg_terminate_backend",
  "pg_cancel_backend",
  "pg_signal_",
  "pg_reload_conf",
  "pg_rotate_logfile",
  "pg_log_",
  "set_config",
  "pg_advisory",
  "pg_try_advisory",
  "pg_notify",
  "pg_logical_",
  "pg_replication_",
  "pg_create_",
  "pg_drop_",
  "pg_copy_",
  "pg_switch_wal",
  "pg_promote",
  "pg_backup_",
  "pg_start_backup",
  "pg_stop_backup",
  "pg_export_snapshot",
  "pg_import_",
  "pg_wal_",
  "pg_current_logfile",
  "pg_stat_reset",
  "pg_truncate_",
  "query_to_xml",
  "cursor_to_xml",
  "database_to_xml",
  "schema_to_xml",
  "table_to_xml",
  "nextval",
  "setval",
  "txid_current",
  "pg_current_xact_id",
  "pg_walfile_name",
  "postgres_fdw",
];

/** The function name (last part, lower-cased) when it is one the guard refuses, else null. */
export function deniedFunction(name: string): string | null {
  const n = name.toLowerCase();
  return DENIED_PREFIXES.some((p) => n.startsWith(p)) ? n : null;
}

interface Found {
  functions: string[];
  writes: string[];
  into: boolean;
  locking: boolean;
}

/** Walks a libpg_query JSON tree, noting function calls, nested write statements, SELECT INTO and FOR UPDATE/SHARE. */
function walk(node: unknown, found: Found): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item, found);
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    if (key === "FuncCall") {
      const parts = ((value as { funcname?: { String?: { sval?: string } }[] }).funcname ?? []).map((p) => p.String?.sval ?? "");
      found.functions.push(parts[parts.length - 1] ?? "");
    } else if (key === "InsertStmt" || key === "UpdateStmt" || key === "DeleteStmt" || key === "MergeStmt") {
      found.writes.push(key);
    } else if (key === "intoClause") {
      found.into = true;
    } else if (key === "lockingClause") {
      found.locking = true;
    }
    walk(value, found);
  }
}

/**
 * The functions of `sql` the guard refuses by name, in order of appearance (empty when none or when
 * the text does not parse). The by-name layer on its own, for tests and tools.
 */
export async function deniedFunctionsIn(sql: string): Promise<string[]> {
  let tree: unknown;
  try {
    tree = await parse(sql);
  } catch {
    return [];
  }
  const found: Found = { functions: [], writes: [], into: false, locking: false };
  walk(tree, found);
  return found.functions.flatMap((f) => deniedFunction(f) ?? []);
}

/**
 * Checks `sql` with PostgreSQL's parser: exactly one statement, a plain SELECT (VALUES, TABLE and
 * WITH … SELECT are SELECTs to the parser) with no data-modifying WITH, no SELECT INTO, no FOR
 * UPDATE/SHARE, no bind parameters and no refused function. A parse error is SQL_SYNTAX with
 * PostgreSQL's message; every refusal is SQL_REFUSED.
 */
export async function checkPostgresSql(sql: string): Promise<PgGuardResult> {
  let tree: { stmts?: { stmt?: Record<string, unknown>; stmt_location?: number; stmt_len?: number }[] };
  try {
    tree = (await parse(sql)) as typeof tree;
  } catch (err) {
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: (err as Error).message } };
  }
  const stmts = tree.stmts ?? [];
  if (stmts.length === 0) return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "the SQL string contains no statement" } };
  if (stmts.length > 1) return { ok: false, error: refusal(MULTIPLE) };
  const { stmt = {}, stmt_location: start = 0, stmt_len: len } = stmts[0]!;
  const kind = Object.keys(stmt)[0] ?? "";
  if (kind !== "SelectStmt")
    return {
      ok: false,
      error: refusal(
        KIND_MESSAGES[kind] ??
          (kind.endsWith("Stmt") && /^(Create|Alter|Drop|Grant|Truncate|Rename|Comment|Reindex|Cluster|Vacuum)/.test(kind)
            ? "schema changes are not allowed: " + ONLY_READS
            : ONLY_READS),
      ),
    };
  const found: Found = { functions: [], writes: [], into: false, locking: false };
  walk(stmt, found);
  if (found.writes.length > 0) return { ok: false, error: refusal("writes are not allowed, not even inside WITH: " + ONLY_READS) };
  if (found.into) return { ok: false, error: refusal("SELECT INTO creates a table and is not allowed: " + ONLY_READS) };
  if (found.locking) return { ok: false, error: refusal("FOR UPDATE / FOR SHARE lock rows and are not allowed: " + ONLY_READS) };
  const denied = found.functions.flatMap((f) => deniedFunction(f) ?? []);
  if (denied.length > 0) {
    return { ok: false, error: refusal(`${denied[0]}() reaches outside the database and is not allowed: query only the tables`) };
  }
  if (JSON.stringify(stmt).includes('"ParamRef"')) {
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "the query has bind parameters ($1, …); write literal values instead" } };
  }
  const bytes = Buffer.from(sql, "utf8");
  const statement = bytes.subarray(start, len === undefined ? bytes.length : start + len).toString("utf8");
  return { ok: true, statement };
}

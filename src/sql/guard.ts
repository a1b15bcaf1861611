/**
 * The read-only guard: only one read-only, row-returning statement (SELECT, WITH … SELECT, VALUES,
 * EXPLAIN of those) may run. Three layers, each enough on its own for the common cases:
 * a lexical check (several statements, statement kind) that gives the model a precise message,
 * SQLite's own verdict on the prepared statement (`readonly` and `reader`), and a connection opened
 * read-only with DEFENSIVE on and unsafe mode off.
 *
 * Table-valued pragma functions (`SELECT * FROM pragma_table_info('t')`) are allowed: SQLite only
 * offers them for pragmas that return rows and have no side effects, and they pass the same
 * `readonly && reader` check, except those that show server files (`pragma_database_list` and kin).
 * PRAGMA statements are refused, even read-only ones.
 */
import Database from "better-sqlite3";
import { classifyThrown, type SqlErrorInfo } from "./classify.js";
import { enableDoubleQuotedStrings, limitValueLength } from "./dqs.js";
import { lexSql } from "./lexer.js";

/** What the lexical scan found: the first words of the first statement and whether more follow. */
export interface SqlScan {
  /** Up to the first four tokens of the first statement, upper-cased ("" for a non-word token). */
  leading: string[];
  /** True when another statement follows the first `;` (comments, blanks and `;` do not count). */
  multiple: boolean;
}

/**
 * Reads just enough of the text (through the SQL lexer: strings, quoted names and comments
 * included) to find the statement kind and statement boundaries without being fooled by `;` inside
 * literals. White space is SQLite's (ASCII only), so a word means what it means to SQLite.
 */
export function scanSql(sql: string): SqlScan {
  const leading: string[] = [];
  let ended = false;
  let tokensInStatement = 0;
  for (const t of lexSql(sql, { asciiSpace: true })) {
    if (t.kind === "punct" && t.text === ";") {
      if (tokensInStatement > 0) ended = true;
      continue;
    }
    if (ended) return { leading, multiple: true };
    tokensInStatement++;
    if (leading.length < 4) leading.push(t.kind === "word" ? t.upper : "");
  }
  return { leading, multiple: false };
}

const ALLOWED_KINDS = new Set(["SELECT", "WITH", "VALUES"]);

const WRITE = "writes are not allowed: only read-only queries (SELECT, WITH … SELECT, VALUES) may run";
const DDL = "schema changes are not allowed: only read-only queries (SELECT, WITH … SELECT, VALUES) may run";
const TXN = "transaction control is not allowed: send one read-only query on its own";
const MAINT = "maintenance statements (VACUUM, REINDEX, ANALYZE) are not allowed";

const REFUSED_KINDS: Record<string, string> = {
  INSERT: WRITE,
  UPDATE: WRITE,
  DELETE: WRITE,
  REPLACE: WRITE,
  UPSERT: WRITE,
  CREATE: DDL,
  DROP: DDL,
  ALTER: DDL,
  PRAGMA: "PRAGMA statements are not allowed; read the schema with SELECT * FROM sqlite_schema or SELECT * FROM pragma_table_info('table_name')",
  ATTACH: "ATTACH and DETACH are not allowed: query only the registered database",
  DETACH: "ATTACH and DETACH are not allowed: query only the registered database",
  BEGIN: TXN,
  COMMIT: TXN,
  END: TXN,
  ROLLBACK: TXN,
  SAVEPOINT: TXN,
  RELEASE: TXN,
  VACUUM: MAINT,
  REINDEX: MAINT,
  ANALYZE: MAINT,
};

/**
 * Table-valued pragmas that show files on the server (database_list shows each attached file's
 * absolute path). Matched anywhere in the text, quoted or not, so no spelling reaches SQLite.
 */
const FILE_PRAGMAS = ["pragma_database_list", "pragma_temp_store_directory", "pragma_data_store_directory"];
const FILE_PRAGMA = "this pragma shows server files and is not allowed; read the schema with SELECT * FROM sqlite_schema or pragma_table_info('table_name')";

const MULTIPLE = "only one statement may run: remove everything after the first `;`";
const NOT_A_QUERY = "only a single read-only query that returns rows (SELECT, WITH … SELECT, VALUES) may run";

/** Builds a refusal (SQL_REFUSED / refused) with a message the model can act on. */
export function refusal(message: string): SqlErrorInfo {
  return { code: "SQL_REFUSED", category: "refused", message };
}

/** The statement kind after an optional `EXPLAIN [QUERY PLAN]` prefix ("" when it is not a word). */
function statementKind(leading: string[]): string {
  let k = 0;
  if (leading[k] === "EXPLAIN") {
    k++;
    if (leading[k] === "QUERY" && leading[k + 1] === "PLAN") k += 2;
  }
  return leading[k] ?? "";
}

/**
 * The lexical verdict, before SQLite sees the text: a refusal for several statements or a
 * statement kind that is never allowed, otherwise null (SQLite's verdict still follows).
 */
export function lexicalRefusal(sql: string): SqlErrorInfo | null {
  return refusalFromScan(scanSql(sql), sql);
}

function refusalFromScan(scan: SqlScan, sql: string): SqlErrorInfo | null {
  if (scan.multiple) return refusal(MULTIPLE);
  const lower = sql.toLowerCase();
  if (FILE_PRAGMAS.some((name) => lower.includes(name))) return refusal(FILE_PRAGMA);
  const reason = REFUSED_KINDS[statementKind(scan.leading)];
  return reason ? refusal(reason) : null;
}

/** A guarded statement ready to run, or the typed reason it may not. */
export type GuardResult = { ok: true; stmt: Database.Statement } | { ok: false; error: SqlErrorInfo };

/**
 * Prepares `sql` on `db` and applies every guard layer: lexical refusal, SQLite errors classified
 * (syntax, missing table, …), then SQLite's own `readonly && reader` verdict.
 */
export function prepareGuarded(db: Database.Database, sql: string): GuardResult {
  const scan = scanSql(sql);
  const lexical = refusalFromScan(scan, sql);
  if (lexical) return { ok: false, error: lexical };
  let stmt: Database.Statement;
  try {
    stmt = db.prepare(sql);
  } catch (err) {
    return { ok: false, error: classifyThrown(err) };
  }
  if (!stmt.readonly) return { ok: false, error: refusal(WRITE) };
  if (!stmt.reader || !ALLOWED_KINDS.has(statementKind(scan.leading))) return { ok: false, error: refusal(NOT_A_QUERY) };
  return { ok: true, stmt };
}

/**
 * Opens a database file the only way reex ever opens one for queries: read-only, must exist,
 * DEFENSIVE on (better-sqlite3's default), unsafe mode off, and double-quoted string literals as in
 * stock SQLite (see ./dqs.ts); with `maxValueBytes`, no string or BLOB longer than that (SQLite's
 * length limit, lowered once and for good). Throws SqliteError (or ReexError INTERNAL) when it cannot.
 */
export function openReadonly(path: string, options: { maxValueBytes?: number } = {}): Database.Database {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.unsafeMode(false);
    enableDoubleQuotedStrings(db);
    if (options.maxValueBytes !== undefined) limitValueLength(db, options.maxValueBytes);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Maps SQLite (and better-sqlite3) error messages to reex codes and the ReEx error categories, so
 * the model and the voting code see one stable vocabulary whatever SQLite's wording.
 */
import { capMessage, type ErrorCode } from "../errors/index.js";
import type { SqlErrorCategory } from "./types.js";

/** A classified execution error: stable code, category, and the message the model reads. */
export interface SqlErrorInfo {
  code: ErrorCode;
  category: SqlErrorCategory;
  message: string;
}

interface Rule {
  test: RegExp;
  code: ErrorCode;
  category: SqlErrorCategory;
  /** Replaces SQLite's wording where it would confuse a model; SQLite's text is kept otherwise. */
  message?: string;
}

const RULES: Rule[] = [
  {
    test: /^(no such column|ambiguous column name)\b|^cannot join using column .* not present in both tables/i,
    code: "SQL_NO_SUCH_COLUMN",
    category: "missing_column",
  },
  { test: /^no such table\b/i, code: "SQL_NO_SUCH_TABLE", category: "missing_table" },
  {
    test: /^(no such function|wrong number of arguments to function|unknown function|no such window|misuse of window function|DISTINCT aggregates must have exactly one argument|.*may not be used as a window function|.*is not a window function)/i,
    code: "SQL_FUNCTION",
    category: "function",
  },
  {
    test: /syntax error|^incomplete input|^unrecognized token|^misuse of aggregate|^aggregate functions are not allowed|do not have the same number of result columns|^\d+\w* (ORDER|GROUP) BY term out of range|term does not match any column in the result set|^a GROUP BY clause is required before HAVING|^HAVING clause on a non-aggregate query|^row value misused|^sub-select returns \d+ columns|^too many terms in compound SELECT|^all VALUES must have the same number of terms|^a NATURAL join may not have an ON or USING clause|^circular reference|^recursive reference in a subquery|^multiple recursive references|^recursive aggregate queries not supported|^unknown or unsupported join type|^ON clause references tables to its right|^no tables specified|^too many FROM clause terms|^parser stack overflow|^The supplied SQL string contains no statements|^table .* has \d+ values for \d+ columns|^no such index/i,
    code: "SQL_SYNTAX",
    category: "syntax",
  },
  {
    test: /^Too few parameter values were provided|^Missing named parameter|^Too many parameter values/i,
    code: "SQL_SYNTAX",
    category: "syntax",
    message: "the query has bind parameters (?, :name, @name or $name); write literal values instead",
  },
  { test: /^(interrupted|query timed out)/i, code: "SQL_TIMEOUT", category: "timeout" },
  {
    test: /^(string or blob too big|out of memory)/i,
    code: "SQL_MEMORY_LIMIT",
    category: "runtime",
    message: "the query built a value larger than the length limit or ran out of memory; select fewer or smaller values, or aggregate",
  },
  {
    test: /^not authorized/i,
    code: "SQL_REFUSED",
    category: "refused",
    message: "not authorized: load_extension() and other restricted functions are not allowed",
  },
  {
    test: /^attempt to write a readonly database|^The supplied SQL string contains more than one statement/i,
    code: "SQL_REFUSED",
    category: "refused",
    message: "only a single read-only query may run: the statement was refused",
  },
];

/** SQLite result codes that describe the database file rather than the query. */
const FILE_CODES: Record<string, { code: ErrorCode; message?: string }> = {
  SQLITE_CANTOPEN: { code: "DB_FILE_NOT_FOUND", message: "the database file cannot be opened (missing or unreadable)" },
  SQLITE_NOTADB: { code: "DB_INVALID", message: "the file is not a SQLite database" },
  SQLITE_CORRUPT: { code: "DB_INVALID" },
};

/**
 * Classifies one SQLite / better-sqlite3 failure. `sqliteCode` is better-sqlite3's `err.code`
 * (e.g. "SQLITE_ERROR"); unknown messages become SQL_RUNTIME/runtime. The message is capped first
 * (SQLite echoes bad input: a JSON path error can be as long as the value), so neither the rules
 * nor the pipe to the parent nor any later step sees more than MAX_MESSAGE_BYTES.
 */
export function classifySqliteError(raw: string, sqliteCode?: string): SqlErrorInfo {
  const message = capMessage(raw);
  const file = sqliteCode ? FILE_CODES[sqliteCode] : undefined;
  if (file) return { code: file.code, category: "runtime", message: file.message ?? message };
  for (const rule of RULES) {
    if (rule.test.test(message)) return { code: rule.code, category: rule.category, message: rule.message ?? message };
  }
  return { code: "SQL_RUNTIME", category: "runtime", message };
}

/** Classifies any thrown value (SqliteError, RangeError, TypeError, …) via {@link classifySqliteError}. */
export function classifyThrown(err: unknown): SqlErrorInfo {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return classifySqliteError(err.message, typeof code === "string" ? code : undefined);
  }
  return classifySqliteError(String(err));
}

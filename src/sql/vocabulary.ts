/**
 * SQLite's vocabulary, in one place: its keywords, the functions reex's grammar offers, and the
 * word sets the readers of SQL text share (what ends a FROM list, what joins, what starts a query).
 * Every set holds upper-case words; compare a token's `upper`.
 */

/** SQLite's keywords (sqlite.org/lang_keywords.html): they must be quoted to be used as identifiers, and the identifier check ignores them. */
export const SQLITE_KEYWORDS: ReadonlySet<string> = new Set(
  (
    "ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN BETWEEN BY CASCADE CASE CAST " +
    "CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE " +
    "DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE EXISTS EXPLAIN " +
    "FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED " +
    "INITIALLY INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT " +
    "NOTHING NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING PRIMARY QUERY RAISE " +
    "RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT " +
    "SELECT SET TABLE TEMP TEMPORARY THEN TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW " +
    "VIRTUAL WHEN WHERE WINDOW WITH WITHOUT"
  ).split(" "),
);

/**
 * The keywords that are never a column or table name inside a query unless quoted, as the scope
 * walker reads it (a subset of {@link SQLITE_KEYWORDS}, with TRUE and FALSE): the words that may
 * stand where a name could.
 */
export const QUERY_KEYWORDS: ReadonlySet<string> = new Set(
  (
    "ALL AND AS ASC BETWEEN BY CASE CAST COLLATE CROSS CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP " +
    "DESC DISTINCT ELSE END ESCAPE EXCEPT EXISTS FALSE FILTER FIRST FOLLOWING FROM FULL GLOB GROUP " +
    "HAVING IN INDEXED INNER INTERSECT IS ISNULL JOIN LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL " +
    "NOT NOTNULL NULL NULLS OFFSET ON OR ORDER OUTER OVER PARTITION PRECEDING RANGE RECURSIVE REGEXP " +
    "RIGHT ROWS SELECT THEN TRUE UNBOUNDED UNION USING VALUES WHEN WHERE WINDOW WITH"
  ).split(" "),
);

/** Words that start a query (a subquery's first word after its parenthesis). */
export const QUERY_STARTS: ReadonlySet<string> = new Set(["SELECT", "WITH", "VALUES"]);

/** The compound operators between a compound SELECT's parts. */
export const COMPOUND_WORDS: ReadonlySet<string> = new Set(["UNION", "INTERSECT", "EXCEPT"]);

/** The clauses that end a SELECT's FROM list (a compound operator ends it too: {@link COMPOUND_WORDS}). */
export const FROM_ENDS: ReadonlySet<string> = new Set(["WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "WINDOW"]);

/** The words of a join operator (`LEFT OUTER JOIN`, `NATURAL JOIN`, …). */
export const JOIN_WORDS: ReadonlySet<string> = new Set(["JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL"]);

/** The aggregate functions of SQL-92 (WikiSQL's and the synthetic questions' five). */
export const AGGREGATES: ReadonlySet<string> = new Set(["COUNT", "MAX", "MIN", "SUM", "AVG"]);

/** The functions reex's grammar offers (aggregates, string, numeric and date functions of SQLite), in the grammar's order. */
export const SQL_FUNCTIONS: readonly string[] = [
  "COUNT",
  "SUM",
  "AVG",
  "MIN",
  "MAX",
  "TOTAL",
  "GROUP_CONCAT",
  "ABS",
  "ROUND",
  "LENGTH",
  "UPPER",
  "LOWER",
  "SUBSTR",
  "SUBSTRING",
  "TRIM",
  "LTRIM",
  "RTRIM",
  "REPLACE",
  "INSTR",
  "COALESCE",
  "IFNULL",
  "NULLIF",
  "IIF",
  "STRFTIME",
  "DATE",
  "TIME",
  "DATETIME",
  "JULIANDAY",
  "TYPEOF",
  "PRINTF",
  "FORMAT",
  "HEX",
  "UNICODE",
  "CHAR",
];

/** The functions of {@link SQL_FUNCTIONS} that take exactly one argument; the others take one or more. */
export const UNARY_FUNCTIONS: ReadonlySet<string> = new Set(["COUNT", "SUM", "AVG", "TOTAL", "ABS", "LENGTH", "UPPER", "LOWER", "TYPEOF", "HEX", "UNICODE"]);

/** The type names the grammar offers in CAST (SQLite's type affinities and their common spellings), in the grammar's order. */
export const SQL_TYPE_NAMES: readonly string[] = ["INTEGER", "INT", "REAL", "TEXT", "NUMERIC", "FLOAT", "DOUBLE", "DECIMAL", "BLOB", "DATE"];

/** Keywords, functions and type names: words the identifier check does not take for names. */
export const KEYWORD_LIKE: ReadonlySet<string> = new Set([
  ...SQLITE_KEYWORDS,
  ...SQL_FUNCTIONS,
  ...SQL_TYPE_NAMES,
  "TRUE",
  "FALSE",
  "NOCASE",
  "BINARY",
  "RTRIM",
  "VARCHAR",
  "CHARACTER",
  "BOOLEAN",
  "DATETIME",
  "ROWID",
]);

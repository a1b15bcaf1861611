/**
 * Constrained decoding: GBNF grammars (llama.cpp syntax) that keep a response inside the tag
 * structure and restrict the SQL's table and column identifiers to the schema's own names.
 *
 * The server injects `<result>` blocks between segments, so a grammar covers one generate segment:
 * "first" (the response's start: think, then a probe or the final SQL), "segment" (the same with
 * an optional think: valid at the start and after every injected result) and "final-body" (the SQL
 * after a server-opened `<final_sql>`, up to `</final_sql>`).
 *
 * The SQL is a simplified SQLite SELECT: DISTINCT, result columns (`*`, `T1.*`, expressions with
 * `AS name`), FROM with joins and subqueries, WHERE, GROUP BY, HAVING, compound selects, ORDER BY,
 * LIMIT/OFFSET; expressions over columns (bare, quoted, or qualified by a table name or an alias
 * T1..T9), literals, common functions, CAST, CASE, EXISTS, IN, BETWEEN, LIKE. Table aliases are
 * limited to T1..T9 (the prompt asks for them) because a context-free grammar cannot bind free
 * alias names; output aliases after AS are free but cannot be referenced later; no CTEs.
 */
import type { PromptFamily } from "../decoding/types.js";
import { TABLE_ALIASES, UNANSWERABLE_MARKER } from "./prompts.js";

/** The identifiers of a database: its tables and each table's columns. */
export interface SchemaNames {
  tables: { name: string; columns: string[] }[];
}

/** Which generate segment a grammar covers (see the module doc). */
export type GrammarStart = "first" | "segment" | "final-body";

/** The grammars a constrained rollout uses: the first segment, later segments, and the body of a forced final. */
export interface SegmentGrammars {
  first?: string;
  segment?: string;
  finalBody?: string;
}

/** Keywords that must be quoted to be used as identifiers (and that the identifier check ignores). */
const RESERVED = new Set(
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

/** Functions the grammar offers (aggregates, string, numeric and date functions of SQLite). */
const FUNCTIONS = [
  "COUNT", "SUM", "AVG", "MIN", "MAX", "TOTAL", "GROUP_CONCAT", "ABS", "ROUND", "LENGTH", "UPPER", "LOWER", "SUBSTR", "SUBSTRING",
  "TRIM", "LTRIM", "RTRIM", "REPLACE", "INSTR", "COALESCE", "IFNULL", "NULLIF", "IIF", "STRFTIME", "DATE", "TIME", "DATETIME",
  "JULIANDAY", "TYPEOF", "PRINTF", "FORMAT", "HEX", "UNICODE", "CHAR",
];

const TYPES = ["INTEGER", "INT", "REAL", "TEXT", "NUMERIC", "FLOAT", "DOUBLE", "DECIMAL", "BLOB", "DATE"];

/** A GBNF string literal for `s`. */
function lit(s: string): string {
  const body = [...s]
    .map((ch) => {
      if (ch === "\\") return "\\\\";
      if (ch === '"') return '\\"';
      if (ch === "\n") return "\\n";
      if (ch === "\r") return "\\r";
      if (ch === "\t") return "\\t";
      const code = ch.codePointAt(0)!;
      return code < 0x20 || code === 0x7f ? `\\x${code.toString(16).padStart(2, "0")}` : ch;
    })
    .join("");
  return `"${body}"`;
}

function ruleName(word: string): string {
  return `kw-${word.toLowerCase().replace(/_/g, "-")}`;
}

/** True when `name` may appear unquoted in SQLite. */
function isBare(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !RESERVED.has(name.toUpperCase());
}

/** The spellings of one identifier: bare (when allowed), "double-quoted", `backticked`, [bracketed]. */
function identifierAlternatives(name: string): string[] {
  const out: string[] = [];
  if (isBare(name)) out.push(lit(name));
  out.push(lit(`"${name.replace(/"/g, '""')}"`));
  if (!name.includes("`")) out.push(lit(`\`${name}\``));
  if (!name.includes("]")) out.push(lit(`[${name}]`));
  return out;
}

function unique(names: string[]): string[] {
  return [...new Set(names)];
}

/**
 * A GBNF grammar for one generate segment of a family: the tag structure plus a simplified SQLite
 * SELECT whose identifiers come from `schema`. Root rule "root". Default start "segment".
 */
export function buildGrammar(schema: SchemaNames, family: PromptFamily, options: { start?: GrammarStart } = {}): string {
  const start = options.start ?? "segment";
  const tables = unique(schema.tables.map((t) => t.name));
  const columns = unique(schema.tables.flatMap((t) => t.columns));
  const keywords = new Set<string>();
  const kw = (...words: string[]): string =>
    words
      .map((w) => {
        keywords.add(w);
        return ruleName(w);
      })
      .join(" ws ");

  let root: string;
  if (start === "final-body") root = `root ::= final-body ${lit("</final_sql>")}`;
  else if (family === "direct") root = "root ::= ows final";
  else if (family === "standard") root = "root ::= ows think ows final";
  else if (start === "first") root = "root ::= ows think ows (probe | final)";
  else root = "root ::= ows (think ows)? (probe | final)";

  const rules: string[] = [
    root,
    `think ::= ${lit("<think>")} think-text ${lit("</think>")}`,
    `think-text ::= ([^<] | "<" [^/<])*`,
    `probe ::= ${lit("<intermediate_sql>")} ows query ows (";" ows)? ${lit("</intermediate_sql>")}`,
    `final ::= ${lit("<final_sql>")} final-body ${lit("</final_sql>")}`,
    `final-body ::= ows (query ows (";" ows)? | unanswerable)`,
    `unanswerable ::= (${lit(UNANSWERABLE_MARKER)} | ${lit(UNANSWERABLE_MARKER.toLowerCase())}) ":" [^<]*`,
    `query ::= select-core (ws compound-op ws select-core)* (ws order-by)? (ws limit)?`,
    `compound-op ::= ${kw("UNION")} (ws ${kw("ALL")})? | ${kw("INTERSECT")} | ${kw("EXCEPT")}`,
    `select-core ::= ${kw("SELECT")} (ws ${kw("DISTINCT")})? ws result-cols (ws ${kw("FROM")} ws from-clause)? (ws ${kw("WHERE")} ws expr)? (ws ${kw("GROUP", "BY")} ws expr-list (ws ${kw("HAVING")} ws expr)?)?`,
    `result-cols ::= result-col (ows "," ows result-col)*`,
    `result-col ::= "*" | qual "." "*" | expr (ws ${kw("AS")} ws out-alias)?`,
    `out-alias ::= [A-Za-z_] [A-Za-z0-9_]{0,40} | "\\"" [^"\\n]{1,60} "\\""`,
    `from-clause ::= table-ref (join-sep table-ref (ws ${kw("ON")} ws expr)?)*`,
    `join-sep ::= ows "," ows | ws ((${kw("INNER")} | ${kw("LEFT")} (ws ${kw("OUTER")})? | ${kw("CROSS")}) ws)? ${kw("JOIN")} ws`,
    `table-ref ::= (table | "(" ows query ows ")") (ws (${kw("AS")} ws)? alias)?`,
    `qual ::= table | alias`,
    `alias ::= ${TABLE_ALIASES.map(lit).join(" | ")}`,
    `expr-list ::= expr (ows "," ows expr)*`,
    `expr ::= operand (op operand)*`,
    `op ::= ows ("=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=" | "+" | "-" | "*" | "/" | "%" | "||") ows | ws word-op ws`,
    `word-op ::= ${kw("AND")} | ${kw("OR")} | ${kw("IS")} (ws ${kw("NOT")})? | (${kw("NOT")} ws)? (${kw("LIKE")} | ${kw("GLOB")} | ${kw("IN")} | ${kw("BETWEEN")})`,
    `operand ::= (${kw("NOT")} ws | "-" ows)? primary (ws ${kw("COLLATE")} ws ${kw("NOCASE")})?`,
    `primary ::= literal | column-ref | func-call | cast | case-expr | ${kw("EXISTS")} ows "(" ows query ows ")" | "(" ows (query | expr-list) ows ")"`,
    `column-ref ::= (qual ".")? column`,
    `func-call ::= func ows "(" ows ((${kw("DISTINCT")} ws)? expr-list | "*")? ows ")"`,
    `func ::= ${FUNCTIONS.map((f) => kw(f)).join(" | ")}`,
    `cast ::= ${kw("CAST")} ows "(" ows expr ws ${kw("AS")} ws (${TYPES.map((t) => kw(t)).join(" | ")}) ows ")"`,
    `case-expr ::= ${kw("CASE")} (ws expr)? (ws ${kw("WHEN")} ws expr ws ${kw("THEN")} ws expr)+ (ws ${kw("ELSE")} ws expr)? ws ${kw("END")}`,
    `order-by ::= ${kw("ORDER", "BY")} ws order-item (ows "," ows order-item)*`,
    `order-item ::= expr (ws (${kw("ASC")} | ${kw("DESC")}))?`,
    `limit ::= ${kw("LIMIT")} ws integer ((ws ${kw("OFFSET")} ws | ows "," ows) integer)?`,
    `literal ::= number | string | ${kw("NULL")}`,
    `number ::= [0-9]+ ("." [0-9]+)? | "." [0-9]+`,
    `integer ::= [0-9]+`,
    `string ::= "'" ([^'] | "''")* "'"`,
    `table ::= ${tables.length ? tables.flatMap(identifierAlternatives).join(" | ") : lit("sqlite_master")}`,
    `column ::= ${columns.length ? columns.flatMap(identifierAlternatives).join(" | ") : lit("rowid")}`,
    `ws ::= [ \\t\\n]{1,8}`,
    `ows ::= [ \\t\\n]{0,8}`,
  ];
  for (const word of [...keywords].sort()) rules.push(`${ruleName(word)} ::= ${lit(word)} | ${lit(word.toLowerCase())}`);
  return rules.join("\n") + "\n";
}

/** The three segment grammars of a family for a constrained rollout (`RolloutOptions.grammar`). */
export function buildSegmentGrammars(schema: SchemaNames, family: PromptFamily): SegmentGrammars {
  return {
    first: buildGrammar(schema, family, { start: "first" }),
    segment: buildGrammar(schema, family, { start: "segment" }),
    finalBody: buildGrammar(schema, family, { start: "final-body" }),
  };
}

const KEYWORD_LIKE = new Set([
  ...RESERVED,
  ...FUNCTIONS,
  ...TYPES,
  "TRUE", "FALSE", "NOCASE", "BINARY", "RTRIM", "VARCHAR", "CHARACTER", "BOOLEAN", "DATETIME", "ROWID",
]);

type Tok = { kind: "word" | "quoted" | "punct" | "other"; text: string };

function tokenize(sql: string): Tok[] {
  const out: Tok[] = [];
  const re = /\s+|--[^\n]*|\/\*[\s\S]*?\*\/|'(?:[^']|'')*'?|"((?:[^"]|"")*)"?|`([^`]*)`?|\[([^\]]*)\]?|([A-Za-z_][A-Za-z0-9_$]*)|(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)|([.,()])|(.)/g;
  for (let m = re.exec(sql); m; m = re.exec(sql)) {
    if (m[1] !== undefined) out.push({ kind: "quoted", text: m[1].replace(/""/g, '"') });
    else if (m[2] !== undefined) out.push({ kind: "quoted", text: m[2] });
    else if (m[3] !== undefined) out.push({ kind: "quoted", text: m[3] });
    else if (m[4] !== undefined) out.push({ kind: "word", text: m[4] });
    else if (m[6] !== undefined) out.push({ kind: "punct", text: m[6] });
    else if (m[5] !== undefined || m[7] !== undefined || m[0].startsWith("'")) out.push({ kind: "other", text: m[0] });
  }
  return out;
}

/**
 * Identifiers in `sql` that are neither the schema's tables or columns nor aliases the query
 * defines (AS names, table aliases, CTE names); case-insensitive, in order of first appearance.
 */
export function checkIdentifiers(sql: string, schema: SchemaNames): string[] {
  const toks = tokenize(sql);
  const tables = new Set(schema.tables.map((t) => t.name.toLowerCase()));
  const columns = new Set(schema.tables.flatMap((t) => t.columns.map((c) => c.toLowerCase())));
  const isIdent = (t: Tok | undefined): t is Tok => !!t && (t.kind === "quoted" || (t.kind === "word" && !KEYWORD_LIKE.has(t.text.toUpperCase())));
  const isWord = (t: Tok | undefined, w: string): boolean => !!t && t.kind === "word" && t.text.toUpperCase() === w;

  const aliases = new Set<string>();
  toks.forEach((t, i) => {
    const next = toks[i + 1];
    if (isWord(t, "AS") && isIdent(next)) aliases.add(next.text.toLowerCase());
    if (isIdent(t) && isWord(next, "AS") && toks[i + 2]?.text === "(") aliases.add(t.text.toLowerCase());
    const prev = toks[i - 1];
    const afterTable = prev && ((isIdent(prev) && tables.has(prev.text.toLowerCase())) || prev.text === ")");
    if (afterTable && isIdent(t) && toks[i - 2]?.text !== "." && !tables.has(t.text.toLowerCase()) && next?.text !== "(") {
      aliases.add(t.text.toLowerCase());
    }
  });

  const unknown: string[] = [];
  const seen = new Set<string>();
  toks.forEach((t, i) => {
    if (!isIdent(t)) return;
    const key = t.text.toLowerCase();
    const next = toks[i + 1];
    if (t.kind === "word" && next?.text === "(") return;
    let ok: boolean;
    if (next?.text === ".") ok = tables.has(key) || aliases.has(key);
    else if (toks[i - 1]?.text === ".") ok = columns.has(key);
    else ok = columns.has(key) || tables.has(key) || aliases.has(key);
    if (!ok && !seen.has(key)) {
      seen.add(key);
      unknown.push(t.text);
    }
  });
  return unknown;
}

/**
 * Coverage repair: a final SQL that runs is checked against what the question names, and a part of
 * the question the query leaves out is put in when the question and the data say exactly what it
 * is. Small models drop the second condition of a question far more often than they get the first
 * one wrong (`tier = 'G'` for "gold-tier customers in Australia"), and write `LIMIT 1` under any
 * superlative. Three cases:
 * - condition: a value the question names exactly (the prompt's matched values at
 *   {@link COVERAGE_SCORE}: the stored text, or the code a phrase spells out, "Australia" for
 *   `'AU'`) in a column of a table the query reads once, where the query mentions no such column,
 *   writes no string that begins like the value (or that the value begins like), no column is
 *   named like the value and no column it reads has the value among the words of its name ('home'
 *   for `home_team`); it becomes one more `AND column = 'value'`. Only when exactly one such
 *   value is left, so two readings of the question never compete;
 * - year: a year the question names ("in 2022", "during 1998") that the query never writes, when
 *   its tables have exactly one column of dates and none named for years: `column LIKE '2022%'`
 *   in the column's own format, which must match rows;
 * - limit: the number of rows the question asks for ("the five most expensive", "top 3"; not
 *   "which of the two") where the query orders its rows and keeps another number: `LIMIT 1`
 *   becomes `LIMIT 5`.
 * Only a query with one SELECT (no subquery, no compound) is changed; a condition or year only
 * without GROUP BY or HAVING, without OR at the WHERE clause's top level and when the question
 * negates nothing ("not", "never", "except", "other than", "without", …: the value could be what it
 * excludes); a year only when the query compares with no range (<, >, BETWEEN); a count only
 * when it selects the rows, not what one is chosen from ("which of the two", "of the five oldest,
 * which …"). The caller runs the result before it takes it.
 */
import { lexSql, sqlScopes, type SqlScopes, type SqlToken, type SqlValue } from "../sql/index.js";
import { identifierSpellings, isName, isString, isWord, quoteString, type SchemaNames } from "./grammar.js";
import { bindings, datePattern, detectDateFormat, type NamedValue, type ReadRows } from "./literals.js";
import type { RewriteRule } from "./rewrite-types.js";

declare module "../events/index.js" {
  interface RepairFixes {
    /** Each part of the question put in by coverage repair (the rule, what the query had: empty for an added condition, what it has now); absent when none was. */
    coverage?: CoverageFix[];
  }
}

/** What coverage repair puts in (see the module doc). */
const COVERAGE_FIX_RULES = ["condition", "year", "limit"] as const;

/** One part of the question put into the final SQL: the rule, what the query had (empty for an added condition) and what it has now. */
export interface CoverageFix {
  rule: (typeof COVERAGE_FIX_RULES)[number];
  from: string;
  to: string;
}

/** A query with the parts of the question it left out put in, and each change. */
export interface CoverageRepair {
  sql: string;
  fixes: CoverageFix[];
}

/** What the coverage repair reads off the request: the values the question names and the question itself. */
export interface CoverageInput {
  /** The prompt's matched values. Default none. */
  named?: readonly NamedValue[];
  /** The user's question. Default none (no year or row count is read). */
  question?: string;
}

/** Matched values this sure (exact text, or a code a phrase spells out) name a condition the query may lack. */
export const COVERAGE_SCORE = 1;

/** Rows read from each table to find its date columns. */
const DATE_SAMPLE = 200;

/** Columns of the query's tables looked through for dates, at most. */
const MAX_DATE_COLUMNS = 64;

const COUNT_WORDS: Record<string, number> = { two: 2, three: 3, four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9, ten: 10 };
const COUNT = "(\\d{1,3}|two|three|four|five|six|seven|eight|nine|ten)";
const SUPERLATIVE =
  "(?:most|least|highest|lowest|largest|smallest|best|worst|latest|earliest|oldest|newest|youngest|biggest|longest|shortest|cheapest|busiest|top)";
const ROWS_ASKED = [new RegExp(`\\b(?:the|top|first|last)\\s+${COUNT}\\b`, "i"), new RegExp(`\\b${COUNT}\\s+${SUPERLATIVE}\\b`, "i")];
/** "which of the two …", "of the five oldest, which …": the number counts what is compared, not the rows wanted. */
const ROWS_COMPARED = [
  new RegExp(`\\b(?:which|one|any|each|either|neither|none|who|what|both|all)\\s+of\\s+the\\s+${COUNT}\\b`, "i"),
  new RegExp(`^\\W*(?:of|among)\\s+the\\s+${COUNT}\\b`, "i"),
  new RegExp(`\\b(?:of|among)\\s+the\\s+${COUNT}\\b[^,;?]*,\\s*(?:which|who|what|how|whose)\\b`, "i"),
];
/** Words that turn what follows them around ("not in Australia", "never hired in 2022"): a condition or year put in could only say the opposite. */
const NEGATED = /\b(?:not|never|except|excluding|without|outside|neither|nor|other\s+than|apart\s+from)\b|n't\b/i;
const YEAR_NAMED = /\b(?:in|during)\s+((?:1[89]|20)\d\d)\b/gi;

const nameText = (t: SqlToken): string => t.value.toLowerCase();
const beginsLike = (a: string, b: string): boolean => {
  const [x, y] = [a.trim().toLowerCase(), b.trim().toLowerCase()];
  return x.length > 0 && y.length > 0 && (x.startsWith(y) || y.startsWith(x));
};

/** The parts of a one-SELECT query the repair edits; undefined for any other query. */
interface Shape {
  sql: string;
  toks: SqlToken[];
  /** Its SELECT and FROM list, over `toks`. */
  scopes: SqlScopes;
  /** Index of the top-level WHERE, if any. */
  where?: number;
  /** Index of the first clause after FROM and WHERE (GROUP, ORDER, LIMIT, …), if any. */
  tail?: number;
  grouped: boolean;
  /** The WHERE clause has OR at its top level. */
  or: boolean;
  ordered: boolean;
  /** Index of the number token of a final `LIMIT n`. */
  limit?: number;
}

function shape(sql: string): Shape | undefined {
  const scopes = sqlScopes(sql);
  const toks = scopes.tokens;
  if (toks.filter((t) => isWord(t, "SELECT")).length !== 1 || !isWord(toks[0], "SELECT")) return undefined;
  if (toks.some((t) => isWord(t, "UNION") || isWord(t, "INTERSECT") || isWord(t, "EXCEPT"))) return undefined;
  const out: Shape = { sql, toks, scopes, grouped: false, or: false, ordered: false };
  let depth = 0;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    if (t.kind === "punct" && t.text === "(") depth++;
    else if (t.kind === "punct" && t.text === ")") depth--;
    if (depth !== 0 || t.kind !== "word") continue;
    const word = t.upper;
    if (word === "WHERE") out.where = i;
    else if (word === "OR" && out.where !== undefined && out.tail === undefined) out.or = true;
    else if (["GROUP", "HAVING", "WINDOW", "ORDER", "LIMIT"].includes(word) && out.tail === undefined) out.tail = i;
    if (word === "GROUP" || word === "HAVING") out.grouped = true;
    if (word === "ORDER") out.ordered = true;
  }
  const end = toks.at(-1)?.text === ";" ? toks.length - 2 : toks.length - 1;
  if (isWord(toks[end - 1], "LIMIT") && /^\d+$/.test(toks[end]!.text)) out.limit = end;
  return out;
}

/**
 * `sql` with `condition` added to its WHERE clause (or a new one), right after the token before any
 * GROUP/ORDER/LIMIT (or the last token), so that comments and a trailing `;` stay where they are;
 * undefined when the result does not read as the query with exactly the condition's tokens added.
 */
function addCondition(s: Shape, condition: string): string | undefined {
  const { sql, toks } = s;
  const last = s.tail === undefined ? (toks.at(-1)?.text === ";" ? toks.length - 2 : toks.length - 1) : s.tail - 1;
  if (last < 0) return undefined;
  const at = toks[last]!.end;
  const added = ` ${s.where === undefined ? "WHERE" : "AND"} ${condition}`;
  const out = `${sql.slice(0, at)}${added}${sql.slice(at)}`;
  const expected = [...toks.slice(0, last + 1), ...lexSql(added), ...toks.slice(last + 1)].map((t) => t.text);
  const got = lexSql(out).map((t) => t.text);
  return got.length === expected.length && got.every((t, i) => t === expected[i]) ? out : undefined;
}

/** The tables the query reads, each with how to qualify its columns; a table read twice is left out. */
function readTables(s: Shape, schema: SchemaNames): Map<string, string> {
  const tables = new Map(schema.tables.map((t) => [t.name.toLowerCase(), t.name]));
  const { names, used } = bindings(s.scopes, tables);
  const multi = used.size > 1;
  const out = new Map<string, string>();
  for (const table of used) {
    const aliases = [...names].filter(([n, ts]) => ts.has(table) && n !== table.toLowerCase()).map(([n]) => n);
    if (aliases.length > 1) continue;
    const alias = aliases[0] === undefined ? undefined : s.toks.find((t) => isName(t) && t.value.toLowerCase() === aliases[0])?.value;
    const qualifier = alias ?? (multi ? identifierSpellings(table)[0]! : "");
    out.set(table, qualifier ? `${qualifier}.` : "");
  }
  return out;
}

/** The one condition the question names that the query lacks (see the module doc), or undefined. */
function missingCondition(s: Shape, schema: SchemaNames, named: readonly NamedValue[], tables: Map<string, string>): string | undefined {
  const mentioned = new Set(s.toks.filter(isName).map(nameText));
  const strings = s.toks.filter(isString).map((t) => t.value);
  const columnNames = new Set(schema.tables.flatMap((t) => t.columns.map((c) => c.toLowerCase())));
  const spelled = new Map(schema.tables.map((t) => [t.name.toLowerCase(), t.name]));
  const found: { column: string; value: string; condition: string }[] = [];
  for (const n of named) {
    const table = spelled.get(n.table.toLowerCase());
    const qualifier = table === undefined ? undefined : tables.get(table);
    if (n.score < COVERAGE_SCORE || qualifier === undefined || mentioned.has(n.column.toLowerCase())) continue;
    // a value spelt like a column's name, or like words of a column the query reads ('home' of home_team), is those words of the question
    const value = n.value.toLowerCase().trim().replace(/\s+/g, "_");
    if (columnNames.has(value) || [...mentioned].some((m) => columnNames.has(m) && `_${m}_`.includes(`_${value}_`))) continue;
    if (strings.some((v) => beginsLike(v, n.value))) continue;
    if (found.some((f) => f.column === n.column.toLowerCase() || beginsLike(f.value, n.value))) continue;
    found.push({ column: n.column.toLowerCase(), value: n.value, condition: `${qualifier}${identifierSpellings(n.column)[0]} = ${quoteString(n.value)}` });
  }
  return found.length === 1 ? found[0]!.condition : undefined;
}

/** The condition on the one date column of the query's tables for the one year the question names, or undefined. */
async function missingYear(s: Shape, schema: SchemaNames, read: ReadRows, question: string, tables: Map<string, string>): Promise<string | undefined> {
  const years = [...new Set([...question.matchAll(YEAR_NAMED)].map((m) => m[1]!))];
  if (years.length !== 1 || s.sql.includes(years[0]!)) return undefined;
  const mentioned = new Set(s.toks.filter(isName).map(nameText));
  const columnsOf = (table: string): readonly string[] => schema.tables.find((t) => t.name === table)?.columns ?? [];
  if ([...tables.keys()].some((t) => columnsOf(t).some((c) => c.toLowerCase().includes("year")))) return undefined;
  if ([...tables.keys()].reduce((n, t) => n + columnsOf(t).length, 0) > MAX_DATE_COLUMNS) return undefined;
  const dates: { table: string; column: string; pattern: string }[] = [];
  for (const table of tables.keys()) {
    const columns = columnsOf(table);
    const rows = await read(`SELECT ${columns.map((c) => identifierSpellings(c)[0]).join(", ")} FROM ${identifierSpellings(table)[0]} LIMIT ${DATE_SAMPLE}`);
    if (!rows) return undefined;
    columns.forEach((column, k) => {
      const values = rows.map((r) => r[k]).filter((v): v is SqlValue => v !== null && v !== undefined);
      const format = values.length > 0 ? detectDateFormat(values) : undefined;
      const pattern = format ? datePattern({ year: years[0]! }, format) : undefined;
      if (pattern) dates.push({ table, column, pattern });
    });
  }
  if (dates.length !== 1 || mentioned.has(dates[0]!.column.toLowerCase())) return undefined;
  const { table, column, pattern } = dates[0]!;
  const ref = identifierSpellings(column)[0]!;
  const held = await read(`SELECT 1 FROM ${identifierSpellings(table)[0]} WHERE ${ref} LIKE ${quoteString(pattern)} LIMIT 1`);
  return held?.length === 1 ? `${tables.get(table)}${ref} LIKE ${quoteString(pattern)}` : undefined;
}

/** The number of rows the question asks for ("the five most …", "top 3"), or undefined. */
export function rowsAsked(question: string): number | undefined {
  if (ROWS_COMPARED.some((re) => re.test(question))) return undefined;
  const m = ROWS_ASKED.map((re) => re.exec(question)).find((x) => x !== null);
  if (!m) return undefined;
  const word = m[1]!.toLowerCase();
  const n = COUNT_WORDS[word] ?? Number(word);
  return n >= 2 && n <= 100 ? n : undefined;
}

/**
 * `sql` with the condition the question names and the query lacks, the year it names, and the
 * number of rows it asks for put in (see the module doc); `read` runs the lookups. Undefined when
 * nothing was changed.
 */
export async function repairCoverage(sql: string, schema: SchemaNames, read: ReadRows, input: CoverageInput = {}): Promise<CoverageRepair | undefined> {
  const fixes: CoverageFix[] = [];
  let out = sql;
  let s = shape(out);
  if (!s) return undefined;
  // under a negation the question's value or year may be what it excludes
  const filtering = !s.grouped && !s.or && !(input.question !== undefined && NEGATED.test(input.question));
  // an added condition changes neither the tables nor their aliases
  const tables = readTables(s, schema);
  if (filtering && input.named?.length) {
    const condition = missingCondition(s, schema, input.named, tables);
    const added = condition ? addCondition(s, condition) : undefined;
    if (condition && added) {
      out = added;
      fixes.push({ rule: "condition", from: "", to: condition });
      s = shape(out)!;
    }
  }
  // a query that already compares with <, > or BETWEEN has its range: a year put in would narrow it
  const ranged = s.toks.some((t) => (t.kind === "op" && /[<>]/.test(t.text)) || isWord(t, "BETWEEN"));
  if (filtering && !ranged && input.question) {
    const condition = await missingYear(s, schema, read, input.question, tables);
    const added = condition ? addCondition(s, condition) : undefined;
    if (condition && added) {
      out = added;
      fixes.push({ rule: "year", from: "", to: condition });
      s = shape(out)!;
    }
  }
  const rows = input.question ? rowsAsked(input.question) : undefined;
  if (rows !== undefined && s.ordered && s.limit !== undefined && Number(s.toks[s.limit]!.text) !== rows) {
    const tok = s.toks[s.limit]!;
    fixes.push({ rule: "limit", from: `LIMIT ${tok.text}`, to: `LIMIT ${rows}` });
    out = `${out.slice(0, tok.start)}${rows}${out.slice(tok.end)}`;
  }
  return fixes.length > 0 ? { sql: out, fixes } : undefined;
}

/** Coverage repair as a rewrite rule (`agent.repairCoverage`): a final SQL that runs gets what the question names and it leaves out ({@link repairCoverage}). */
export const COVERAGE_REWRITE = {
  id: "coverage",
  flag: "repairCoverage",
  field: "coverage",
  eventField: "coverage",
  signal: "repairedCoverage",
  doubt: "a condition of the question was added after it was written",
  metric: { name: "reex_final_coverage_repairs_total", help: "Final SQL that got a condition, year or row count the question names and it left out." },
  says: "what the question names put in",
  api: {
    shape: { rule: COVERAGE_FIX_RULES, from: "string", to: "string" },
    description:
      "Parts of the question put into its final SQL (`agent.repairCoverage`): the rule (`condition`: the one value the question names exactly, in a column of its tables it never read; `year`: the year the question names, on its tables' one date column; `limit`: the number of rows the question asks for), what the query had (empty for an added condition) and what it has now.",
  },
  docs: "given what the question names and it leaves out: the one exactly named value of a column it never reads, the year on its one date column, the number of rows asked for as its `LIMIT` (`src/agent/coverage.ts`)",
  apply: (sql, { schema, read, named, question }) =>
    repairCoverage(sql, schema, read, { ...(named ? { named } : {}), ...(question !== undefined ? { question } : {}) }),
} as const satisfies RewriteRule<CoverageFix>;

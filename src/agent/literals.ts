/**
 * Literal repair: a final SQL that runs is checked against the data its string comparisons name,
 * and a comparison is rewritten when the database shows what was meant. Five cases, all common in
 * small models and all visible in the table's own values:
 * - a date in another format than the column's (`date LIKE 'December 2008'`, `'1998/%'` or
 *   `'2019%'` where the column holds `12/05/2008`): the year (with the month and day, or a decade,
 *   when the literal gives them) is rewritten as a LIKE pattern in the column's format;
 * - a string in another case or with other spacing than the one value that matches it
 *   (`= 'JUNIOR'` where the column holds `Junior`);
 * - a string the column holds in several spellings that differ only in case and spacing (`Leeds`,
 *   `LEEDS`, ` leeds`: one city, entered by hand): `= 'LEEDS'` becomes
 *   `LOWER(TRIM(city)) = 'leeds'`, so every spelling counts, whichever one the model wrote;
 * - a string no row holds, in a column for which the question names exactly one value (the
 *   prompt's matched values at {@link NAMED_SCORE} or above: a code the question spells out, a
 *   plural of a stored singular, a typo): `hanyu_pinyin = 'JUNIOR'` becomes `= 'JUN'`;
 * - a string no row of the column holds and exactly one other column of the same table does, as
 *   written: the model took the wrong column (`location = 'Alvernia University'` becomes
 *   `institution = 'Alvernia University'`; the qualifier stays).
 * Only `column = 'text'` and `column LIKE 'text'` are looked at, where the column resolves to one
 * table of the query; a rewrite must match rows, and a literal the column holds is only widened to
 * its other spellings. The lookups are a few read-only queries per comparison, each under the
 * reader's own time limit (the rollout's probe limit).
 */
import { sqlScopes, type SqlScopes, type SqlValue } from "../sql/index.js";
import { identifierSpellings, isName, isString, isWord, quoteString, type SchemaNames } from "./grammar.js";
import type { NamedValue, ReadRows, RewriteRule } from "./rewrite-types.js";

export type { NamedValue, ReadRows } from "./rewrite-types.js";

declare module "../events/index.js" {
  interface RepairFixes {
    /** Each comparison rewritten (`table.column`, as written, as rewritten, the rule) by literal repair; absent when none was. */
    literals?: LiteralFix[];
  }
}

/** Why a comparison was rewritten (see the module doc). */
const LITERAL_FIX_RULES = ["date-format", "case", "variants", "named", "column"] as const;

/** One comparison rewritten: the column (`table.column`), the comparison as written and as rewritten, and why. */
export interface LiteralFix {
  column: string;
  from: string;
  to: string;
  rule: (typeof LITERAL_FIX_RULES)[number];
}

/** A query whose literals were rewritten, and each rewrite. */
export interface LiteralRepair {
  sql: string;
  fixes: LiteralFix[];
}

/** Matched values at least this sure name a column's value for the repair: codes (0.8 and up), plurals (0.95), spellings one edit in five apart. */
export const NAMED_SCORE = 0.8;

/** Columns of a table looked through for a string its compared column lacks, at most. */
const MAX_OTHER_COLUMNS = 64;

/** Distinct values read to learn a column's date format. */
const FORMAT_SAMPLE = 200;

const MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

/** Tokens after which a comparison starts a condition. */
const CONDITION_START = new Set(["WHERE", "AND", "OR", "ON", "WHEN", "HAVING", "NOT", "("]);

/** A `column = 'text'` or `column LIKE 'text'` of the query. */
interface Comparison {
  table: string;
  column: string;
  /** The column as written, qualifier included. */
  ref: string;
  /** The column's own token as written (quotes included), the end of `ref`. */
  columnText: string;
  op: "=" | "LIKE";
  value: string;
  start: number;
  end: number;
}

/** Each table name or alias of the query's FROM lists (every SELECT's) and the schema tables it stands for, and the tables used. */
export function bindings(sql: SqlScopes, tables: ReadonlyMap<string, string>): { names: Map<string, Set<string>>; used: Set<string> } {
  const names = new Map<string, Set<string>>();
  const used = new Set<string>();
  const bind = (name: string, table: string): void => {
    const set = names.get(name) ?? new Set<string>();
    set.add(table);
    names.set(name, set);
  };
  for (const item of sql.scopes.flatMap((s) => s.from)) {
    const table = item.kind === "table" ? tables.get(item.name) : undefined;
    if (!table) continue;
    used.add(table);
    bind(item.name, table);
    if (item.alias !== undefined) bind(item.alias, table);
  }
  return { names, used };
}

/** The query's comparisons of a column with a string whose column resolves to exactly one table. */
function comparisons(sql: string, schema: SchemaNames): Comparison[] {
  const scopes = sqlScopes(sql);
  const toks = scopes.tokens;
  const tables = new Map(schema.tables.map((t) => [t.name.toLowerCase(), t.name]));
  const columns = new Map(schema.tables.map((t) => [t.name, new Map(t.columns.map((c) => [c.toLowerCase(), c]))]));
  const { names, used } = bindings(scopes, tables);
  const out: Comparison[] = [];
  for (let i = 0; i < toks.length; i++) {
    const col = toks[i]!;
    const opTok = toks[i + 1];
    const lit = toks[i + 2];
    // `==` is one token now, but as before the shared lexer (which read it as two) a `==` comparison is left alone
    const op = opTok?.text === "=" ? "=" : isWord(opTok, "LIKE") ? "LIKE" : undefined;
    if (!isName(col) || !op || !isString(lit)) continue;
    const qualified = toks[i - 1]?.text === ".";
    const first = qualified ? i - 2 : i;
    const before = toks[first - 1];
    if (qualified && !isName(toks[i - 2])) continue;
    if (before && !CONDITION_START.has(before.kind === "word" ? before.upper : before.text)) continue;
    const after = toks[i + 3];
    if (after && !(after.kind === "word" || after.text === ")" || after.text === ",")) continue;
    if (isWord(after, "ESCAPE") || isWord(after, "COLLATE")) continue;
    const column = col.value.toLowerCase();
    const candidates = qualified ? [...(names.get(toks[i - 2]!.value.toLowerCase()) ?? [])] : [...used].filter((t) => columns.get(t)!.has(column));
    if (candidates.length !== 1 || !columns.get(candidates[0]!)?.has(column)) continue;
    const table = candidates[0]!;
    out.push({
      table,
      column: columns.get(table)!.get(column)!,
      ref: sql.slice(toks[first]!.start, col.end),
      columnText: sql.slice(col.start, col.end),
      op,
      value: lit.value,
      start: toks[first]!.start,
      end: lit.end,
    });
  }
  return out;
}

/** A date as a literal gives it: a decade, or a year with perhaps a month and a day. */
export type DateParts = { decade: string } | { year: string; month?: number; day?: number };

/** The date a literal names (`'December 2008'`, `'1998/%'`, `'%/09/2016'`, `'2010s'`); undefined when it names none, or several, or is ambiguous. */
function parseDateLiteral(literal: string): DateParts | undefined {
  const text = literal.trim();
  const decade = /(?<!\d)(1[89]\d|20\d)0'?s\b/i.exec(text) ?? /^(1[89]\d|20\d)[%_]+$/.exec(text);
  if (decade) return { decade: decade[1]! };
  const years = [...new Set([...text.matchAll(/(?<!\d)(1[89]\d\d|20\d\d)(?!\d)/g)].map((m) => m[1]!))];
  if (years.length !== 1) return undefined;
  const year = years[0]!;
  const rest = text.replace(new RegExp(`(?<!\\d)${year}(?!\\d)`, "g"), " ");
  const words = rest.toLowerCase().match(/[a-z]+/g) ?? [];
  const named = words.map((w) => MONTHS.findIndex((m) => m === w || (w.length >= 3 && m.startsWith(w)))).filter((m) => m >= 0);
  const numbers = (rest.match(/\d+/g) ?? []).map(Number);
  if (numbers.some((n) => n < 1 || n > 31) || new Set(named).size > 1) return undefined;
  if (named.length > 0) {
    if (numbers.length > 1) return undefined;
    return { year, month: named[0]! + 1, ...(numbers.length === 1 ? { day: numbers[0]! } : {}) };
  }
  if (words.length > 0 && !(words.length === 1 && words[0] === "t")) return undefined;
  if (numbers.length === 0) return { year };
  const yearFirst = new RegExp(`^${year}\\s*[-/.]`).test(text);
  if (numbers.length === 1) return numbers[0]! <= 12 ? { year, month: numbers[0]! } : undefined;
  if (numbers.length !== 2) return undefined;
  const [a, b] = numbers as [number, number];
  if (yearFirst) return a <= 12 ? { year, month: a, day: b } : undefined;
  if (a > 12 && b <= 12) return { year, month: b, day: a };
  if (b > 12 && a <= 12) return { year, month: a, day: b };
  return undefined;
}

/** How a column writes its dates. */
export interface DateFormat {
  /** Year first (`2008-12-05`, `2008/12/05`, `20081205`) or last (`12/05/2008`, `05.12.2008`). */
  yearFirst: boolean;
  sep: string;
  /** Year-last formats: which field is the month, when the values tell. */
  order?: "md" | "dm";
  /** Year-last formats: month and day always written with two digits. */
  padded: boolean;
  /** Some values go on after the date (a time). */
  tail: boolean;
}

const FORMATS: { re: RegExp; yearFirst: boolean; sep: string }[] = [
  { re: /^(\d{4})-(\d{2})-(\d{2})/, yearFirst: true, sep: "-" },
  { re: /^(\d{4})\/(\d{2})\/(\d{2})/, yearFirst: true, sep: "/" },
  { re: /^(\d{4})(\d{2})(\d{2})$/, yearFirst: true, sep: "" },
  { re: /^(\d{1,2})\/(\d{1,2})\/(\d{4})/, yearFirst: false, sep: "/" },
  { re: /^(\d{1,2})-(\d{1,2})-(\d{4})/, yearFirst: false, sep: "-" },
  { re: /^(\d{1,2})\.(\d{1,2})\.(\d{4})/, yearFirst: false, sep: "." },
];

/** The date format of a column's text values: the one nine in ten of them follow; undefined for none. */
export function detectDateFormat(values: readonly SqlValue[]): DateFormat | undefined {
  const texts = values.filter((v): v is string => typeof v === "string");
  if (texts.length === 0 || texts.length < values.length * 0.9) return undefined;
  const format = FORMATS.find((f) => texts.filter((t) => f.re.test(t)).length >= texts.length * 0.9);
  if (!format) return undefined;
  const matched = texts.map((t) => format.re.exec(t)).filter((m): m is RegExpExecArray => m !== null);
  const tail = matched.some((m) => m.input.length > m[0].length);
  if (format.yearFirst) return { yearFirst: true, sep: format.sep, padded: true, tail };
  const firstOver = matched.some((m) => Number(m[1]) > 12);
  const secondOver = matched.some((m) => Number(m[2]) > 12);
  const order = firstOver && !secondOver ? "dm" : secondOver && !firstOver ? "md" : undefined;
  const padded = matched.every((m) => m[1]!.length === 2 && m[2]!.length === 2);
  return { yearFirst: false, sep: format.sep, ...(order ? { order } : {}), padded, tail };
}

/** The LIKE pattern for `date` in `format`; undefined when the format cannot place its month or day. */
export function datePattern(date: DateParts, format: DateFormat): string | undefined {
  const { sep, tail } = format;
  const end = tail ? "%" : "";
  if (format.yearFirst) {
    if ("decade" in date) return `${date.decade}%`;
    const two = (n: number): string => String(n).padStart(2, "0");
    if (date.month === undefined) return `${date.year}%`;
    if (date.day === undefined) return `${date.year}${sep}${two(date.month)}${sep}%`;
    return `${date.year}${sep}${two(date.month)}${sep}${two(date.day)}${end}`;
  }
  if ("decade" in date) return `%${sep}${date.decade}_${end}`;
  if (date.month === undefined) return `%${sep}${date.year}${end}`;
  if (!format.order) return undefined;
  const field = (n: number): string => (format.padded ? String(n).padStart(2, "0") : String(n));
  const day = date.day === undefined ? "%" : field(date.day);
  const [a, b] = format.order === "md" ? [field(date.month), day] : [day, field(date.month)];
  return `${a}${sep}${b}${sep}${date.year}${end}`;
}

/** The rewrite of one comparison (see the module doc); undefined when it needs none or none is certain. */
async function mend(
  c: Comparison,
  read: ReadRows,
  named: readonly NamedValue[],
  columnsOf: (table: string) => readonly string[],
): Promise<Omit<LiteralFix, "column" | "from"> | undefined> {
  const table = identifierSpellings(c.table)[0]!;
  const column = identifierSpellings(c.column)[0]!;
  if (c.op === "=") {
    const same = await read(`SELECT DISTINCT ${column} FROM ${table} WHERE LOWER(TRIM(${column})) = LOWER(TRIM(${quoteString(c.value)})) LIMIT 3`);
    if (!same) return undefined;
    const texts = same.map((r) => r[0]).filter((v): v is string => typeof v === "string");
    if (texts.length >= 2) {
      const folded = (await read(`SELECT LOWER(TRIM(${quoteString(c.value)}))`))?.[0]?.[0];
      return typeof folded === "string" ? { to: `LOWER(TRIM(${c.ref})) = ${quoteString(folded)}`, rule: "variants" } : undefined;
    }
    if (same.length > 0)
      return same.length === 1 && texts.length === 1 && texts[0] !== c.value ? { to: `${c.ref} = ${quoteString(texts[0]!)}`, rule: "case" } : undefined;
  } else {
    const held = await read(`SELECT 1 FROM ${table} WHERE ${column} LIKE ${quoteString(c.value)} LIMIT 1`);
    if (!held || held.length > 0) return undefined;
  }
  const date = parseDateLiteral(c.value);
  if (date) {
    const sample = await read(`SELECT DISTINCT ${column} FROM ${table} WHERE ${column} IS NOT NULL LIMIT ${FORMAT_SAMPLE}`);
    const format = sample ? detectDateFormat(sample.map((r) => r[0]!)) : undefined;
    const pattern = format ? datePattern(date, format) : undefined;
    if (pattern && pattern !== c.value && (await read(`SELECT 1 FROM ${table} WHERE ${column} LIKE ${quoteString(pattern)} LIMIT 1`))?.length === 1)
      return { to: `${c.ref} LIKE ${quoteString(pattern)}`, rule: "date-format" };
  }
  // a LIKE pattern with wildcards asks for more than one value: no single named value replaces it
  if (c.op === "LIKE" && /[%_]/.test(c.value)) return undefined;
  const values = [
    ...new Set(
      named
        .filter((n) => n.score >= NAMED_SCORE && n.table.toLowerCase() === c.table.toLowerCase() && n.column.toLowerCase() === c.column.toLowerCase())
        .map((n) => n.value),
    ),
  ];
  if (values.length === 1 && values[0] !== c.value) {
    const held = await read(`SELECT 1 FROM ${table} WHERE ${column} = ${quoteString(values[0]!)} LIMIT 1`);
    return held?.length === 1 ? { to: `${c.ref} = ${quoteString(values[0]!)}`, rule: "named" } : undefined;
  }
  if (values.length > 0) return undefined;
  const others = columnsOf(c.table).filter((o) => o.toLowerCase() !== c.column.toLowerCase());
  if (others.length === 0 || others.length > MAX_OTHER_COLUMNS) return undefined;
  // one query (one time limit) for all the columns; compared as text, which PostgreSQL needs for a number column
  const held = await read(
    `SELECT ${others.map((o) => `EXISTS (SELECT 1 FROM ${table} WHERE CAST(${identifierSpellings(o)[0]} AS TEXT) = ${quoteString(c.value)})`).join(", ")}`,
  );
  const holders = others.filter((_, k) => held?.[0]?.[k] === 1);
  if (holders.length !== 1) return undefined;
  const qualifier = c.ref.slice(0, c.ref.length - c.columnText.length);
  return { to: `${qualifier}${identifierSpellings(holders[0]!)[0]} = ${quoteString(c.value)}`, rule: "column" };
}

/**
 * `sql` with each `column = 'text'` / `column LIKE 'text'` whose text no row of the column holds
 * rewritten to the column's date format or spelling, the one value the question names for the
 * column (`named`, default none) or the one other column that holds it, and each text the column
 * holds in several spellings widened to all of them (see the module doc); `read` runs the lookups.
 * Undefined when nothing was rewritten.
 */
export async function repairLiterals(sql: string, schema: SchemaNames, read: ReadRows, named: readonly NamedValue[] = []): Promise<LiteralRepair | undefined> {
  const fixes: (LiteralFix & { start: number; end: number })[] = [];
  const columnsOf = (table: string): readonly string[] => schema.tables.find((t) => t.name === table)?.columns ?? [];
  for (const c of comparisons(sql, schema)) {
    const fix = await mend(c, read, named, columnsOf);
    if (fix) fixes.push({ column: `${c.table}.${c.column}`, from: sql.slice(c.start, c.end), ...fix, start: c.start, end: c.end });
  }
  if (fixes.length === 0) return undefined;
  let out = sql;
  for (const f of [...fixes].sort((a, b) => b.start - a.start)) out = `${out.slice(0, f.start)}${f.to}${out.slice(f.end)}`;
  return { sql: out, fixes: fixes.map(({ column, from, to, rule }) => ({ column, from, to, rule })) };
}

/** Literal repair as a rewrite rule (`agent.repairLiterals`): a final SQL that runs, its comparisons fitted by {@link repairLiterals}. */
export const LITERAL_REWRITE = {
  id: "literals",
  flag: "repairLiterals",
  field: "literals",
  eventField: "literals",
  signal: "repairedLiterals",
  doubt: "its literals were rewritten to values the database has",
  metric: { name: "reex_final_literal_repairs_total", help: "Final SQL whose string comparisons were fitted to the column's values (date format, spelling)." },
  says: "literals fitted to the column's values",
  api: {
    shape: { column: "string", from: "string", to: "string", rule: LITERAL_FIX_RULES },
    description:
      "Comparisons of its final SQL fitted to the column's values (`agent.repairLiterals`): the column (`table.column`), the comparison written, the one put in its place, and the rule (`date-format`: a date in the column's format; `case`: the one value equal but for case and spacing; `variants`: all the spellings the column holds; `named`: the one value the question names for the column; `column`: the one other column of the table that holds the string).",
  },
  docs: "each string comparison no row matches fitted to the column's values: its date format, its one spelling, all its spellings, the one value the question names for it, or the one other column that holds the string (`src/agent/literals.ts`)",
  apply: (sql, { schema, read, named }) => repairLiterals(sql, schema, read, named),
} as const satisfies RewriteRule<LiteralFix>;

/**
 * Constrained decoding: GBNF grammars (llama.cpp syntax) that keep a response inside the tag
 * structure and restrict the SQL's table and column identifiers to the schema's own names.
 *
 * The server injects `<result>` blocks between segments, so a grammar covers one generate segment:
 * "first" (the response's start: think, then a probe or the final SQL), "segment" (the same with
 * an optional think: valid at the start and after every injected result), "final-body" (the SQL
 * after a server-opened `<final_sql>`, up to `</final_sql>`) and "final-from" / "probe-from" (the
 * rest of a final SQL or probe from just after its statement's first FROM, up to its closing tag:
 * a FROM list drawn again once the columns after it are known).
 *
 * Every segment a grammar accepts is finite and short, so constrained generation ends well formed
 * even when the model never chooses to stop (a random model samples every allowed continuation):
 * a think holds at most {@link DEFAULT_MAX_THINK_BYTES} bytes, and the SQL is built from budgeted
 * operand sequences over at most four nesting levels (see LEVELS), with strings, numbers and
 * aliases capped (free text in bytes: a token is at least one byte, so the caps bound tokens too).
 * The grammars are recursion-free and use bounded repetitions only.
 *
 * The SQL is a simplified SQLite SELECT: DISTINCT, result columns (`*`, `T1.*`, expressions with
 * `AS name`), FROM with joins and a derived table, WHERE, GROUP BY, HAVING, compound selects,
 * ORDER BY, LIMIT/OFFSET; expressions over columns (bare, or quoted where a bare name is
 * impossible; qualified by a table name or a bound alias), literals, `COUNT(*)`, common functions
 * (one argument for the unary ones), CAST, CASE, EXISTS, IN (a list or a subquery), BETWEEN,
 * LIKE, scalar subqueries. Table aliases are T1..T4 (the prompt asks for T1, T2, …), declared in
 * FROM order and bound (see {@link buildGrammar}); output aliases after AS are free but cannot be
 * referenced later; no CTEs.
 */
import type { PromptFamily } from "./types.js";
import { TABLE_ALIASES, UNANSWERABLE_MARKER } from "./prompts.js";
import type { NameBinding } from "./binding.js";
import { KEYWORD_LIKE, lexSql, SQL_FUNCTIONS, SQL_TYPE_NAMES, SQLITE_KEYWORDS, UNARY_FUNCTIONS, type SqlToken } from "../sql/index.js";
import { REEX_SKELETON, type GrammarSkeleton, type GrammarStart, type SchemaNames } from "./grammar-types.js";

export { REEX_SKELETON, type GrammarSkeleton, type GrammarStart, type SchemaNames } from "./grammar-types.js";

/** The grammars a constrained rollout uses: the first segment, later segments, and the body of a forced final. */
export interface SegmentGrammars {
  first?: string;
  segment?: string;
  finalBody?: string;
  /**
   * The grammar that draws a closed final SQL's ("final") or probe's ("probe") FROM list again, from
   * just after its FROM, declaring at least `aliases` table aliases (those the SELECT list names; see
   * binding.ts `rebind`); built on first use. Default none.
   */
  fromRest?: (closing: "final" | "probe", aliases: number) => string;
  /** Also keep the SQL's names bound to its FROM lists as it is drawn (see binding.ts); default none. */
  binding?: NameBinding;
}

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
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && !SQLITE_KEYWORDS.has(name.toUpperCase());
}

/** The spellings of one identifier: bare (when allowed), "double-quoted", `backticked`, [bracketed]. */
export function identifierSpellings(name: string): string[] {
  if (isBare(name)) return [name];
  const out: string[] = [];
  out.push(`"${name.replace(/"/g, '""')}"`);
  if (!name.includes("`")) out.push(`\`${name}\``);
  if (!name.includes("]")) out.push(`[${name}]`);
  return out;
}

interface TrieNode {
  end: boolean;
  kids: Map<string, TrieNode>;
  /** The rule that follows a word ending here (see `trieRules`' `tails`). */
  tail?: string;
}

/**
 * Rules matching exactly one of `words`, as a radix tree: every choice point branches on distinct
 * next characters. A flat alternation of hundreds of names makes llama.cpp follow one grammar stack
 * per name at every position where a name may start; the tree needs one per first character.
 * With `tails`, a word is followed by its own rule (also where it is a prefix of another word).
 */
function trieRules(name: string, words: string[], tails?: ReadonlyMap<string, string>): string[] {
  const root: TrieNode = { end: false, kids: new Map() };
  for (const word of words) {
    let node = root;
    for (const ch of word) {
      let kid = node.kids.get(ch);
      if (!kid) {
        kid = { end: false, kids: new Map() };
        node.kids.set(ch, kid);
      }
      node = kid;
    }
    node.end = true;
    const tail = tails?.get(word);
    if (tail !== undefined) node.tail = tail;
  }
  const rules: string[] = [];
  let count = 0;
  const emit = (node: TrieNode, rule: string): void => {
    const alternatives: string[] = [];
    const children: [TrieNode, string][] = [];
    for (const [ch, first] of node.kids) {
      let label = ch;
      let kid = first;
      while (!kid.end && kid.kids.size === 1) {
        const [next, grandkid] = kid.kids.entries().next().value!;
        label += next;
        kid = grandkid;
      }
      if (kid.kids.size === 0) {
        alternatives.push(kid.tail ? `${lit(label)} ${kid.tail}` : lit(label));
      } else {
        const sub = `${name}-${++count}`;
        alternatives.push(`${lit(label)} ${kid.tail ? `(${sub} | ${kid.tail})` : `${sub}${kid.end ? "?" : ""}`}`);
        children.push([kid, sub]);
      }
    }
    rules.push(`${rule} ::= ${alternatives.join(" | ")}`);
    for (const [kid, sub] of children) emit(kid, sub);
  };
  emit(root, name);
  return rules;
}

/**
 * Rules for text of at most `max` UTF-8 bytes (at least one): `name`, a chain `name-n` (n bytes
 * left) and `name-bk`, the pieces of k bytes. `units` are the ASCII pieces with their byte
 * lengths; any non-ASCII character is allowed too and costs its UTF-8 length. Empty when `max` is
 * 0 (then `name` must not be referenced).
 */
function byteBounded(name: string, max: number, units: [string, number][], nonAscii = true): string[] {
  if (max === 0) return [];
  const pieces: [string, number][] = [
    ...units,
    ...(nonAscii
      ? ([
          ["[\\u0080-\\u07FF]", 2],
          ["[\\u0800-\\uFFFF]", 3],
          ["[\\U00010000-\\U0010FFFF]", 4],
        ] as [string, number][])
      : []),
  ];
  const rules = [`${name} ::= ${name}-${max}`];
  const costs = [...new Set(pieces.map(([, cost]) => cost))].sort((a, b) => a - b);
  for (const k of costs)
    rules.push(
      `${name}-b${k} ::= ${pieces
        .filter(([, cost]) => cost === k)
        .map(([piece]) => piece)
        .join(" | ")}`,
    );
  for (let n = 1; n <= max; n++) {
    const alternatives = costs.filter((k) => k <= n).map((k) => (k < n ? `${name}-b${k} ${name}-${n - k}?` : `${name}-b${k}`));
    rules.push(`${name}-${n} ::= ${alternatives.join(" | ")}`);
  }
  return rules;
}

/**
 * The string rule of a grammar with listed literals: a listed text (quotes doubled), optionally
 * with `%` before and after it, or date and time text: groups of up to 4 digits, strftime's
 * `%Y`-style formats or `%` between single `/:. -` separators, a `%` at either end, no bare number
 * but a year. A date modifier (`+18 years`, `start of month`, `now`) is a
 * `modifier-string`, written only as a date function's argument (see `SqlRules.construct`).
 */
function literalRules(literals: readonly string[]): string[] {
  const listed = unique(quotedListable(literals));
  const units = ["year", "month", "day", "hour", "minute", "second"];
  return [
    listed.length > 0 ? `string ::= "'" ("%"? string-listed "%"? | string-pattern?) "'"` : `string ::= "'" string-pattern? "'"`,
    ...(listed.length > 0 ? nameRules("string-listed", listed) : []),
    `modifier-string ::= "'" string-modifier "'"`,
    `date-func ::= ${DATE_FUNCTIONS.flatMap((f) => [f, f.toLowerCase()])
      .map(lit)
      .join(" | ")}`,
    // a date, a time or a LIKE / strftime pattern over them: groups of up to 4 digits, %Y-style formats or
    // % between single separators, a % at either end; no bare number but a year (one the question holds is a listed span)
    'dt-unit ::= [0-9]{1,4} | dt-format | "%"',
    'dt-format ::= "%" [YmdHMSjwfsWJ]',
    "dt-sep ::= [-/:. ]",
    "dt-body ::= dt-unit (dt-sep dt-unit){0,5}",
    `string-pattern ::= "%" (dt-sep? dt-body (dt-sep? "%")?)? | dt-unit (dt-sep dt-unit){1,5} (dt-sep? "%")? | dt-unit dt-sep? "%" | dt-format (dt-sep? dt-unit){0,5} | [12] [0-9]{3}`,
    // a date function's modifier: "+18 years", "start of month", "weekday 0", "now", …
    `string-modifier ::= [+-]? [0-9]{1,6} ("." [0-9]{1,3})? " " (${units.map(lit).join(" | ")}) "s"? | "start of " ("year" | "month" | "day") | "weekday " [0-6] | ${DATE_KEYWORDS.map(lit).join(" | ")}`,
  ];
}

/**
 * `column-compared`: a schema column compared with one of its own listed values (`=`, `==`, `!=`,
 * `<>`, `[NOT] LIKE`, `[NOT] IN (…)` of up to 10), `%` allowed around a value; no rules when no
 * listed column is in the schema. Columns are matched by name, case-insensitively; values of
 * same-named columns are pooled.
 */
function columnLiteralRules(schema: SchemaNames, columnLiterals: readonly ColumnLiterals[], sql: SqlRules): string[] {
  const names = new Map<string, string>();
  for (const t of schema.tables) for (const c of t.columns) if (!names.has(c.toLowerCase())) names.set(c.toLowerCase(), c);
  const pooled = new Map<string, Set<string>>();
  for (const { column, values } of columnLiterals) {
    const name = names.get(column.toLowerCase());
    if (name === undefined) continue;
    const listed = quotedListable(values);
    if (listed.length === 0) continue;
    const set = pooled.get(name) ?? new Set<string>();
    for (const l of listed) set.add(l);
    pooled.set(name, set);
  }
  if (pooled.size === 0) return [];
  const cmp = `(ows ("=" | "==" | "!=" | "<>") ows | ws (${sql.kw("NOT")} ws)? ${sql.kw("LIKE")} ws)`;
  const rules: string[] = [];
  const tails = new Map<string, string>();
  [...pooled].forEach(([name, values], i) => {
    rules.push(`compared-${i} ::= ${cmp} compared-${i}-string | in-op "(" ows compared-${i}-string (ows "," ows compared-${i}-string){0,9} ows ")"`);
    rules.push(`compared-${i}-string ::= "'" "%"? compared-${i}-value "%"? "'"`);
    rules.push(...nameRules(`compared-${i}-value`, [...values]));
    for (const spelling of identifierSpellings(name)) tails.set(spelling, `compared-${i}`);
  });
  // one tree over the columns' spellings, each followed by its own comparison: llama.cpp follows one stack per first character, not per column
  return [...trieRules("column-compared", [...tails.keys()], tails), ...rules];
}

/** SQLite's date and time functions, whose arguments may be modifiers. */
const DATE_FUNCTIONS = ["DATE", "TIME", "DATETIME", "JULIANDAY", "STRFTIME", "UNIXEPOCH"];

/** SQLite's date and time modifiers and time values that are one word. */
const DATE_KEYWORDS = ["now", "localtime", "utc", "unixepoch", "auto", "subsec", "julianday"];

/** The literals that can be listed, each with its quotes doubled as inside a SQL string. */
function quotedListable(literals: readonly string[]): string[] {
  return literals.filter(listable).map((l) => l.replace(/'/g, "''"));
}

/** Whether a literal can be listed: not empty, no `<` (a tag could start there), no control character but tab and newline. */
function listable(text: string): boolean {
  if (text.length === 0 || text.includes("<")) return false;
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if ((code < 0x20 && ch !== "\t" && ch !== "\n") || code === 0x7f) return false;
  }
  return true;
}

/** A flat alternation of up to 64 names (cheap enough, and readable), a radix tree beyond. */
function nameRules(name: string, words: string[]): string[] {
  return words.length <= 64 ? [`${name} ::= ${words.map(lit).join(" | ")}`] : trieRules(name, words);
}

function unique(names: string[]): string[] {
  return [...new Set(names)];
}

/** Bounds that keep a constrained segment finite (see {@link buildGrammar}). */
export interface GrammarBounds {
  /**
   * Length of one `<think>` block's text at most, in UTF-8 bytes (characters, for ASCII text).
   * Default {@link DEFAULT_MAX_THINK_BYTES}.
   */
  maxThinkBytes?: number;
  /**
   * The string literals the SQL may write (their text between the quotes), each also with a `%`
   * before and/or after it for LIKE, beside date-shaped text (digit groups, `%` patterns, strftime
   * formats) and, as a date function's argument only, date modifiers. Default: any text of up to 32 bytes.
   */
  literals?: readonly string[];
  /**
   * Further literals, each written only where it is compared with its column (`col = '…'`, `!=`,
   * `<>`, `LIKE`, `IN ('…', …)`, the column bare or qualified): a column's few stored values
   * (codes, categories), so that one column's value is not written against another. Used with
   * `literals` only. Default none.
   */
  columnLiterals?: readonly ColumnLiterals[];
}

/** One column's listed values ({@link GrammarBounds.columnLiterals}). */
export interface ColumnLiterals {
  column: string;
  values: readonly string[];
}

/** Options of {@link buildGrammar}. */
export interface GrammarOptions extends GrammarBounds {
  /** Which segment the grammar covers. Default "segment". */
  start?: GrammarStart;
  /** The tags the structure is written in (a model profile). Default {@link REEX_SKELETON}. */
  skeleton?: GrammarSkeleton;
  /** With start "final-from" / "probe-from": the table aliases the FROM list must declare at least (the SELECT list before it names T1..Tn). Default 0. */
  fromAliases?: number;
}

/**
 * Default cap on a `<think>` block's text, in UTF-8 bytes: the synthetic SFT traces' thinks (ASCII,
 * up to about 230 characters) fit. A byte never takes more than one token, so neither does the think.
 */
export const DEFAULT_MAX_THINK_BYTES = 256;

/**
 * The size budget of SQL at one nesting level. Every expression list (result columns, a WHERE,
 * function arguments, …) is an operand sequence with a budget: a plain operand (a column, a
 * literal, `*`, `COUNT(*)`), an output alias and a `COLLATE NOCASE` cost 1; a function call, CAST,
 * parenthesised list or IN list costs `call`, a CASE `case` and a subquery (IN's too) `query`.
 * The content of a call, a CAST, a list or a subquery is budgeted at the next level; a CASE's
 * expressions stay at its level but cannot hold another CASE.
 */
interface LevelBudget {
  /** Budgets of a SELECT's clauses at this level (`on`: each join condition). */
  select: number;
  where: number;
  on: number;
  group: number;
  having: number;
  order: number;
  /** Budget of the arguments, CAST operand or parenthesised list of a construct opened one level up. */
  args: number;
  /** Budget of each WHEN condition of a CASE at this level (its other expressions are single operands). */
  caseWhen: number;
  /** Cost of a function call, CAST or parenthesised list opened at this level; 0: none (the deepest level). */
  call: number;
  /** Cost of a CASE opened at this level; 0: none. */
  case: number;
  /** Cost of a subquery opened at this level; 0: none. */
  query: number;
  /** Tables of one FROM clause. */
  tables: number;
  /** Table aliases one SELECT may declare (T1..Tn, in FROM order). */
  aliases: number;
  /** Extra SELECTs joined by UNION / INTERSECT / EXCEPT. */
  compound: number;
  /** WHEN … THEN arms of a CASE opened at this level. */
  whens: number;
}

/**
 * Budgets per level, 0 being the statement. Generous enough for BIRD-style queries (four joined
 * tables, a WHERE of three or four conditions, `CAST(SUM(CASE WHEN … END) AS REAL) * 100 /
 * COUNT(…)`, a scalar or IN subquery; all SQL of the synthetic SFT traces, and the example
 * databases' gold SQL once its aliases are renamed T1..Tn, but for the few queries that alias a
 * nested SELECT's tables or reuse an output alias), small enough that a sampler which never
 * chooses to stop (the tiny random model) writes under 100 tokens of SQL at the median and about
 * 300 at most over hundreds of rollouts (bench/constrained.ts). The worst case the grammar allows
 * is far larger (budgets bound operands, not what each operand holds), so the token bound is a
 * measured one, not a proof.
 */
const LEVELS: readonly LevelBudget[] = [
  { select: 5, where: 8, on: 2, group: 2, having: 3, order: 2, args: 0, caseWhen: 3, call: 2, case: 3, query: 3, tables: 4, aliases: 4, compound: 1, whens: 2 },
  { select: 2, where: 4, on: 2, group: 1, having: 2, order: 1, args: 3, caseWhen: 3, call: 2, case: 3, query: 0, tables: 2, aliases: 0, compound: 0, whens: 1 },
  { select: 0, where: 0, on: 0, group: 0, having: 0, order: 0, args: 3, caseWhen: 3, call: 2, case: 3, query: 0, tables: 0, aliases: 0, compound: 0, whens: 1 },
  { select: 0, where: 0, on: 0, group: 0, having: 0, order: 0, args: 3, caseWhen: 0, call: 0, case: 0, query: 0, tables: 0, aliases: 0, compound: 0, whens: 0 },
];

/** Caps on literal and free text. */
const TEXT_CAPS = {
  /** UTF-8 bytes of a string literal's content. */
  stringBytes: 32,
  /** Characters of an output alias after AS. */
  aliasChars: 24,
  /** Digits of a number's integer or fractional part. */
  digits: 10,
  /** Digits of a LIMIT or OFFSET. */
  limitDigits: 6,
  /** UTF-8 bytes of an UNANSWERABLE reason. */
  reasonBytes: 96,
} as const;

/** The operand sequences: result columns, conditions (WHERE, ON, HAVING, CASE, CAST), lists, ORDER BY items. */
type SequenceKind = "sel" | "cond" | "part" | "list" | "ord";

/**
 * A GBNF grammar for one generate segment of a family: the tag structure plus a simplified SQLite
 * SELECT whose identifiers come from `schema`. Root rule "root". Default start "segment".
 *
 * Every sentence is finite and bounded: a think holds at most `maxThinkBytes` bytes, and SQL
 * is built from budgeted operand sequences over at most four nesting levels (see LEVELS), so even
 * a sampler that never picks a closing token (a random model) is walked to `</intermediate_sql>`
 * or `</final_sql>`; after that the grammar is complete and only end-of-turn may follow (the
 * rollout stops at the tag first).
 *
 * No accepted text holds a tag other than the segment's own: `<` inside a think, a string or an
 * alias, and a bare `<` operator, is never directly followed by a letter, `/` or `|`. So the stop
 * strings and the format check see exactly the structure the grammar built.
 *
 * Table aliases are bound: a statement-level SELECT either declares none or names its FROM tables
 * T1, T2, … Tn in order, and its expressions (subqueries included) may qualify columns with T1..Tn
 * only. A context-free grammar cannot know n while the result columns are written, so that SELECT
 * exists once per n (llama.cpp follows the candidates in parallel until the FROM clause settles
 * it). Nested SELECTs declare no aliases of their own.
 */
export function buildGrammar(schema: SchemaNames, family: PromptFamily, options: GrammarOptions = {}): string {
  const start = options.start ?? "segment";
  const maxThink = options.maxThinkBytes ?? DEFAULT_MAX_THINK_BYTES;
  if (!Number.isInteger(maxThink) || maxThink < 0) throw new RangeError(`maxThinkBytes must be a non-negative integer, got ${maxThink}`);
  const skeleton = options.skeleton ?? REEX_SKELETON;
  const rules: string[] = [rootRule(skeleton, family, start)];
  const sql = new SqlRules(rules, options.literals !== undefined);
  rules.push(...tokenRules(schema, skeleton, maxThink, sql, options.literals));
  const compared = options.literals !== undefined ? columnLiteralRules(schema, options.columnLiterals ?? [], sql) : [];
  rules.push(...compared);
  const maxAliases = Math.min(LEVELS[0]!.aliases, TABLE_ALIASES.length);
  for (let v = 0; v <= maxAliases; v++) {
    rules.push(
      `qual-${v} ::= table${TABLE_ALIASES.slice(0, v)
        .map((a) => ` | ${lit(a)}`)
        .join("")}`,
    );
    rules.push(`column-ref-${v} ::= (qual-${v} ".")? column`);
    rules.push(`leaf-${v} ::= prefix? (literal | column-ref-${v} | count-star${compared.length > 0 ? ` | (qual-${v} ".")? column-compared` : ""})`);
  }

  if (start === "final-from" || start === "probe-from") sql.fromRest(options.fromAliases ?? 0);
  sql.finish();
  return rules.join("\n") + "\n";
}

/** The root rule: which of think, probe and answer a segment of `family` holds, from where `start` begins. */
function rootRule(skeleton: GrammarSkeleton, family: PromptFamily, start: NonNullable<GrammarOptions["start"]>): string {
  // a family the skeleton cannot write falls back to the nearest it can: no probe tag, no probes; no think tag, no think
  const shape = family === "execution-aware" && !skeleton.probe ? "standard" : family;
  const effective = shape === "standard" && !skeleton.think ? "direct" : shape;
  if (start === "final-body") return `root ::= final-body ${lit(skeleton.answer.close)}`;
  if (start === "final-from") return `root ::= from-rest ows (";" ows)? ${lit(skeleton.answer.close)}`;
  if (start === "probe-from") return `root ::= from-rest ows (";" ows)? ${lit((skeleton.probe ?? REEX_SKELETON.probe!).close)}`;
  if (effective === "direct") return "root ::= ows final";
  if (effective === "standard") return "root ::= ows think ows final";
  if (start === "first") return "root ::= ows think ows (probe | final)";
  return "root ::= ows (think ows)? (probe | final)";
}

/** The tag structure and the SQL tokens: thinks, probes, answers, operators, literals, and the schema's table and column names. */
function tokenRules(schema: SchemaNames, skeleton: GrammarSkeleton, maxThink: number, sql: SqlRules, literals?: readonly string[]): string[] {
  const tables = unique(schema.tables.map((t) => t.name));
  const columns = unique(schema.tables.flatMap((t) => t.columns));
  const think = skeleton.think ?? REEX_SKELETON.think!;
  const probe = skeleton.probe ?? REEX_SKELETON.probe!;
  // Free text is printable (tab and newline allowed in thinks): "<" only before a character that
  // cannot start a tag, an end tag or a special token, so no stop string or tag can start inside it.
  const ltFollow = "\\x20-\\x2E\\x30-\\x3B\\x3D-\\x40\\x5B-\\x60\\x7B\\x7D\\x7E";
  return [
    `think ::= ${lit(think.open)} ${maxThink > 0 ? "think-text?" : ""} ${lit(think.close)}`,
    ...byteBounded("think-text", maxThink, [
      ["[\\t\\n\\x20-\\x3B\\x3D-\\x7E]", 1],
      [`"<" [${ltFollow}]`, 2],
    ]),
    `probe ::= ${lit(probe.open)} ows statement ows (";" ows)? ${lit(probe.close)}`,
    `final ::= ${lit(skeleton.answer.open)} final-body ${lit(skeleton.answer.close)}`,
    `final-body ::= ows (statement ows (";" ows)?${skeleton.unanswerable === false ? "" : " | unanswerable"})`,
    `unanswerable ::= (${lit(UNANSWERABLE_MARKER)} | ${lit(UNANSWERABLE_MARKER.toLowerCase())}) ":" reason?`,
    ...byteBounded("reason", TEXT_CAPS.reasonBytes, [
      ["[\\x20-\\x3B\\x3D-\\x7E]", 1],
      [`"<" [${ltFollow}]`, 2],
    ]),
    `compound-op ::= ${sql.kw("UNION")} (ws ${sql.kw("ALL")})? | ${sql.kw("INTERSECT")} | ${sql.kw("EXCEPT")}`,
    `out-alias ::= [A-Za-z_] [A-Za-z0-9_]{0,${TEXT_CAPS.aliasChars - 1}} | "\\"" [\\x20\\x21\\x23-\\x3B\\x3D-\\x7E]{1,${TEXT_CAPS.aliasChars}} "\\""`,
    `join-sep ::= ows "," ows | ws ((${sql.kw("INNER")} | ${sql.kw("LEFT")} (ws ${sql.kw("OUTER")})? | ${sql.kw("CROSS")}) ws)? ${sql.kw("JOIN")} ws`,
    // a bare "<" is followed by whitespace (or, in a sequence, directly by a number or a string)
    `op ::= ows ("=" | "==" | "!=" | "<>" | "<=" | ">" | ">=" | "+" | "-" | "*" | "/" | "%" | "||") ows | ows "<" ws | ws word-op ws`,
    `word-op ::= ${sql.kw("AND")} | ${sql.kw("OR")} | ${sql.kw("IS")} (ws ${sql.kw("NOT")})? | (${sql.kw("NOT")} ws)? (${sql.kw("LIKE")} | ${sql.kw("GLOB")})`,
    // IN takes a parenthesised list or subquery (SQLite reads a bare name after IN as a table), BETWEEN two operands
    `in-op ::= ws (${sql.kw("NOT")} ws)? ${sql.kw("IN")} ows`,
    `between-op ::= ws (${sql.kw("NOT")} ws)? ${sql.kw("BETWEEN")} ws`,
    `direction ::= ${sql.kw("ASC")} | ${sql.kw("DESC")}`,
    `prefix ::= ${sql.kw("NOT")} ws | "-" ows`,
    `collate ::= ws ${sql.kw("COLLATE")} ws ${sql.kw("NOCASE")}`,
    `count-star ::= ${sql.kw("COUNT")} ows "(" ows "*" ows ")"`,
    ...trieRules(
      "func-1",
      SQL_FUNCTIONS.filter((f) => UNARY_FUNCTIONS.has(f)).flatMap((f) => [f, f.toLowerCase()]),
    ),
    ...trieRules(
      "func-n",
      SQL_FUNCTIONS.filter((f) => !UNARY_FUNCTIONS.has(f)).flatMap((f) => [f, f.toLowerCase()]),
    ),
    ...trieRules(
      "type-name",
      SQL_TYPE_NAMES.flatMap((t) => [t, t.toLowerCase()]),
    ),
    `limit ::= ${sql.kw("LIMIT")} ws integer ((ws ${sql.kw("OFFSET")} ws | ows "," ows) integer)?`,
    `literal ::= number | string | ${sql.kw("NULL")}`,
    `number ::= [0-9]{1,${TEXT_CAPS.digits}} ("." [0-9]{0,${TEXT_CAPS.digits}})? | "." [0-9]{1,${TEXT_CAPS.digits}}`,
    `integer ::= [0-9]{1,${TEXT_CAPS.limitDigits}}`,
    ...(literals === undefined
      ? [
          `string ::= "'" string-text? "'"`,
          ...byteBounded("string-text", TEXT_CAPS.stringBytes, [
            ["[\\t\\n\\x20-\\x26\\x28-\\x3B\\x3D-\\x7E]", 1],
            [`"''"`, 2],
            [`"<" [${ltFollow.replace("\\x20-\\x2E", "\\x20-\\x26\\x28-\\x2E")}]`, 2],
          ]),
        ]
      : literalRules(literals)),
    ...nameRules("table", tables.length ? tables.flatMap(identifierSpellings) : ["sqlite_master"]),
    ...nameRules("column", columns.length ? columns.flatMap(identifierSpellings) : ["rowid"]),
    // one space or tab, or a line break with indentation
    `ws ::= " " | "\\n" [ \\t]{0,8}`,
    `ows ::= ws?`,
  ];
}

/**
 * The SQL rules of one grammar, generated on demand: `-d-` in a rule name is the nesting level (0:
 * the statement), `-v-` the number of visible table aliases, `-r` the budget left in an operand
 * sequence. Rules and keywords are appended to the grammar's `rules` in the order they are first needed.
 */
class SqlRules {
  /** Every keyword a rule used; each gets a rule matching it in upper or lower case. */
  private readonly keywords = new Set<string>();
  private readonly defined = new Set<string>();
  private readonly pending: (() => void)[] = [];

  /** `modifiers`: the grammar lists its literals, so date modifiers are written only as date function arguments. */
  constructor(
    private readonly rules: string[],
    private readonly modifiers: boolean,
  ) {}

  /** The rule names of `words`, joined by whitespace (each word gets its own rule). */
  kw(...words: string[]): string {
    return words
      .map((w) => {
        this.keywords.add(w);
        return ruleName(w);
      })
      .join(" ws ");
  }

  /** Adds the statement rule and every rule it needs, then one rule per keyword. */
  finish(): void {
    this.rules.push(`statement ::= ${this.query(0, 0)}`);
    while (this.pending.length > 0) this.pending.shift()!();
    for (const word of [...this.keywords].sort()) this.rules.push(`${ruleName(word)} ::= ${lit(word)} | ${lit(word.toLowerCase())}`);
  }

  /** `name`, whose rule `define` gives; defined once, after the rules already queued. */
  private need(name: string, define: () => string): string {
    if (!this.defined.has(name)) {
      this.defined.add(name);
      this.pending.push(() => this.rules.push(`${name} ::= ${define()}`));
    }
    return name;
  }

  private level(d: number): LevelBudget {
    return LEVELS[d]!;
  }

  /** An operand sequence of `kind` at level d with budget r (≥ 1); `kind` "part" is a CASE's expression (no CASE inside). */
  private seq(kind: SequenceKind, d: number, v: number, r: number): string {
    return this.need(`s-${kind}-${d}-${v}-${r}`, () => {
      const { call, case: caseCost, query } = this.level(d);
      const then = (left: number): string => {
        const next = this.after(kind, d, v, left);
        return next ? ` ${next}?` : "";
      };
      const alternatives = [`leaf-${v}${then(r - 1)}`];
      if (kind === "sel") alternatives.push(`("*" | qual-${v} "." "*")${r > 1 ? ` (ows "," ows ${this.seq(kind, d, v, r - 1)})?` : ""}`);
      if (call > 0 && r >= call) alternatives.push(`${this.construct(d, v)}${then(r - call)}`);
      if (caseCost > 0 && r >= caseCost && kind !== "part") alternatives.push(`${this.caseExpr(d, v)}${then(r - caseCost)}`);
      if (query > 0 && r >= query) alternatives.push(`${this.subquery(d, v)}${then(r - query)}`);
      return alternatives.join(" | ");
    });
  }

  /** What may follow an operand of a sequence with budget r left; "" when nothing may. */
  private after(kind: SequenceKind, d: number, v: number, r: number): string {
    if (r === 0 && kind !== "ord") return "";
    return this.need(`a-${kind}-${d}-${v}-${r}`, () => {
      const more = r > 0 ? this.seq(kind, d, v, r) : "";
      const alternatives: string[] = [];
      if (more) alternatives.push(`op ${more}`);
      const { call, query: queryCost } = this.level(d);
      if (call > 0 && r >= call) {
        const tail = this.after(kind, d, v, r - call);
        alternatives.push(`in-op ${this.inList(d, v)}${tail ? ` ${tail}?` : ""}`);
      }
      if (queryCost > 0 && r >= queryCost) {
        const tail = this.after(kind, d, v, r - queryCost);
        alternatives.push(`in-op "(" ows ${this.query(d + 1, v)} ows ")"${tail ? ` ${tail}?` : ""}`);
      }
      if (r >= 2) alternatives.push(`between-op ${this.between(kind, d, v, r)}`);
      if ((kind === "cond" || kind === "part") && r > 0) {
        // "COLLATE NOCASE" and a "<" glued to its literal take one unit of the budget
        const tail = this.after(kind, d, v, r - 1);
        alternatives.push(`ows "<" (number | string)${tail ? ` ${tail}?` : ""}`, `collate${tail ? ` ${tail}?` : ""}`);
      }
      if ((kind === "list" || kind === "sel") && more) alternatives.push(`ows "," ows ${more}`);
      // an output alias takes one unit of the budget
      if (kind === "sel" && r > 0) alternatives.push(`ws ${this.kw("AS")} ws out-alias${r > 1 ? ` (ows "," ows ${this.seq(kind, d, v, r - 1)})?` : ""}`);
      if (kind === "ord") {
        if (more) alternatives.push(`(ws direction)? ows "," ows ${more}`);
        alternatives.push("ws direction");
      }
      return alternatives.join(" | ");
    });
  }

  /** The list after IN at level d: its items at d + 1. */
  private inList(d: number, v: number): string {
    return this.need(`in-list-${d}-${v}`, () => `"(" ows ${this.seq("list", d + 1, v, this.level(d + 1).args)} ows ")"`);
  }

  /** `a AND b` after BETWEEN, then the rest of the sequence (b and what follows it), budget r ≥ 2 for both. */
  private between(kind: SequenceKind, d: number, v: number, r: number): string {
    return this.need(`between-${kind}-${d}-${v}-${r}`, () => {
      const and = `ws ${this.kw("AND")} ws`;
      const alternatives = [`leaf-${v} ${and} ${this.seq(kind, d, v, r - 1)}`];
      const { call } = this.level(d);
      if (call > 0 && r - call >= 1) alternatives.push(`${this.construct(d, v)} ${and} ${this.seq(kind, d, v, r - call)}`);
      return alternatives.join(" | ");
    });
  }

  /** A function call, CAST or parenthesised list opened at level d (content at d + 1). */
  private construct(d: number, v: number): string {
    return this.need(`construct-${d}-${v}`, () => {
      const inner = this.level(d + 1);
      const args = this.seq("list", d + 1, v, inner.args);
      const operand = this.seq("cond", d + 1, v, inner.args);
      const alternatives = [
        `func-1 ows "(" ows (${this.kw("DISTINCT")} ws)? ${operand} ows ")"`,
        `func-n ows "(" ows (${this.kw("DISTINCT")} ws)? ${args} ows ")"`,
        `${this.kw("CAST")} ows "(" ows ${operand} ws ${this.kw("AS")} ws type-name ows ")"`,
        `"(" ows ${args} ows ")"`,
      ];
      if (this.modifiers) alternatives.push(`date-func ows "(" ows (modifier-string | ${args}) (ows "," ows modifier-string){0,4} ows ")"`);
      return `prefix? (${alternatives.join(" | ")})`;
    });
  }

  /**
   * A CASE at level d: its expressions stay at the same level and hold no CASE; a WHEN condition
   * has its own budget, the operand after CASE, THEN and ELSE is a single plain operand.
   */
  private caseExpr(d: number, v: number): string {
    return this.need(`case-${d}-${v}`, () => {
      const when = this.seq("part", d, v, this.level(d).caseWhen);
      const value = `leaf-${v}`;
      const arm = `ws ${this.kw("WHEN")} ws ${when} ws ${this.kw("THEN")} ws ${value}`;
      const whens = this.level(d).whens;
      return `${this.kw("CASE")} (ws ${value})? ${arm}${whens > 1 ? ` (${arm}){0,${whens - 1}}` : ""} (ws ${this.kw("ELSE")} ws ${value})? ws ${this.kw("END")}`;
    });
  }

  /** A subquery opened at level d: a SELECT at level d + 1 that sees the same aliases. */
  private subquery(d: number, v: number): string {
    return this.need(`subquery-${d}-${v}`, () => `(${this.kw("NOT")} ws)? (${this.kw("EXISTS")} ows)? "(" ows ${this.query(d + 1, v)} ows ")"`);
  }

  /** A whole SELECT statement at level d with v outer aliases visible. */
  private query(d: number, v: number): string {
    return this.need(`query-${d}-${v}`, () => {
      const b = this.level(d);
      const alternatives: string[] = [];
      for (let n = 0; n <= b.aliases; n++) {
        const order = b.order > 0 ? ` (ws ${this.kw("ORDER", "BY")} ws ${this.seq("ord", d, Math.max(v, n), b.order)})?` : "";
        alternatives.push(`${this.core(d, v, n, false)}${order}`);
      }
      if (b.compound > 0) {
        // the SELECTs of a compound are budgeted like the next level's (there are two or more)
        const any = this.need(`core-any-${d}-${v}`, () => Array.from({ length: b.aliases + 1 }, (_, n) => this.core(d, v, n, true)).join(" | "));
        alternatives.push(`${any} (ws compound-op ws ${any}){1,${b.compound}}`);
      }
      return `(${alternatives.join(" | ")}) (ws limit)?`;
    });
  }

  /** One SELECT at level d, v outer aliases visible, declaring n aliases (0: none); `part` of a compound. */
  private core(d: number, v: number, n: number, part: boolean): string {
    return this.need(`core-${d}-${v}-${n}${part ? "-part" : ""}`, () => {
      const b = part ? { ...this.level(d), ...pick(this.level(d + 1), "select", "where", "on", "group", "having") } : this.level(d);
      const { tables, clauses } = this.fromOn(d, v, n, b);
      const select = `${this.kw("SELECT")} (ws ${this.kw("DISTINCT")})? ws ${this.seq("sel", d, Math.max(v, n), b.select)}`;
      const from = n === 0 ? `(ws ${this.kw("FROM")} ws ${tables})?` : `ws ${this.kw("FROM")} ws ${tables}`;
      return [select, from, ...clauses].join(" ");
    });
  }

  /** A SELECT's table list (after FROM) and the clauses after it (WHERE, GROUP BY with HAVING), budgeted by `b`. */
  private fromOn(d: number, v: number, n: number, b: LevelBudget): { tables: string; clauses: string[] } {
    const seen = Math.max(v, n);
    const on = b.on > 0 ? ` (ws ${this.kw("ON")} ws ${this.seq("cond", d, seen, b.on)})?` : "";
    // a derived table (statement level, first table only) is not correlated: it sees no aliases
    const first = d === 0 && b.query > 0 ? this.need(`derived-${d}`, () => `table | "(" ows ${this.query(d + 1, 0)} ows ")"`) : "table";
    const alias = (i: number): string => ` ws (${this.kw("AS")} ws)? ${lit(TABLE_ALIASES[i]!)}`;
    const tables =
      n === 0
        ? `${first}${b.tables > 1 ? ` (join-sep table${on}){0,${b.tables - 1}}` : ""}`
        : Array.from({ length: n }, (_, i) => (i === 0 ? `${first}${alias(0)}` : `join-sep table${alias(i)}${on}`)).join(" ");
    const clauses: string[] = [];
    if (b.where > 0) clauses.push(`(ws ${this.kw("WHERE")} ws ${this.seq("cond", d, seen, b.where)})?`);
    if (b.group > 0) {
      const having = b.having > 0 ? ` (ws ${this.kw("HAVING")} ws ${this.seq("cond", d, seen, b.having)})?` : "";
      clauses.push(`(ws ${this.kw("GROUP", "BY")} ws ${this.seq("list", d, seen, b.group)}${having})?`);
    }
    return { tables, clauses };
  }

  /**
   * What follows the statement's first FROM (its table list, the clauses, ORDER BY or a compound's
   * other SELECTs, LIMIT): the rest of a statement whose FROM list is drawn again (see "final-from").
   */
  fromRest(aliases: number): string {
    this.rules.push("from-rest ::= from-rest-after");
    return this.need("from-rest-after", () => {
      const b = this.level(0);
      const alternatives: string[] = [];
      for (let n = Math.min(Math.max(0, aliases), b.aliases); n <= b.aliases; n++) {
        const { tables, clauses } = this.fromOn(0, 0, n, b);
        const head = [`ws ${tables}`, ...clauses].join(" ");
        const order = b.order > 0 ? ` (ws ${this.kw("ORDER", "BY")} ws ${this.seq("ord", 0, n, b.order)})?` : "";
        const any =
          b.compound > 0 ? this.need("core-any-0-0", () => Array.from({ length: b.aliases + 1 }, (_, k) => this.core(0, 0, k, true)).join(" | ")) : "";
        alternatives.push(`${head}${order}`);
        if (any) alternatives.push(`${head} (ws compound-op ws ${any}){1,${b.compound}}`);
      }
      return `(${alternatives.join(" | ")}) (ws limit)?`;
    });
  }
}

function pick<T extends object, K extends keyof T>(source: T, ...keys: K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const key of keys) out[key] = source[key];
  return out;
}

/** The three segment grammars of a family for a constrained rollout (`RolloutOptions.grammar`). */
export function buildSegmentGrammars(schema: SchemaNames, family: PromptFamily, bounds: GrammarBounds & { skeleton?: GrammarSkeleton } = {}): SegmentGrammars {
  const fromRest: Record<string, string> = {};
  return {
    first: buildGrammar(schema, family, { ...bounds, start: "first" }),
    segment: buildGrammar(schema, family, { ...bounds, start: "segment" }),
    finalBody: buildGrammar(schema, family, { ...bounds, start: "final-body" }),
    fromRest: (closing, aliases) =>
      (fromRest[`${closing}-${aliases}`] ??= buildGrammar(schema, family, {
        ...bounds,
        start: closing === "final" ? "final-from" : "probe-from",
        fromAliases: aliases,
      })),
  };
}

/** `t` is the word `w` (given in upper case), in any case. */
export const isWord = (t: SqlToken | undefined, w: string): boolean => !!t && t.kind === "word" && t.upper === w;

const NOT_NAMES = new Set([...SQLITE_KEYWORDS, "TRUE", "FALSE"]);

/** `t` can name a table, column or alias: a quoted name, or a word that is no reserved keyword (nor TRUE/FALSE); a function's name counts (a table may have a `total`), so callers look for a following "(". */
export const isName = (t: SqlToken | undefined): t is SqlToken => !!t && (t.kind === "quoted" || (t.kind === "word" && !NOT_NAMES.has(t.upper)));

/** `t` is a whole single-quoted string literal (its `value` is the string). */
export const isString = (t: SqlToken | undefined): t is SqlToken => !!t && t.kind === "string" && !t.unterminated;

/** `s` as a SQL string literal, its quotes doubled. */
export const quoteString = (s: string): string => `'${s.replace(/'/g, "''")}'`;

/** The identifiers of `sql` (words that are not keywords or functions, and quoted names; string literals and comments skipped), lowercased, in order. */
export function identifiersIn(sql: string): string[] {
  return lexSql(sql)
    .filter((t) => t.kind === "quoted" || (t.kind === "word" && !KEYWORD_LIKE.has(t.upper)))
    .map((t) => t.value.toLowerCase());
}

/**
 * Identifiers in `sql` that are neither the schema's tables or columns nor aliases the query
 * defines (AS names, table aliases, CTE names); case-insensitive, in order of first appearance.
 */
export function checkIdentifiers(sql: string, schema: SchemaNames): string[] {
  const toks = lexSql(sql);
  const tables = new Set(schema.tables.map((t) => t.name.toLowerCase()));
  const columns = new Set(schema.tables.flatMap((t) => t.columns.map((c) => c.toLowerCase())));
  const isIdent = (t: SqlToken | undefined): t is SqlToken => !!t && (t.kind === "quoted" || (t.kind === "word" && !KEYWORD_LIKE.has(t.upper)));

  const aliases = new Set<string>();
  toks.forEach((t, i) => {
    const next = toks[i + 1];
    if (isWord(t, "AS") && isIdent(next)) aliases.add(next.value.toLowerCase());
    if (isIdent(t) && isWord(next, "AS") && toks[i + 2]?.text === "(") aliases.add(t.value.toLowerCase());
    const prev = toks[i - 1];
    const afterTable = prev && ((isIdent(prev) && tables.has(prev.value.toLowerCase())) || prev.text === ")");
    if (afterTable && isIdent(t) && toks[i - 2]?.text !== "." && !tables.has(t.value.toLowerCase()) && next?.text !== "(") {
      aliases.add(t.value.toLowerCase());
    }
  });

  const unknown: string[] = [];
  const seen = new Set<string>();
  toks.forEach((t, i) => {
    if (!isIdent(t)) return;
    const key = t.value.toLowerCase();
    const next = toks[i + 1];
    if (t.kind === "word" && next?.text === "(") return;
    let ok: boolean;
    if (next?.text === ".") ok = tables.has(key) || aliases.has(key);
    else if (toks[i - 1]?.text === ".") ok = columns.has(key);
    else ok = columns.has(key) || tables.has(key) || aliases.has(key);
    if (!ok && !seen.has(key)) {
      seen.add(key);
      unknown.push(t.value);
    }
  });
  return unknown;
}

/**
 * Name binding, PICARD-style: an incremental check that a partial SQL text can still become a
 * query whose names bind, run by the decoder on each token it draws inside SQL (a token that fails
 * it is drawn again without it) and on whole SQL after generation.
 *
 * SQL names columns before FROM, so the check decides in both orders: a column written before its
 * SELECT's FROM is remembered, and the FROM list is then held to tables that bind it (the first
 * table must hold one of those columns when any is left, every table must leave the rest coverable
 * by the tables still allowed, and the clause cannot end while one is unbound); a column written
 * after FROM (WHERE, ON, GROUP BY, HAVING, ORDER BY) must belong to a table in scope: its SELECT's
 * FROM list, then the enclosing SELECTs' (correlated subqueries); `T1.col` must name a bound alias
 * (before FROM: the table in the alias's FROM position must hold it) whose table has `col`; output
 * aliases (`AS n`) may be named after their SELECT list. A partial name at the end of the text must
 * be the start of a name that binds there (or of a keyword or function). A FROM holding a derived
 * table leaves its SELECT unchecked (its columns are the subquery's outputs).
 *
 * Pure and schema-only: the grammar keeps the syntax and the names inside the schema; this only
 * judges which of the schema's names can go where.
 */
import { REEX_SKELETON, type GrammarSkeleton, type GrammarStart, type SchemaNames } from "./grammar-types.js";
import { indexOfTag } from "./parse.js";
import { COMPOUND_WORDS, FROM_ENDS, JOIN_WORDS, KEYWORD_LIKE, lexSql, SQLITE_KEYWORDS, type SqlToken } from "../sql/index.js";

/** Whether `text` holds a control character other than tab, newline and carriage return. */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) || c === 0x7f) return true;
  }
  return false;
}

/** Tables one FROM list may hold (the grammar's statement-level bound). */
const MAX_TABLES = 4;

/** Words that may follow a table in a FROM list without ending it. */
const FROM_CONTINUES = [...JOIN_WORDS, "ON", "AS", "USING", "T1", "T2", "T3", "T4"];

/** Words that end a FROM list. */
const CLAUSE_ENDS: ReadonlySet<string> = new Set([...FROM_ENDS, ...COMPOUND_WORDS]);

type LexKind = "word" | "quoted" | "string" | "number" | "punct" | "op" | "end";
interface Lex {
  kind: LexKind;
  /** A word's or quoted name's text (unquoted), a punctuation's character. */
  text: string;
  /** Runs to the end of the text: the model may still be writing it. */
  partial: boolean;
  /** The offset just past it in the text. */
  end: number;
}

/**
 * Lexemes of SQL text (the SQL lexer's tokens) up to its end or a `</` outside a string or quoted
 * name (a closing tag); a `<` at the very end may be a closing tag's start. Comments are skipped.
 */
function lex(sql: string, complete: boolean): Lex[] {
  const out: Lex[] = [];
  for (const t of lexSql(sql, { comments: true })) {
    if (t.kind === "op" || t.kind === "comment") {
      const close = closingTag(sql, t);
      if (close !== undefined) {
        out.push({ kind: "end", text: close < 0 ? "<" : "</", partial: !complete && close < 0, end: close < 0 ? sql.length : close + 2 });
        break;
      }
      if (t.kind === "comment") continue;
    }
    const atEnd = !complete && t.end === sql.length;
    if (t.kind === "word") out.push({ kind: "word", text: t.value, partial: atEnd, end: t.end });
    else if (t.kind === "quoted") out.push({ kind: "quoted", text: t.value, partial: !complete && t.unterminated, end: t.end });
    else if (t.kind === "string" || t.kind === "blob") out.push({ kind: "string", text: t.text, partial: !complete && t.unterminated, end: t.end });
    else if (t.kind === "number") out.push({ kind: "number", text: t.text, partial: atEnd, end: t.end });
    else if (t.kind === "punct" || t.text === "*") out.push({ kind: "punct", text: t.text, partial: false, end: t.end });
    else out.push({ kind: "op", text: t.text, partial: false, end: t.end });
  }
  return out;
}

/** Where a `</` starts in an operator or comment token (the `/` may begin the next token), -1 for a `<` that ends the text, else undefined. */
function closingTag(sql: string, t: SqlToken): number | undefined {
  for (let at = t.text.indexOf("<"); at >= 0; at = t.text.indexOf("<", at + 1)) {
    const offset = t.start + at;
    if (sql[offset + 1] === "/") return offset;
    if (offset === sql.length - 1) return -1;
  }
  return undefined;
}

interface Table {
  name: string;
  columns: Set<string>;
}

interface FromEntry {
  /** Undefined for a derived table. */
  table?: Table;
  alias?: string;
}

interface Scope {
  parent?: Scope;
  phase: "select" | "from" | "after";
  from: FromEntry[];
  /** Unqualified columns named before FROM. */
  pending: Set<string>;
  /** Columns named as `Tn.col` before FROM, by alias. */
  qualified: Map<string, Set<string>>;
  /** Columns named as `table.col` before FROM, by table. */
  byTable: Map<string, Set<string>>;
  outputs: Set<string>;
  /** A derived table is in FROM: columns are not checked. */
  open: boolean;
  /** In FROM: a table reference comes next. */
  expectTable: boolean;
}

type Frame = { kind: "group" } | { kind: "select"; scope: Scope };

const newScope = (parent?: Scope): Scope => ({
  ...(parent ? { parent } : {}),
  phase: "select",
  from: [],
  pending: new Set(),
  qualified: new Map(),
  byTable: new Map(),
  outputs: new Set(),
  open: false,
  expectTable: false,
});

class Refused extends Error {}

/**
 * What a binding checks: "full" binds every column to its SELECT's scope; "from" binds the FROM list
 * to the columns named before it (and aliases as bound) but lets a column after FROM name any
 * table's column, so that a FROM table the model chose before it wrote the columns that show it was
 * the wrong one can still be rebound after generation (`agent.repairTables`).
 */
export type BindingMode = "full" | "from";

/** Where a whole SQL's FROM list is drawn again, and what it must then bind (see {@link NameBinding.rebind}). */
export interface Rebinding {
  /** The offset just past the statement's first FROM keyword. */
  at: number;
  /** The columns named in that FROM list's ON conditions and after it (lower case): the list drawn again must hold them all. */
  columns: string[];
  /** The `Tn.col` named there (lower case): Tn's table drawn again must hold `col`. */
  qualified: { alias: string; column: string }[];
  /** The highest n of the aliases T1..Tn named before that FROM (0: none): the list drawn again declares at least n. */
  aliases: number;
}

/** What a {@link NameBinding.rebind} walk gathers about the statement's first SELECT. */
interface Gathered {
  scope?: Scope;
  /** Just past its FROM keyword. */
  at?: number;
  /** Named after its FROM list. */
  columns: Set<string>;
  qualified: Map<string, Set<string>>;
  /** Named in its FROM list's ON conditions. */
  on: { columns: Set<string>; qualified: Map<string, Set<string>> };
  /** A name after or inside (an ON condition) its FROM list does not bind. */
  unbound: boolean;
}

/** The binding check of one schema (see the module doc). */
export class NameBinding {
  /** What {@link admits} checks. Default "full". */
  readonly mode: BindingMode = "full";
  /** What the statement's first FROM list must bind as if named before it, its ON conditions held to its tables (see {@link requiring}). Default none. */
  private readonly required?: Pick<Rebinding, "columns" | "qualified">;
  private readonly gathered?: Gathered;

  private readonly tables: Table[];
  private readonly byName = new Map<string, Table>();
  private readonly columns = new Set<string>();
  private readonly keywords: string[];

  constructor(
    schema: SchemaNames,
    private readonly skeleton: GrammarSkeleton = REEX_SKELETON,
  ) {
    this.tables = schema.tables.map((t) => ({ name: t.name.toLowerCase(), columns: new Set(t.columns.map((c) => c.toLowerCase())) }));
    for (const t of this.tables) {
      if (!this.byName.has(t.name)) this.byName.set(t.name, t);
      for (const c of t.columns) this.columns.add(c);
    }
    this.keywords = [...KEYWORD_LIKE].map((k) => k.toLowerCase());
  }

  /**
   * Whether a generate segment's text so far (from the segment's start) can still be completed
   * into SQL whose names bind; text outside a probe or the answer always can.
   */
  admits(text: string, start: GrammarStart = "segment"): boolean {
    const sql = this.sqlOf(text, start);
    return sql === undefined || this.problem(sql, false) === undefined;
  }

  /** Whether {@link admits} could refuse a token after this text: it is inside a probe or the answer. */
  watches(text: string, start: GrammarStart = "segment"): boolean {
    return this.sqlOf(text, start) !== undefined;
  }

  /** Why a whole SQL's names do not bind (the first problem, in "full" mode whatever this binding's), or undefined when they do. */
  check(sql: string): string | undefined {
    return this.withMode("full").problem(sql, true);
  }

  /** This binding with another mode (the schema's tables shared). */
  withMode(mode: BindingMode): NameBinding {
    if (mode === this.mode) return this;
    return this.with({ mode });
  }

  /**
   * Where to draw a whole SQL's FROM list again so that its names bind, when a column named after
   * its statement's first FROM list (bare, or `Tn.col`), or in the list's ON conditions, is in none
   * of its tables but in the schema: just past that FROM, with every column named in those ON
   * conditions and after the list, which the list drawn again must hold. Undefined when the SQL binds, when something else does
   * not (a subquery's or a later compound SELECT's name, the SELECT list), or when no tables could
   * hold them all.
   */
  rebind(sql: string): Rebinding | undefined {
    const gathered: Gathered = { columns: new Set(), qualified: new Map(), on: { columns: new Set(), qualified: new Map() }, unbound: false };
    if (this.with({ mode: "full", gathered }).problem(sql, true) !== undefined) return undefined;
    const { scope, at, unbound } = gathered;
    if (!scope || at === undefined || !unbound) return undefined;
    const fits = (columns: Set<string>, qualified: Map<string, Set<string>>): boolean =>
      this.coverable([...new Set([...scope.pending, ...columns])], MAX_TABLES) &&
      [...qualified].every(([alias, cols]) => {
        const all = [...cols, ...(scope.qualified.get(alias) ?? [])];
        return this.tables.some((t) => all.every((c) => t.columns.has(c)));
      });
    // the ON conditions' names too where tables can hold them all (they say which tables were meant), else only what follows the list
    const columns = new Set([...gathered.columns, ...gathered.on.columns]);
    const qualified = new Map([...gathered.qualified].map(([a, cols]) => [a, new Set(cols)]));
    for (const [alias, cols] of gathered.on.qualified) for (const c of cols) add(qualified, alias, c);
    const names = fits(columns, qualified) ? { columns, qualified } : fits(gathered.columns, gathered.qualified) ? gathered : undefined;
    if (!names) return undefined;
    const toks = lexSql(sql);
    const named = toks.filter((t, i) => t.end <= at && t.kind === "word" && /^t[1-4]$/i.test(t.text) && toks[i + 1]?.text === ".");
    const aliases = Math.max(0, ...named.map((t) => Number(t.text.slice(1))));
    return {
      at,
      aliases,
      columns: [...names.columns],
      qualified: [...names.qualified].flatMap(([alias, cols]) => [...cols].map((column) => ({ alias, column }))),
    };
  }

  /**
   * This binding with a {@link rebind}'s names also held to the statement's first FROM list, as if
   * named before it, and that list's ON conditions held to its tables: a FROM list drawn again.
   */
  requiring(names: Pick<Rebinding, "columns" | "qualified">): NameBinding {
    const low = (s: string): string => s.toLowerCase();
    return this.with({
      required: {
        columns: [...(this.required?.columns ?? []), ...names.columns.map(low)],
        qualified: [...(this.required?.qualified ?? []), ...names.qualified.map((q) => ({ alias: low(q.alias), column: low(q.column) }))],
      },
    });
  }

  private with(fields: Partial<Pick<NameBinding, "mode">> & { required?: NameBinding["required"]; gathered?: Gathered }): NameBinding {
    return Object.assign(Object.create(NameBinding.prototype) as NameBinding, this, fields);
  }

  /** In a {@link rebind} walk, notes a column of the statement's first SELECT named in its ON conditions or after its FROM list (`alias`: as `alias.column`). */
  private gather(s: Scope, column: string, alias?: string): void {
    const g = this.gathered;
    if (!g || g.scope !== s || s.phase === "select" || !this.columns.has(column)) return;
    const into = s.phase === "from" ? g.on : g;
    if (alias === undefined) into.columns.add(column);
    else if (/^t[1-4]$/.test(alias)) add(into.qualified, alias, column);
  }

  /** In a {@link rebind} walk, takes a name of the statement's first SELECT that does not bind instead of refusing it: whether it did. */
  private absorbed(s: Scope, column?: string, alias?: string): boolean {
    const g = this.gathered;
    if (!g || g.scope !== s) return false;
    if (s.phase !== "from" && (column === undefined || !this.columns.has(column) || (alias !== undefined && !/^t[1-4]$/.test(alias)))) return false;
    g.unbound = true;
    return true;
  }

  /** Whether a column after FROM may name any of the schema's columns: mode "from", outside a FROM list drawn again's ON conditions. */
  private loose(s: Scope): boolean {
    return this.mode === "from" && !(this.required && s.phase === "from");
  }

  /** The SQL being written at the end of a segment's text, or undefined outside SQL. */
  private sqlOf(text: string, start: GrammarStart): string | undefined {
    if (start === "final-body") return text;
    let at = -1;
    let open = "";
    for (const tag of [this.skeleton.probe?.open, this.skeleton.answer.open]) {
      if (!tag) continue;
      for (let i = indexOfTag(text, tag); i >= 0; i = indexOfTag(text, tag, i + 1)) {
        if (i > at) {
          at = i;
          open = tag;
        }
      }
    }
    return at < 0 ? undefined : text.slice(at + open.length);
  }

  private problem(sql: string, complete: boolean): string | undefined {
    // a control character is no SQL (byte tokens a grammar can let through when nothing else fits)
    if (hasControl(sql)) return "the SQL holds a control character";
    try {
      this.walk(lex(sql, complete), complete);
      return undefined;
    } catch (err) {
      if (err instanceof Refused) return err.message;
      throw err;
    }
  }

  private isKeyword(word: string): boolean {
    const upper = word.toUpperCase();
    return SQLITE_KEYWORDS.has(upper) || (KEYWORD_LIKE.has(upper) && !this.columns.has(word.toLowerCase()) && !this.byName.has(word.toLowerCase()));
  }

  private walk(toks: Lex[], complete: boolean): void {
    const first = toks.find((t) => t.kind !== "punct" || t.text !== "(");
    // an UNANSWERABLE answer, or text the grammar let through that is no SELECT: nothing to bind
    if (first?.kind !== "word" || (first.partial ? !"select".startsWith(first.text.toLowerCase()) : first.text.toUpperCase() !== "SELECT")) return;
    const frames: Frame[] = [];
    let scope: Scope | undefined;
    let compound = false;
    let statement: Scope | undefined;
    const current = (): Scope | undefined => scope;
    for (let i = 0; i < toks.length; i++) {
      const t = toks[i]!;
      const prev = toks[i - 1];
      const next = toks[i + 1];
      if (t.kind === "end") {
        if (t.partial && !complete) {
          // a "<" at the very end: the closing tag's start, or an operator
          if (scope?.phase === "from") this.endFrom(scope);
          return;
        }
        // a closing tag: the SQL is whole
        complete = true;
        break;
      }
      if (t.kind === "punct") {
        scope = this.punctuation(t.text, frames, scope);
        continue;
      }
      if (t.kind !== "word" && t.kind !== "quoted") continue;
      const upper = t.kind === "word" ? t.text.toUpperCase() : "";
      if (t.kind === "word" && upper === "SELECT" && !t.partial) {
        if (prev?.kind === "punct" && prev.text === "(" && frames.at(-1)?.kind === "group") {
          const s = newScope(scope);
          frames[frames.length - 1] = { kind: "select", scope: s };
          scope = s;
        } else if (compound && scope) {
          const old = scope;
          scope = newScope(old.parent);
          for (let f = frames.length - 1; f >= 0; f--) {
            const frame = frames[f]!;
            if (frame.kind === "select") {
              if (frame.scope === old) frame.scope = scope;
              break;
            }
          }
        } else if (!scope) {
          scope = newScope();
          if (!statement && this.required) {
            for (const c of this.required.columns) scope.pending.add(c);
            for (const q of this.required.qualified) add(scope.qualified, q.alias, q.column);
          }
          statement ??= scope;
        }
        compound = false;
        continue;
      }
      const s = current();
      if (!s) continue;
      if (t.kind === "word" && !t.partial && CLAUSE_ENDS.has(upper) && !topIsGroupIn(frames, s)) {
        this.endClause(s);
        if (upper === "UNION" || upper === "INTERSECT" || upper === "EXCEPT") compound = true;
        continue;
      }
      if (t.kind === "word" && !t.partial && upper === "FROM" && s.phase === "select" && !topIsGroupIn(frames, s)) {
        if (this.gathered && s === statement && this.gathered.scope === undefined) {
          this.gathered.scope = s;
          this.gathered.at = t.end;
        }
        s.phase = "from";
        s.expectTable = true;
        continue;
      }
      // a word after AS: an output alias, a table alias, or a CAST's type
      if (prev?.kind === "word" && prev.text.toUpperCase() === "AS") {
        if (topIsGroupIn(frames, s)) continue;
        if (s.phase === "select") s.outputs.add(t.text.toLowerCase());
        else if (s.phase === "from" && !t.partial) this.alias(s, t.text);
        continue;
      }
      if (s.phase === "from" && !topIsGroupIn(frames, s) && t.kind === "word" && upper === "JOIN") {
        s.expectTable = true;
        continue;
      }
      if (s.phase === "from" && !topIsGroupIn(frames, s) && !inOn(toks, i, s)) {
        if (s.expectTable) {
          if (t.kind === "word" && !t.partial && this.isKeyword(t.text)) continue; // INNER, LEFT, …
          this.table(s, t);
          continue;
        }
        if (t.kind === "word" && !t.partial && (JOIN_WORDS.has(upper) || upper === "ON" || upper === "USING")) continue;
        if (t.partial && t.kind === "word") {
          this.partialAfterTable(s, t.text);
          continue;
        }
        if (t.kind === "word" && this.isKeyword(t.text)) continue;
        // a bare name after a table: its alias
        this.alias(s, t.text);
        continue;
      }
      if (t.kind === "word" && !t.partial && this.isKeyword(t.text) && !(next?.kind === "punct" && next.text === ".")) continue;
      if (next?.kind === "punct" && next.text === "(" && t.kind === "word") continue; // a function call
      const qualified = prev?.kind === "punct" && prev.text === "." && (toks[i - 2]?.kind === "word" || toks[i - 2]?.kind === "quoted");
      if (next?.kind === "punct" && next.text === ".") {
        if (!t.partial) this.qualifier(s, t.text);
        continue;
      }
      if (qualified) this.qualifiedColumn(s, toks[i - 2]!.text, t);
      else this.column(s, t);
    }
    if (complete) {
      for (let s: Scope | undefined = scope; s; s = s.parent) this.endClause(s);
    }
  }

  /** A parenthesis, comma or semicolon in `scope` (the SELECT being read): the scope that follows it. */
  private punctuation(text: string, frames: Frame[], scope: Scope | undefined): Scope | undefined {
    if (text === "(") {
      if (scope?.phase === "from" && scope.expectTable && !topIsGroupIn(frames, scope)) {
        // a derived table: its columns are the subquery's outputs, which this does not follow; it is
        // no way around the tables that hold the columns already named (a name none holds can be its output)
        if (!scope.open && scope.from.length === 0 && scope.pending.size > 0 && [...scope.pending].every((c) => this.columns.has(c)))
          throw new Refused("the columns named before FROM are table columns: FROM must name a table that holds them");
        scope.open = true;
        scope.from.push({});
        scope.expectTable = false;
      }
      frames.push({ kind: "group" });
    } else if (text === ")") {
      const frame = frames.pop();
      if (frame?.kind === "select") {
        this.endClause(frame.scope);
        return frame.scope.parent;
      }
    } else if (text === "," && scope?.phase === "from" && !topIsGroupIn(frames, scope)) scope.expectTable = true;
    else if (text === ";" && scope) this.endClause(scope);
    return scope;
  }

  /** The FROM list ends (a clause keyword, a closing paren, the SQL's end): everything named before it must bind. */
  private endClause(s: Scope): void {
    if (s.phase === "from") this.endFrom(s);
    else if (s.phase === "select" && !s.open && (s.pending.size > 0 || s.qualified.size > 0 || s.byTable.size > 0))
      throw new Refused("columns are named but the SELECT has no FROM");
    s.phase = s.phase === "select" ? "select" : "after";
    s.expectTable = false;
  }

  private endFrom(s: Scope): void {
    if (s.open) return;
    const left = this.uncovered(s, s.from);
    if (left.length > 0) throw new Refused(`column ${left[0]} is in no table of the FROM list`);
    for (const [alias, cols] of s.qualified) {
      const entry = s.from.find((e) => e.alias === alias);
      if (!entry) throw new Refused(`alias ${alias} is not bound in the FROM list`);
      for (const c of cols) if (entry.table && !entry.table.columns.has(c)) throw new Refused(`${alias}'s table has no column ${c}`);
    }
    for (const [name, cols] of s.byTable) {
      const entry = s.from.find((e) => e.table?.name === name);
      if (!entry) throw new Refused(`table ${name} is named but not in the FROM list`);
      for (const c of cols) if (!entry.table!.columns.has(c)) throw new Refused(`table ${name} has no column ${c}`);
    }
    s.phase = "after";
  }

  private uncovered(s: Scope, from: FromEntry[]): string[] {
    if (s.open || from.some((e) => !e.table)) return [];
    return [...s.pending].filter((c) => !from.some((e) => e.table!.columns.has(c)) && !s.outputs.has(c));
  }

  /** Whether `cols` can be covered by at most `slots` tables. */
  private coverable(cols: string[], slots: number): boolean {
    if (cols.length === 0) return true;
    if (slots === 0) return false;
    const first = cols[0]!;
    for (const t of this.tables) {
      if (!t.columns.has(first)) continue;
      if (
        this.coverable(
          cols.filter((c) => !t.columns.has(c)),
          slots - 1,
        )
      )
        return true;
    }
    return false;
  }

  /** Whether `table` may take the next FROM position of `s`. */
  private slotAllows(s: Scope, table: Table): boolean {
    if (s.open) return true;
    const k = s.from.length;
    const wanted = s.qualified.get(`t${k + 1}`);
    if (wanted) for (const c of wanted) if (!table.columns.has(c)) return false;
    const left = this.uncovered(s, s.from);
    if (left.length === 0) return true;
    if (k === 0 && !left.some((c) => table.columns.has(c))) return false;
    const rest = left.filter((c) => !table.columns.has(c));
    return this.coverable(rest, MAX_TABLES - k - 1);
  }

  private table(s: Scope, t: Lex): void {
    const name = t.text.toLowerCase();
    if (t.partial) {
      if (!this.tables.some((tb) => tb.name.startsWith(name) && this.slotAllows(s, tb))) throw new Refused(`no table starting "${t.text}" binds here`);
      return;
    }
    const table = this.byName.get(name);
    if (!table) {
      // not a schema table (a CTE, or text the grammar let through): stop checking this SELECT
      s.open = true;
      s.from.push({});
    } else {
      if (!this.slotAllows(s, table)) throw new Refused(`table ${table.name} does not hold the columns named before FROM`);
      s.from.push({ table });
    }
    s.expectTable = false;
  }

  private alias(s: Scope, alias: string): void {
    const last = s.from.at(-1);
    if (!last || last.alias !== undefined) return;
    last.alias = alias.toLowerCase();
    const wanted = s.qualified.get(last.alias);
    if (wanted && last.table) for (const c of wanted) if (!last.table.columns.has(c)) throw new Refused(`${alias}'s table has no column ${c}`);
  }

  /** A partial word after a table in FROM: it may only end the clause if everything binds. */
  private partialAfterTable(s: Scope, word: string): void {
    const w = word.toUpperCase();
    if (FROM_CONTINUES.some((k) => k.startsWith(w))) return;
    if ([...CLAUSE_ENDS].some((k) => k.startsWith(w))) {
      const left = this.uncovered(s, s.from);
      if (left.length > 0) throw new Refused(`column ${left[0]} is in no table of the FROM list`);
    }
  }

  /** The tables visible from `s`: its own FROM list, then the enclosing ones'. */
  private *visible(s: Scope): Generator<FromEntry> {
    for (let at: Scope | undefined = s; at; at = at.parent) {
      if (at.phase === "select" && at !== s) continue;
      yield* at.from;
    }
  }

  private anyOpen(s: Scope): boolean {
    for (let at: Scope | undefined = s; at; at = at.parent) if (at.open) return true;
    return false;
  }

  /** A qualifier before `.`: an alias or a table name that can be bound. */
  private qualifier(s: Scope, name: string): void {
    const q = name.toLowerCase();
    // before FROM, any other name is an alias the FROM list is still to bind
    if (s.phase === "select") return;
    if (this.anyOpen(s)) return;
    for (const entry of this.visible(s)) if (entry.alias === q || entry.table?.name === q) return;
    if (this.absorbed(s)) return;
    throw new Refused(`${name} is not bound in the FROM list`);
  }

  private qualifiedColumn(s: Scope, qualifier: string, t: Lex): void {
    const q = qualifier.toLowerCase();
    const col = t.text.toLowerCase();
    const fits = (has: (c: string) => boolean): boolean => (t.partial ? [...this.columns].some((c) => c.startsWith(col) && has(c)) : has(col));
    if (this.anyOpen(s)) return;
    if (s.phase === "select") {
      // before FROM: Tn's table is the one FROM will put at position n; a table name must hold it
      const table = this.byName.get(q);
      if (table && !/^t[1-4]$/.test(q)) {
        if (!fits((c) => table.columns.has(c))) throw new Refused(`table ${q} has no column ${t.text}`);
        if (!t.partial) add(s.byTable, q, col);
        return;
      }
      for (const entry of this.visible(s.parent ?? s)) {
        if (entry.alias === q && entry.table) {
          if (!fits((c) => entry.table!.columns.has(c))) throw new Refused(`${qualifier}'s table has no column ${t.text}`);
          return;
        }
      }
      const wanted = [...(s.qualified.get(q) ?? [])];
      if (!fits((c) => this.tables.some((tb) => tb.columns.has(c) && wanted.every((w) => tb.columns.has(w)))))
        throw new Refused(`no table holds ${[...wanted, t.text].join(", ")} together`);
      if (!t.partial) add(s.qualified, q, col);
      return;
    }
    if (!t.partial) this.gather(s, col, q);
    for (const entry of this.visible(s)) {
      if (entry.alias === q || entry.table?.name === q) {
        if (!entry.table) return;
        if (this.loose(s) && fits((c) => this.columns.has(c))) return;
        if (fits((c) => entry.table!.columns.has(c)) || (!t.partial && entry.alias === q && this.absorbed(s, col, q))) return;
        throw new Refused(`${qualifier}'s table has no column ${t.text}`);
      }
    }
    if (this.absorbed(s)) return;
    throw new Refused(`${qualifier} is not bound`);
  }

  private column(s: Scope, t: Lex): void {
    const name = t.text.toLowerCase();
    if (s.phase === "select") {
      if (t.partial) return;
      // a name no table has can still be a derived table's output: the FROM list decides
      if (!this.byName.has(name) || this.columns.has(name)) s.pending.add(name);
      return;
    }
    if (this.anyOpen(s)) return;
    if (!t.partial) this.gather(s, name);
    const inScope = (c: string): boolean => {
      if (this.loose(s) && this.columns.has(c)) return true;
      for (let at: Scope | undefined = s; at; at = at.parent) {
        if (at.outputs.has(c)) return true;
        if (at !== s && at.phase === "select") continue;
        for (const e of at.from) if (e.table?.columns.has(c)) return true;
      }
      return false;
    };
    if (t.partial) {
      if ([...this.columns].some((c) => c.startsWith(name) && inScope(c))) return;
      if (t.kind === "word" && this.keywords.some((k) => k.startsWith(name))) return;
      for (const entry of this.visible(s)) if (entry.alias?.startsWith(name) || entry.table?.name.startsWith(name)) return;
      for (let at: Scope | undefined = s; at; at = at.parent) for (const o of at.outputs) if (o.startsWith(name)) return;
      throw new Refused(`no name starting "${t.text}" is in scope`);
    }
    // a table's name alone (`x IN tbl`) passes; one that is also a column must bind as a column
    if (inScope(name) || (this.byName.has(name) && !this.columns.has(name))) return;
    if (this.absorbed(s, name)) return;
    throw new Refused(this.columns.has(name) ? `column ${t.text} is in no table in scope` : `${t.text} is no column in scope`);
  }
}

function add(map: Map<string, Set<string>>, key: string, value: string): void {
  const set = map.get(key) ?? new Set<string>();
  set.add(value);
  map.set(key, set);
}

/** Whether the innermost open paren lies inside `s` (a function call or list within its clause). */
function topIsGroupIn(frames: Frame[], s: Scope): boolean {
  const top = frames.at(-1);
  if (!top) return false;
  return top.kind === "group" || top.scope !== s;
}

/** Whether token `i` lies in an ON condition of `s`'s FROM list (after ON, before the next JOIN or comma). */
function inOn(toks: Lex[], i: number, s: Scope): boolean {
  if (s.phase !== "from") return false;
  let depth = 0;
  for (let j = i - 1; j >= 0; j--) {
    const t = toks[j]!;
    if (t.kind === "punct" && t.text === ")") depth++;
    else if (t.kind === "punct" && t.text === "(") {
      if (depth === 0) return false;
      depth--;
    } else if (depth === 0 && t.kind === "word") {
      const u = t.text.toUpperCase();
      if (u === "ON") return true;
      if (u === "JOIN" || u === "FROM") return false;
    } else if (depth === 0 && t.kind === "punct" && t.text === ",") return false;
  }
  return false;
}

/**
 * The SQL scope walker: each SELECT of a text (a compound's parts, subqueries, derived tables and
 * CTE bodies included) with its token range, its FROM/JOIN list (tables, aliases, CTE names,
 * table-valued functions, derived tables) and the SELECT it is nested in, read off the lexer's
 * tokens. A light walk over query blocks, not a full parser; it never throws. What a name stands
 * for (a schema table or not, which columns) is the caller's business: entity extraction resolves
 * columns against a schema through it.
 */
import { lexSql, type SqlToken } from "./lexer.js";
import { COMPOUND_WORDS as COMPOUND, FROM_ENDS as FROM_END, JOIN_WORDS, QUERY_KEYWORDS as SQL_KEYWORDS, QUERY_STARTS as QUERY_START } from "./vocabulary.js";

const NOT_ALIAS = new Set([...JOIN_WORDS, ...FROM_END, "ON", "USING", "INDEXED", "NOT", "AS", ...COMPOUND]);

/** A bare word that is a keyword (never a name unless quoted). */
const isSqlKeyword = (t: SqlToken | undefined): t is SqlToken => t !== undefined && t.kind === "word" && SQL_KEYWORDS.has(t.upper);

/** The keyword `word` (given upper-case). */
export const isKeyword = (t: SqlToken | undefined, word: string): boolean => isSqlKeyword(t) && t.upper === word;

/** A name: a quoted one, or a bare word that is no keyword. */
export const isIdent = (t: SqlToken | undefined): t is SqlToken =>
  t !== undefined && (t.kind === "quoted" || (t.kind === "word" && !SQL_KEYWORDS.has(t.upper)));

/** One item of a FROM/JOIN list. */
export interface FromItem {
  /** A name ("table": a table or view, schema or not, the caller's catalogue decides), a WITH name in scope, a table-valued function, a parenthesised subquery. */
  kind: "table" | "cte" | "function" | "derived";
  /** The name, lower-case and unquoted; "" for a derived table. */
  name: string;
  /** Index of the name's token (past a schema qualifier, `main.t`); for a derived table, of its "(". */
  at: number;
  /** Written with a schema qualifier. */
  qualified: boolean;
  /** The alias, lower-case and unquoted. */
  alias?: string;
  /** Index of the alias's token. */
  aliasAt?: number;
}

/** One SELECT: its tokens, its FROM list and the SELECT whose names it sees. */
export interface SelectScope {
  /** Index of its first token (SELECT, or VALUES). */
  start: number;
  /** Index just past its last token. */
  end: number;
  /** Where its names resolve next: the SELECT it is nested in (for a derived table or a CTE body, the one around that SELECT); null at the top. */
  parent: SelectScope | null;
  /** Index of its FROM keyword; -1 when it has none. */
  fromAt: number;
  from: FromItem[];
  /** The tokens of its FROM list that declare (tables, qualifiers, aliases, INDEXED BY names), not read, columns. */
  declared: Set<number>;
  /** The `(`…`)` token ranges of the queries nested in it (each a scope of its own), to be skipped when reading its own tokens. */
  nested: [number, number][];
}

/** A text's SQL tokens and every SELECT in it, outermost first. */
export interface SqlScopes {
  tokens: SqlToken[];
  scopes: SelectScope[];
}

/** Lexes `sql` and walks its SELECTs (statements split at top-level `;`). */
export function sqlScopes(sql: string): SqlScopes {
  const tokens = lexSql(sql);
  const walker = new ScopeWalker(tokens);
  let start = 0;
  for (let i = 0; i <= tokens.length; i++) {
    const t = tokens[i];
    if (t === undefined || (t.text === ";" && t.kind === "punct" && t.depth === 0)) {
      if (i > start) walker.query(start, i, null, new Set());
      start = i + 1;
    }
  }
  return { tokens, scopes: walker.scopes };
}

/**
 * Queries nested deeper than this are not walked (their tokens stay part of the scope around them):
 * the walk recurses once per nesting level and reads each level's tokens again, so an input of
 * thousands of nested `(SELECT` would otherwise cost quadratic time or overflow the stack.
 */
const MAX_NESTING = 100;

class ScopeWalker {
  readonly scopes: SelectScope[] = [];
  private readonly walked = new Set<number>();
  private nesting = 0;

  constructor(private readonly tok: SqlToken[]) {}

  /** Whether a "(" at `i` opens a query. */
  isSubqueryOpen(i: number): boolean {
    const t = this.tok[i];
    const next = this.tok[i + 1];
    return t?.text === "(" && t.kind === "punct" && t.match > i && isSqlKeyword(next) && QUERY_START.has(next.upper);
  }

  /** Closing index of the group opened at `i`, or `end` when unbalanced. */
  private close(i: number, end: number): number {
    const m = this.tok[i]!.match;
    return m > i && m <= end ? m : end;
  }

  /** A query in [s, e): its WITH list, then each SELECT of a compound; nothing past {@link MAX_NESTING} levels. */
  query(s: number, e: number, outer: SelectScope | null, visible: ReadonlySet<string>): void {
    if (this.nesting >= MAX_NESTING) return;
    this.nesting++;
    try {
      this.queryAt(s, e, outer, visible);
    } finally {
      this.nesting--;
    }
  }

  private queryAt(s: number, e: number, outer: SelectScope | null, visible: ReadonlySet<string>): void {
    const ctes = new Set(visible);
    let i = s;
    if (isKeyword(this.tok[i], "WITH")) {
      i++;
      if (isKeyword(this.tok[i], "RECURSIVE")) i++;
      while (i < e) {
        const name = this.tok[i];
        if (!name) break;
        ctes.add(name.value.toLowerCase());
        i++;
        if (this.tok[i]?.text === "(") i = this.close(i, e) + 1;
        if (isKeyword(this.tok[i], "AS")) i++;
        if (isKeyword(this.tok[i], "NOT")) i++;
        if (isKeyword(this.tok[i], "MATERIALIZED")) i++;
        if (this.tok[i]?.text === "(") {
          const end = this.close(i, e);
          this.walked.add(i);
          this.query(i + 1, end, outer, ctes);
          i = end + 1;
        }
        if (this.tok[i]?.text === ",") i++;
        else break;
      }
    }
    if (i >= e) return;
    const depth = this.tok[i]!.depth;
    let coreStart = i;
    for (let j = i; j <= e; j++) {
      const t = this.tok[j];
      if (j === e || (t && t.depth === depth && isSqlKeyword(t) && COMPOUND.has(t.upper))) {
        if (j > coreStart) this.core(coreStart, j, outer, ctes);
        coreStart = isKeyword(this.tok[j + 1], "ALL") ? j + 2 : j + 1;
      }
    }
  }

  /** One SELECT in [s, e): its FROM list, then the queries nested in it. */
  private core(s: number, e: number, outer: SelectScope | null, ctes: ReadonlySet<string>): void {
    const tok = this.tok;
    const depth = tok[s]!.depth;
    const scope: SelectScope = { start: s, end: e, parent: outer, fromAt: -1, from: [], declared: new Set(), nested: [] };
    this.scopes.push(scope);
    for (let j = s; j < e; j++) {
      if (tok[j]!.depth === depth && isKeyword(tok[j], "FROM")) {
        scope.fromAt = j;
        break;
      }
    }
    if (scope.fromAt >= 0) {
      let fromEnd = e;
      for (let j = scope.fromAt + 1; j < e; j++) {
        const t = tok[j]!;
        if (t.depth === depth && isSqlKeyword(t) && FROM_END.has(t.upper)) {
          fromEnd = j;
          break;
        }
      }
      this.fromClause(scope.fromAt + 1, fromEnd, scope, ctes);
    }
    for (let j = s; j < e; j++) {
      if (!this.isSubqueryOpen(j)) continue;
      const end = this.close(j, e);
      scope.nested.push([j, end]);
      if (!this.walked.has(j)) {
        this.walked.add(j);
        this.query(j + 1, end, scope, ctes);
      }
      j = end;
    }
  }

  /** The FROM list in [s, e) of `scope`; a derived table's query sees the names around `scope`, not its own. */
  private fromClause(s: number, e: number, scope: SelectScope, ctes: ReadonlySet<string>): void {
    const tok = this.tok;
    let expecting = true;
    let j = s;
    while (j < e) {
      const t = tok[j]!;
      if (this.isSubqueryOpen(j)) {
        const end = this.close(j, e);
        this.walked.add(j);
        this.query(j + 1, end, scope.parent, ctes);
        j = this.alias(end + 1, e, scope, { kind: "derived", name: "", at: j, qualified: false });
        expecting = false;
      } else if (t.kind === "punct" && (t.text === "(" || t.text === ")")) {
        j++;
      } else if (t.text === "," && t.kind === "punct") {
        expecting = true;
        j++;
      } else if (isSqlKeyword(t) && JOIN_WORDS.has(t.upper)) {
        if (t.upper === "JOIN") expecting = true;
        j++;
      } else if (isKeyword(t, "ON")) {
        j = this.skipOn(j, e);
      } else if (expecting && isIdent(t)) {
        j = this.tableName(j, e, scope, ctes);
        expecting = false;
      } else {
        j++;
      }
    }
  }

  /** Past an ON condition starting at `j`: up to the next join word, comma or ")" at its depth. */
  private skipOn(j: number, e: number): number {
    const onDepth = this.tok[j]!.depth;
    j++;
    while (j < e) {
      const u = this.tok[j]!;
      if (u.depth < onDepth) break;
      if (u.depth === onDepth && ((isSqlKeyword(u) && JOIN_WORDS.has(u.upper)) || (u.kind === "punct" && (u.text === "," || u.text === ")")))) break;
      j++;
    }
    return j;
  }

  /** A named FROM item at `j` (perhaps schema-qualified, perhaps a function call) and its alias; returns the next index. */
  private tableName(j: number, e: number, scope: SelectScope, ctes: ReadonlySet<string>): number {
    const tok = this.tok;
    let at = j;
    let qualified = false;
    if (tok[j + 1]?.text === "." && isIdent(tok[j + 2])) {
      scope.declared.add(j);
      at = j + 2;
      qualified = true;
    }
    scope.declared.add(at);
    const name = tok[at]!.value.toLowerCase();
    let k = at + 1;
    let kind: FromItem["kind"] = "table";
    if (tok[k]?.text === "(" && tok[k]!.kind === "punct") {
      k = this.close(k, e) + 1;
      kind = "function";
    } else if (!qualified && ctes.has(name)) {
      kind = "cte";
    }
    return this.alias(k, e, scope, { kind, name, at, qualified });
  }

  /** Reads an optional alias (and INDEXED BY) at `k`, adds `item` to the scope's FROM list, returns the next index. */
  private alias(k: number, e: number, scope: SelectScope, item: FromItem): number {
    const tok = this.tok;
    if (isKeyword(tok[k], "AS") && k + 1 < e) {
      Object.assign(item, { alias: tok[k + 1]!.value.toLowerCase(), aliasAt: k + 1 });
      k += 2;
    } else if (k < e && isIdent(tok[k]) && !NOT_ALIAS.has(tok[k]!.upper)) {
      Object.assign(item, { alias: tok[k]!.value.toLowerCase(), aliasAt: k });
      k++;
    }
    if (item.aliasAt !== undefined) scope.declared.add(item.aliasAt);
    if (isKeyword(tok[k], "INDEXED") && tok[k + 2]) {
      scope.declared.add(k + 2);
      k += 3;
    } else if (isKeyword(tok[k], "NOT") && isKeyword(tok[k + 1], "INDEXED")) {
      k += 2;
    }
    scope.from.push(item);
    return k;
  }
}

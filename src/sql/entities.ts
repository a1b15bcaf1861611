/**
 * Entities(s): the tables and columns a query references, for the ReEx entity reward and for
 * error analysis. A tokenizer plus a light walk over query blocks, not a full parser:
 *
 * - Table aliases (`FROM singer AS s`, `JOIN concert c`) are resolved; a table is also reachable
 *   by its own name when aliased (lenient, like most model-written SQL expects).
 * - `*` expands to every column of the block's FROM tables; `t.*` to that table's columns.
 * - An unqualified column resolves against the tables of the innermost block that has it, then
 *   outer blocks (correlated subqueries); when several tables in that block have it (ambiguous)
 *   all of them are counted.
 * - CTE names, derived tables (`(SELECT …) AS d`) and table-valued functions are not tables:
 *   columns read through them map to nothing, but the queries inside them are walked as usual.
 * - Quoted identifiers ("x", `x`, [x]) resolve like bare ones; a double-quoted word that names no
 *   column in scope is taken as a string literal (as SQLite does). String literals are ignored.
 * - Names that are not in the schema are dropped; everything is returned lower-case and sorted.
 */
import { isKeyword, tokenizeSql, type SqlToken } from "./entities-tokenize.js";

/** The part of a schema that entity extraction needs; a {@link DatabaseSchema} fits. */
export interface EntitySchema {
  tables: ReadonlyArray<{ name: string; columns: ReadonlyArray<{ name: string }> }>;
}

/** Tables and `table.column` names a query references, lower-case and sorted. */
export interface Entities {
  tables: string[];
  columns: string[];
}

type Source = { kind: "table"; table: string; columns: string[]; has: Set<string> } | { kind: "virtual" };

interface Scope {
  sources: Map<string, Source>;
  /** Sources in FROM order, for `*` and unqualified columns. */
  order: Source[];
  parent: Scope | null;
}

const QUERY_START = new Set(["SELECT", "WITH", "VALUES"]);
const COMPOUND = new Set(["UNION", "INTERSECT", "EXCEPT"]);
const FROM_END = new Set(["WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "WINDOW"]);
const JOIN_WORDS = new Set(["JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL"]);
const NOT_ALIAS = new Set([...JOIN_WORDS, ...FROM_END, "ON", "USING", "INDEXED", "NOT", "AS", ...COMPOUND]);

/** Extracts the tables and columns that `sql` references in `schema` (see the module comment for the rules). */
export function extractEntities(sql: string, schema: EntitySchema): Entities {
  const catalog = new Map<string, { table: string; columns: string[]; has: Set<string> }>();
  for (const t of schema.tables) {
    const columns = t.columns.map((c) => c.name.toLowerCase());
    catalog.set(t.name.toLowerCase(), { table: t.name.toLowerCase(), columns, has: new Set(columns) });
  }
  const walker = new Walker(tokenizeSql(sql), catalog);
  walker.walkStatements();
  return { tables: [...walker.tables].sort(), columns: [...walker.columns].sort() };
}

function isNamePart(t: SqlToken | undefined): t is SqlToken {
  return t !== undefined && (t.kind === "ident" || t.kind === "keyword" || (t.kind === "op" && t.text === "*"));
}

class Walker {
  readonly tables = new Set<string>();
  readonly columns = new Set<string>();
  private readonly walked = new Set<number>();

  constructor(
    private readonly tok: SqlToken[],
    private readonly catalog: Map<string, { table: string; columns: string[]; has: Set<string> }>,
  ) {}

  walkStatements(): void {
    let start = 0;
    for (let i = 0; i <= this.tok.length; i++) {
      const t = this.tok[i];
      if (t === undefined || (t.text === ";" && t.kind === "punct" && t.depth === 0)) {
        if (i > start) this.query(start, i, null, new Set());
        start = i + 1;
      }
    }
  }

  private isSubqueryOpen(i: number): boolean {
    const t = this.tok[i];
    const next = this.tok[i + 1];
    return t?.text === "(" && t.kind === "punct" && t.match > i && next?.kind === "keyword" && QUERY_START.has(next.upper);
  }

  /** Closing index of the group opened at `i`, or `end` when unbalanced. */
  private close(i: number, end: number): number {
    const m = this.tok[i]!.match;
    return m > i && m <= end ? m : end;
  }

  private query(s: number, e: number, outer: Scope | null, visible: ReadonlySet<string>): void {
    const ctes = new Set(visible);
    let i = s;
    if (isKeyword(this.tok[i], "WITH")) {
      i++;
      if (isKeyword(this.tok[i], "RECURSIVE")) i++;
      while (i < e) {
        const name = this.tok[i];
        if (!name) break;
        ctes.add(name.text.toLowerCase());
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
      if (j === e || (t && t.depth === depth && t.kind === "keyword" && COMPOUND.has(t.upper))) {
        if (j > coreStart) this.core(coreStart, j, outer, ctes);
        coreStart = isKeyword(this.tok[j + 1], "ALL") ? j + 2 : j + 1;
      }
    }
  }

  private core(s: number, e: number, outer: Scope | null, ctes: ReadonlySet<string>): void {
    const tok = this.tok;
    const depth = tok[s]!.depth;
    const scope: Scope = { sources: new Map(), order: [], parent: outer };
    const consumed = new Set<number>();
    let fromIdx = -1;
    for (let j = s; j < e; j++) {
      if (tok[j]!.depth === depth && isKeyword(tok[j], "FROM")) {
        fromIdx = j;
        break;
      }
    }
    if (fromIdx >= 0) {
      let fromEnd = e;
      for (let j = fromIdx + 1; j < e; j++) {
        const t = tok[j]!;
        if (t.depth === depth && t.kind === "keyword" && FROM_END.has(t.upper)) {
          fromEnd = j;
          break;
        }
      }
      this.fromClause(fromIdx + 1, fromEnd, scope, outer, ctes, consumed);
    }
    for (let j = s; j < e; j++) {
      const t = tok[j]!;
      if (this.isSubqueryOpen(j)) {
        const end = this.close(j, e);
        if (!this.walked.has(j)) {
          this.walked.add(j);
          this.query(j + 1, end, scope, ctes);
        }
        j = end;
        continue;
      }
      if (consumed.has(j)) continue;
      if (t.kind === "op" && t.text === "*") {
        const prev = tok[j - 1];
        const selectList = t.depth === depth && (fromIdx < 0 || j < fromIdx);
        const starPosition = prev && (prev.text === "," || isKeyword(prev, "SELECT") || isKeyword(prev, "DISTINCT") || isKeyword(prev, "ALL"));
        if (selectList && starPosition) {
          for (const src of scope.order) this.addAll(src);
        }
        continue;
      }
      if (t.kind !== "ident") continue;
      const prev = tok[j - 1];
      const next = tok[j + 1];
      if (prev && (isKeyword(prev, "AS") || prev.upper === "COLLATE" || isKeyword(prev, "OVER") || prev.text === ".")) continue;
      if (next?.text === "(") continue;
      if (next?.text === "." && next.kind === "punct") {
        const parts: SqlToken[] = [t];
        let k = j;
        while (tok[k + 1]?.text === "." && isNamePart(tok[k + 2])) {
          parts.push(tok[k + 2]!);
          k += 2;
        }
        const last = parts[parts.length - 1]!;
        const qualifier = parts[parts.length - 2];
        if (qualifier) {
          const src = this.lookupSource(qualifier.text, scope);
          if (last.text === "*" && last.kind === "op") {
            if (src) this.addAll(src);
          } else if (src?.kind === "table" && src.has.has(last.text.toLowerCase())) {
            this.columns.add(`${src.table}.${last.text.toLowerCase()}`);
          }
        }
        j = k;
        continue;
      }
      this.resolveBare(t.text.toLowerCase(), scope);
    }
  }

  private fromClause(s: number, e: number, scope: Scope, outer: Scope | null, ctes: ReadonlySet<string>, consumed: Set<number>): void {
    const tok = this.tok;
    let expecting = true;
    let j = s;
    while (j < e) {
      const t = tok[j]!;
      if (this.isSubqueryOpen(j)) {
        const end = this.close(j, e);
        this.walked.add(j);
        this.query(j + 1, end, outer, ctes);
        j = this.alias(end + 1, e, consumed, { kind: "virtual" }, null, scope);
        expecting = false;
        continue;
      }
      if (t.kind === "punct" && (t.text === "(" || t.text === ")")) {
        j++;
        continue;
      }
      if (t.text === "," && t.kind === "punct") {
        expecting = true;
        j++;
        continue;
      }
      if (t.kind === "keyword" && JOIN_WORDS.has(t.upper)) {
        if (t.upper === "JOIN") expecting = true;
        j++;
        continue;
      }
      if (isKeyword(t, "ON")) {
        const onDepth = t.depth;
        j++;
        while (j < e) {
          const u = tok[j]!;
          if (u.depth < onDepth) break;
          if (u.depth === onDepth && ((u.kind === "keyword" && JOIN_WORDS.has(u.upper)) || (u.kind === "punct" && (u.text === "," || u.text === ")")))) break;
          j++;
        }
        continue;
      }
      if (expecting && t.kind === "ident") {
        let nameIdx = j;
        let qualified = false;
        if (tok[j + 1]?.text === "." && tok[j + 2]?.kind === "ident") {
          consumed.add(j);
          nameIdx = j + 2;
          qualified = true;
        }
        consumed.add(nameIdx);
        const name = tok[nameIdx]!.text.toLowerCase();
        let k = nameIdx + 1;
        let src: Source;
        if (tok[k]?.text === "(" && tok[k]!.kind === "punct") {
          k = this.close(k, e) + 1;
          src = { kind: "virtual" };
        } else if (!qualified && ctes.has(name)) {
          src = { kind: "virtual" };
        } else {
          const entry = this.catalog.get(name);
          if (entry) {
            src = { kind: "table", ...entry };
            this.tables.add(entry.table);
          } else {
            src = { kind: "virtual" };
          }
        }
        j = this.alias(k, e, consumed, src, name, scope);
        expecting = false;
        continue;
      }
      j++;
    }
  }

  /** Reads an optional alias at `k`, registers `src` under it (and under `name`), returns the next index. */
  private alias(k: number, e: number, consumed: Set<number>, src: Source, name: string | null, scope: Scope): number {
    const tok = this.tok;
    let alias: string | null = null;
    if (isKeyword(tok[k], "AS") && k + 1 < e) {
      alias = tok[k + 1]!.text.toLowerCase();
      consumed.add(k + 1);
      k += 2;
    } else if (k < e && tok[k]!.kind === "ident" && !NOT_ALIAS.has(tok[k]!.upper)) {
      alias = tok[k]!.text.toLowerCase();
      consumed.add(k);
      k++;
    }
    if (isKeyword(tok[k], "INDEXED") && tok[k + 2]) {
      consumed.add(k + 2);
      k += 3;
    } else if (isKeyword(tok[k], "NOT") && isKeyword(tok[k + 1], "INDEXED")) {
      k += 2;
    }
    if (alias !== null) scope.sources.set(alias, src);
    if (name !== null && !scope.sources.has(name)) scope.sources.set(name, src);
    scope.order.push(src);
    return k;
  }

  private lookupSource(name: string, scope: Scope): Source | undefined {
    const key = name.toLowerCase();
    for (let s: Scope | null = scope; s; s = s.parent) {
      const src = s.sources.get(key);
      if (src) return src;
    }
    return undefined;
  }

  private resolveBare(column: string, scope: Scope): void {
    for (let s: Scope | null = scope; s; s = s.parent) {
      let found = false;
      for (const src of s.order) {
        if (src.kind === "table" && src.has.has(column)) {
          this.columns.add(`${src.table}.${column}`);
          found = true;
        }
      }
      if (found) return;
    }
  }

  private addAll(src: Source): void {
    if (src.kind !== "table") return;
    for (const c of src.columns) this.columns.add(`${src.table}.${c}`);
  }
}

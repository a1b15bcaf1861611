/**
 * Entities(s): the tables and columns a query references, for the ReEx entity reward and for
 * error analysis. The scope walker's SELECTs (./scopes.ts) with their columns resolved, not a full parser:
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
import type { SqlToken } from "./lexer.js";
import { isIdent, isKeyword, sqlScopes, type SelectScope } from "./scopes.js";

/** The part of a schema that entity extraction needs; a {@link DatabaseSchema} fits. */
export interface EntitySchema {
  tables: ReadonlyArray<{ name: string; columns: ReadonlyArray<{ name: string }> }>;
}

/** Tables and `table.column` names a query references, lower-case and sorted. */
export interface Entities {
  tables: string[];
  columns: string[];
}

type CatalogTable = { table: string; columns: string[]; has: Set<string> };

type Source = ({ kind: "table" } & CatalogTable) | { kind: "virtual" };

interface Scope {
  sources: Map<string, Source>;
  /** Sources in FROM order, for `*` and unqualified columns. */
  order: Source[];
  parent: Scope | null;
}

/** Extracts the tables and columns that `sql` references in `schema` (see the module comment for the rules). */
export function extractEntities(sql: string, schema: EntitySchema): Entities {
  const catalog = new Map<string, CatalogTable>();
  for (const t of schema.tables) {
    const columns = t.columns.map((c) => c.name.toLowerCase());
    catalog.set(t.name.toLowerCase(), { table: t.name.toLowerCase(), columns, has: new Set(columns) });
  }
  const { tokens, scopes } = sqlScopes(sql);
  const resolver = new Resolver(tokens);
  // a SELECT's parent comes before it, so every scope finds its parent's sources built
  const built = new Map<SelectScope, Scope>();
  for (const s of scopes) built.set(s, resolver.sources(s, s.parent ? built.get(s.parent)! : null, catalog));
  for (const s of scopes) resolver.read(s, built.get(s)!);
  return { tables: [...resolver.tables].sort(), columns: [...resolver.columns].sort() };
}

function isNamePart(t: SqlToken | undefined): t is SqlToken {
  return t !== undefined && (t.kind === "word" || t.kind === "quoted" || (t.kind === "op" && t.text === "*"));
}

class Resolver {
  readonly tables = new Set<string>();
  readonly columns = new Set<string>();

  constructor(private readonly tok: SqlToken[]) {}

  /** The sources of a SELECT's FROM list: schema tables by name and alias (a table also by its own name), the rest virtual. */
  sources(s: SelectScope, parent: Scope | null, catalog: ReadonlyMap<string, CatalogTable>): Scope {
    const scope: Scope = { sources: new Map(), order: [], parent };
    for (const item of s.from) {
      const entry = item.kind === "table" ? catalog.get(item.name) : undefined;
      if (entry) this.tables.add(entry.table);
      const src: Source = entry ? { kind: "table", ...entry } : { kind: "virtual" };
      if (item.alias !== undefined) scope.sources.set(item.alias, src);
      if (item.kind !== "derived" && !scope.sources.has(item.name)) scope.sources.set(item.name, src);
      scope.order.push(src);
    }
    return scope;
  }

  /** Resolves the column references of one SELECT's own tokens (not its nested queries' nor its FROM list's names). */
  read(s: SelectScope, scope: Scope): void {
    const tok = this.tok;
    const depth = tok[s.start]!.depth;
    let nested = 0;
    for (let j = s.start; j < s.end; j++) {
      const t = tok[j]!;
      if (s.nested[nested]?.[0] === j) {
        j = s.nested[nested++]![1];
        continue;
      }
      if (s.declared.has(j)) continue;
      if (t.kind === "op" && t.text === "*") {
        const prev = tok[j - 1];
        const selectList = t.depth === depth && (s.fromAt < 0 || j < s.fromAt);
        const starPosition = prev && (prev.text === "," || isKeyword(prev, "SELECT") || isKeyword(prev, "DISTINCT") || isKeyword(prev, "ALL"));
        if (selectList && starPosition) {
          for (const src of scope.order) this.addAll(src);
        }
        continue;
      }
      if (!isIdent(t)) continue;
      const prev = tok[j - 1];
      const next = tok[j + 1];
      if (prev && (isKeyword(prev, "AS") || prev.upper === "COLLATE" || isKeyword(prev, "OVER") || prev.text === ".")) continue;
      if (next?.text === "(") continue;
      if (next?.text === "." && next.kind === "punct") {
        j = this.qualified(j, scope);
        continue;
      }
      this.resolveBare(t.value.toLowerCase(), scope);
    }
  }

  /** A dotted name starting at `j` (`t.col`, `t.*`, `main.t.col`): its column through its qualifier; returns the index of its last part. */
  private qualified(j: number, scope: Scope): number {
    const tok = this.tok;
    const parts: SqlToken[] = [tok[j]!];
    let k = j;
    while (tok[k + 1]?.text === "." && isNamePart(tok[k + 2])) {
      parts.push(tok[k + 2]!);
      k += 2;
    }
    const last = parts[parts.length - 1]!;
    const qualifier = parts[parts.length - 2];
    if (qualifier) {
      const src = this.lookupSource(qualifier.value, scope);
      if (last.text === "*" && last.kind === "op") {
        if (src) this.addAll(src);
      } else if (src?.kind === "table" && src.has.has(last.value.toLowerCase())) {
        this.columns.add(`${src.table}.${last.value.toLowerCase()}`);
      }
    }
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

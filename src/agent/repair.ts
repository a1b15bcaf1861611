/**
 * Table repair: a query that reads a column its FROM table lacks is rebound to the one table that
 * has every column the query reads through that table. Small models often write the right columns
 * under the wrong table (`SELECT COUNT(*) FROM hosting_city WHERE city = 'Vienna'`) or join a
 * table to itself where another table was meant (`people AS T1 JOIN people AS T2 ON … WHERE
 * T2.support_rate < 650`); the executor's "no such column" says so, and the schema says where the
 * columns live. Only table names in FROM change; a query with a subquery or a compound, a derived
 * table, or more than one table that fits is left alone.
 */
import { sqlScopes, type SqlScopes, type SqlToken } from "../sql/index.js";
import { identifierSpellings, isName, isWord, type SchemaNames } from "./grammar.js";
import type { RewriteRule } from "./rewrite-types.js";

declare module "../events/index.js" {
  interface RepairFixes {
    /** Each FROM table replaced, as written and as put in its place (table repair); empty when none was. */
    swaps: TableSwap[];
  }
}

/** One FROM table replaced: the name the query had and the schema's table put in its place. */
export interface TableSwap {
  from: string;
  to: string;
}

/** A repaired query and the tables it swapped. */
export interface TableRepair {
  sql: string;
  swaps: TableSwap[];
}

interface FromEntry {
  /** Index of the table's token. */
  at: number;
  table: string;
  alias?: string;
  /** Index of the alias's token. */
  aliasAt?: number;
  /** Columns the query reads through this table (lower case). */
  reads: Set<string>;
}

/** The tables and aliases of the FROM list whose FROM is token `from`; undefined when it holds anything but schema tables (a derived table, a function). */
function fromEntries(sql: SqlScopes, from: number, tables: ReadonlyMap<string, unknown>): FromEntry[] | undefined {
  const items = sql.scopes.find((s) => s.fromAt === from)?.from ?? [];
  if (items.length === 0 || items.some((item) => item.kind !== "table" || !tables.has(item.name))) return undefined;
  return items.map(({ at, name, alias, aliasAt }) => ({ at, table: name, ...(alias !== undefined ? { alias, aliasAt } : {}), reads: new Set<string>() }));
}

/**
 * Assigns each column reference to its FROM entry (a bare one too when FROM has one table) and
 * returns the bare columns of a multi-table FROM; undefined when a qualifier names no entry.
 */
function assignReads(toks: SqlToken[], entries: FromEntry[]): Set<string> | undefined {
  const names = new Set(entries.flatMap((e) => (e.aliasAt === undefined ? [e.at] : [e.at, e.aliasAt])));
  const bare = new Set<string>();
  const outputAliases = new Set<string>();
  toks.forEach((t, i) => {
    if (isWord(t, "AS") && isName(toks[i + 1]) && !names.has(i + 1)) outputAliases.add(toks[i + 1]!.value.toLowerCase());
  });
  const byQualifier = (q: string): FromEntry | undefined => entries.find((e) => e.alias === q) ?? entries.find((e) => e.alias === undefined && e.table === q);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    if (!isName(t) || names.has(i) || toks[i + 1]?.text === "(" || toks[i + 1]?.text === "." || isWord(toks[i - 1], "COLLATE")) continue;
    const column = t.value.toLowerCase();
    if (toks[i - 1]?.text === ".") {
      const entry = byQualifier(toks[i - 2]?.value.toLowerCase() ?? "");
      if (!entry) return undefined;
      entry.reads.add(column);
    } else if (!outputAliases.has(column)) {
      if (entries.length === 1) entries[0]!.reads.add(column);
      else bare.add(column);
    }
  }
  return bare;
}

/**
 * One table for each misfit from its candidates, all different: a misfit left with one candidate
 * takes it and that table leaves the others' candidates, until every misfit is settled; undefined
 * when one is left with none or several, so the order of the misfits never decides.
 */
function settle(candidates: Map<FromEntry, string[]>): { entry: FromEntry; to: string }[] | undefined {
  const open = new Map(candidates);
  const swaps: { entry: FromEntry; to: string }[] = [];
  for (;;) {
    const next = [...open].find(([, tables]) => tables.length === 1);
    if (!next) return open.size === 0 ? swaps : undefined;
    const [entry, [to]] = next as [FromEntry, [string]];
    swaps.push({ entry, to });
    open.delete(entry);
    for (const [other, tables] of open)
      open.set(
        other,
        tables.filter((t) => t !== to),
      );
  }
}

/**
 * `sql` with each FROM table that lacks a column read through it replaced by the schema's only
 * table holding all of them that is not already in FROM; undefined when every table fits, or when
 * the query is out of scope or any misfit has no unique replacement.
 */
export function repairTables(sql: string, schema: SchemaNames): TableRepair | undefined {
  const scopes = sqlScopes(sql);
  const toks = scopes.tokens;
  if (toks.filter((t) => isWord(t, "SELECT")).length !== 1 || toks.some((t) => isWord(t, "UNION") || isWord(t, "INTERSECT") || isWord(t, "EXCEPT")))
    return undefined;
  const from = toks.findIndex((t) => isWord(t, "FROM"));
  if (from < 0) return undefined;
  const columnsOf = new Map<string, ReadonlySet<string>>();
  const spelled = new Map<string, string>();
  for (const t of schema.tables) {
    columnsOf.set(t.name.toLowerCase(), new Set(t.columns.map((c) => c.toLowerCase())));
    spelled.set(t.name.toLowerCase(), t.name);
  }
  const entries = fromEntries(scopes, from, columnsOf);
  const bare = entries && assignReads(toks, entries);
  if (!entries || !bare) return undefined;
  const fits = (table: string, reads: ReadonlySet<string>): boolean => [...reads].every((c) => columnsOf.get(table)!.has(c));
  const misfits = entries.filter((e) => !fits(e.table, e.reads));
  if (misfits.length === 0) return undefined;
  // a table already in FROM is never the replacement: a table joined to itself on its own key is what the repair undoes
  const kept = new Set(entries.filter((e) => !misfits.includes(e)).map((e) => e.table));
  const candidates = new Map(misfits.map((e) => [e, [...columnsOf.keys()].filter((t) => fits(t, e.reads) && !kept.has(t))]));
  const swaps = settle(candidates);
  if (!swaps) return undefined;
  const tablesAfter = entries.map((e) => swaps.find((s) => s.entry === e)?.to ?? e.table);
  if (![...bare].every((c) => tablesAfter.some((t) => columnsOf.get(t)!.has(c)))) return undefined;
  let out = sql;
  for (const { entry, to } of [...swaps].sort((a, b) => b.entry.at - a.entry.at)) {
    const tok = toks[entry.at]!;
    out = `${out.slice(0, tok.start)}${identifierSpellings(spelled.get(to)!)[0]}${out.slice(tok.end)}`;
  }
  return { sql: out, swaps: swaps.map(({ entry, to }) => ({ from: toks[entry.at]!.value, to: spelled.get(to)! })) };
}

/** Table repair as a rewrite rule (`agent.repairTables`): a final SQL that fails on a missing column, rebound by {@link repairTables}. */
export const TABLE_REWRITE = {
  id: "tables",
  flag: "repairTables",
  field: "repairs",
  eventField: "swaps",
  eventAlways: true,
  signal: "repairedTables",
  doubt: "its FROM tables were rewritten after it failed",
  metric: { name: "reex_final_repairs_total", help: "Final SQL that failed on a missing column and was rebound to the tables that hold its columns." },
  says: "final SQL failed; tables rebound",
  api: {
    shape: { from: "string", to: "string" },
    description:
      "FROM tables its final SQL was rebound to after it failed on a missing column (`agent.repairTables`): the table written and the one put in its place.",
  },
  docs: "rebound, before any retry, to the tables that hold its columns when exactly one fits each misplaced table (`src/agent/repair.ts`)",
  fails: "missing_column",
  async apply(sql, { schema }) {
    const repaired = repairTables(sql, schema);
    return repaired && { sql: repaired.sql, fixes: repaired.swaps };
  },
} as const satisfies RewriteRule<TableSwap>;

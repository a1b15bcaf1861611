/**
 * Schema introspection of a SQLite file (own read-only connection, in-process) and its two
 * textual forms: the CodeS-style prompt lines and the stored CREATE TABLE text.
 *
 * CodeS form (one line per table, then the foreign keys; names that are not plain identifiers are
 * written in backticks, the type is lower-cased and left out when undeclared):
 * ```
 * table singer , columns = [ singer.singer_id ( integer | primary key | values : 1 , 2 ) , singer.name ( text | comment : full name | values : Joe Sharp , Timbaland ) ]
 * foreign keys :
 * concert.stadium_id = stadium.stadium_id
 * ```
 */
import { fingerprintDatabase, openReadOnly, quoteIdent } from "./schema-db.js";
import { externalSchema } from "./source.js";
import type { ColumnInfo, DatabaseSchema, ForeignKey, TableInfo } from "./schema-types.js";

export type { ColumnInfo, DatabaseSchema, ForeignKey, TableInfo } from "./schema-types.js";

/** Side-car column descriptions `{table: {column: comment}}` (e.g. from BIRD's database_description CSVs); matched case-insensitively. */
export type ColumnDescriptions = Record<string, Record<string, string>>;

/** How much of each column's data to sample. */
export interface SchemaOptions {
  /** Example values per column. Default 3. */
  examples?: number;
  /** Example strings longer than this are cut and end in "...". Default 40. */
  maxExampleLength?: number;
  /** Column comments to attach. Default none. */
  descriptions?: ColumnDescriptions;
}

/** Rows scanned per column when sampling example values, so huge tables stay cheap. */
const EXAMPLE_SCAN_ROWS = 10_000;
const CACHE_SIZE = 32;
const cache = new Map<string, DatabaseSchema>();

/**
 * Introspects a database file (read-only) into a {@link DatabaseSchema}; cached in memory per
 * path + mtime + size + options. Throws DB_FILE_NOT_FOUND or DB_INVALID.
 */
export function loadSchema(dbPath: string, options: SchemaOptions = {}): DatabaseSchema {
  const introspected = externalSchema(dbPath);
  if (introspected) return options.descriptions ? withDescriptions(introspected, options.descriptions) : introspected;
  const examples = options.examples ?? 3;
  const maxLen = options.maxExampleLength ?? 40;
  const fp = fingerprintDatabase(dbPath);
  const key = JSON.stringify([fp.path, fp.mtimeMs, fp.size, examples, maxLen]);
  let schema = cache.get(key);
  if (schema) {
    cache.delete(key);
  } else {
    schema = introspect(fp.path, examples, maxLen);
  }
  cache.set(key, schema);
  while (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
  return options.descriptions ? withDescriptions(schema, options.descriptions) : schema;
}

/** The cached schema of `dbPath` (default options) for its current contents, if there is one; never reads the file's tables. */
export function cachedSchema(dbPath: string): DatabaseSchema | undefined {
  const introspected = externalSchema(dbPath);
  if (introspected) return introspected;
  const fp = fingerprintDatabase(dbPath);
  return cache.get(JSON.stringify([fp.path, fp.mtimeMs, fp.size, 3, 40]));
}

/** Puts a schema read elsewhere (another process, default options) into the cache for `dbPath`'s current contents. */
export function cacheSchema(dbPath: string, schema: DatabaseSchema): void {
  const fp = fingerprintDatabase(dbPath);
  cache.set(JSON.stringify([fp.path, fp.mtimeMs, fp.size, 3, 40]), schema);
  while (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
}

/** A copy of `schema` with column comments from `descriptions` (table and column names matched case-insensitively). */
export function withDescriptions(schema: DatabaseSchema, descriptions: ColumnDescriptions): DatabaseSchema {
  const byTable = new Map<string, Map<string, string>>();
  for (const [table, cols] of Object.entries(descriptions)) {
    const m = byTable.get(table.toLowerCase()) ?? new Map<string, string>();
    for (const [col, text] of Object.entries(cols)) if (text.trim()) m.set(col.toLowerCase(), text.trim().replace(/\s+/g, " "));
    byTable.set(table.toLowerCase(), m);
  }
  return {
    ...schema,
    tables: schema.tables.map((t) => {
      const m = byTable.get(t.name.toLowerCase());
      if (!m) return t;
      return {
        ...t,
        columns: t.columns.map((c) => {
          const comment = m.get(c.name.toLowerCase());
          return comment === undefined ? c : { ...c, comment };
        }),
      };
    }),
  };
}

function introspect(path: string, examples: number, maxLen: number): DatabaseSchema {
  const db = openReadOnly(path);
  try {
    const rows = db
      .prepare(
        `SELECT s.name AS name, s.sql AS sql FROM sqlite_schema s
         JOIN pragma_table_list l ON l.name = s.name AND l.schema = 'main'
         WHERE s.type = 'table' AND l.type IN ('table', 'virtual') AND s.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
         ORDER BY s.rowid`,
      )
      .all() as { name: string; sql: string | null }[];
    const colStmt = db.prepare(`SELECT name, type, "notnull" AS nn, pk FROM pragma_table_info(?) ORDER BY cid`);
    const fkStmt = db.prepare(`SELECT id, seq, "table" AS ref, "from" AS col, "to" AS refcol FROM pragma_foreign_key_list(?) ORDER BY id, seq`);
    const tables: TableInfo[] = rows.map((r) => {
      const cols = colStmt.all(r.name) as { name: string; type: string | null; nn: number; pk: number }[];
      const columns: ColumnInfo[] = cols.map((c) => ({
        name: c.name,
        type: c.type ?? "",
        primaryKey: c.pk > 0,
        notNull: c.nn === 1,
        examples: examples > 0 ? sampleValues(db, r.name, c.name, examples, maxLen) : [],
      }));
      let rowCount: number | null = null;
      try {
        rowCount = Number((db.prepare(`SELECT count(*) AS n FROM ${quoteIdent(r.name)}`).get() as { n: number }).n);
      } catch {
        rowCount = null;
      }
      return { name: r.name, columns, rowCount, sql: r.sql ?? "", foreignKeys: [] };
    });
    const byLower = new Map(tables.map((t) => [t.name.toLowerCase(), t]));
    const pkStmt = db.prepare(`SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk`);
    for (const t of tables) {
      const fks = fkStmt.all(t.name) as { id: number; seq: number; ref: string; col: string; refcol: string | null }[];
      for (const fk of fks) {
        const ref = byLower.get(fk.ref.toLowerCase());
        const from = t.columns.find((c) => c.name.toLowerCase() === fk.col.toLowerCase());
        if (!ref || !from) continue;
        let refName = fk.refcol;
        if (refName === null) {
          const pks = pkStmt.all(ref.name) as { name: string }[];
          refName = pks[fk.seq]?.name ?? null;
        }
        const to = refName === null ? undefined : ref.columns.find((c) => c.name.toLowerCase() === refName!.toLowerCase());
        if (!to) continue;
        t.foreignKeys.push({ table: t.name, column: from.name, refTable: ref.name, refColumn: to.name });
      }
    }
    return { path, tables, foreignKeys: tables.flatMap((t) => t.foreignKeys) };
  } finally {
    db.close();
  }
}

function sampleValues(db: ReturnType<typeof openReadOnly>, table: string, column: string, n: number, maxLen: number): (string | number)[] {
  try {
    const rows = db
      .prepare(
        `SELECT DISTINCT v FROM (SELECT ${quoteIdent(column)} AS v FROM ${quoteIdent(table)} LIMIT ${EXAMPLE_SCAN_ROWS})
         WHERE v IS NOT NULL AND typeof(v) <> 'blob' AND v <> '' LIMIT ${n}`,
      )
      .raw()
      .all() as [string | number | bigint][];
    return rows.map(([v]) => {
      if (typeof v === "bigint") return Number(v);
      if (typeof v === "number") return v;
      const s = v.replace(/\s+/g, " ").trim();
      return s.length > maxLen ? `${s.slice(0, maxLen)}...` : s;
    });
  } catch {
    return [];
  }
}

const PLAIN_IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Writes a name for the prompt: as is when a plain identifier, else in backticks. */
export function promptName(name: string): string {
  return PLAIN_IDENT.test(name) ? name : `\`${name.replace(/`/g, "``")}\``;
}

/** Schema text formats: CodeS prompt lines or CREATE TABLE statements. */
export type SchemaFormat = "codes" | "ddl";

/** The CodeS line of one table restricted to `columns` (indices; default all). */
export function renderTableCodes(table: TableInfo, columns?: ReadonlySet<number>): string {
  const t = promptName(table.name);
  const parts: string[] = [];
  table.columns.forEach((c, i) => {
    if (columns && !columns.has(i)) return;
    const slots: string[] = [];
    if (c.type) slots.push(c.type.toLowerCase());
    if (c.primaryKey) slots.push("primary key");
    if (c.comment) slots.push(`comment : ${c.comment}`);
    if (c.examples.length > 0) slots.push(`values : ${c.examples.join(" , ")}`);
    parts.push(slots.length > 0 ? `${t}.${promptName(c.name)} ( ${slots.join(" | ")} )` : `${t}.${promptName(c.name)}`);
  });
  return `table ${t} , columns = [ ${parts.join(" , ")} ]`;
}

/** CREATE TABLE text of one table: the stored statement when all columns are kept, else a synthesised one. */
export function renderTableDdl(table: TableInfo, columns?: ReadonlySet<number>, keptForeignKeys: ForeignKey[] = table.foreignKeys): string {
  if (!columns || columns.size === table.columns.length) {
    if (table.sql) return `${table.sql.trim()};`;
    columns = new Set(table.columns.map((_, i) => i));
  }
  const lines: string[] = [];
  const pk: string[] = [];
  table.columns.forEach((c, i) => {
    if (!columns!.has(i)) return;
    lines.push(`  ${quoteIdent(c.name)}${c.type ? ` ${c.type}` : ""}${c.notNull ? " NOT NULL" : ""}`);
    if (c.primaryKey) pk.push(quoteIdent(c.name));
  });
  if (pk.length > 0) lines.push(`  PRIMARY KEY (${pk.join(", ")})`);
  for (const fk of keptForeignKeys) {
    if (fk.table !== table.name) continue;
    lines.push(`  FOREIGN KEY (${quoteIdent(fk.column)}) REFERENCES ${quoteIdent(fk.refTable)} (${quoteIdent(fk.refColumn)})`);
  }
  return `CREATE TABLE ${quoteIdent(table.name)} (\n${lines.join(",\n")}\n);`;
}

/** One CodeS foreign-key line, `a.x = b.y`. */
export function renderForeignKey(fk: ForeignKey): string {
  return `${promptName(fk.table)}.${promptName(fk.column)} = ${promptName(fk.refTable)}.${promptName(fk.refColumn)}`;
}

/**
 * Renders tables of `schema` in schema order. `keep` maps a table name to the column indices to
 * show (undefined: all); tables missing from `keep` are left out. Default: every table, all columns.
 */
export function renderSchema(
  schema: DatabaseSchema,
  options: { format?: SchemaFormat; keep?: ReadonlyMap<string, ReadonlySet<number> | undefined> } = {},
): string {
  const format = options.format ?? "codes";
  const keep = options.keep;
  const tables = keep ? schema.tables.filter((t) => keep.has(t.name)) : schema.tables;
  const colsOf = (t: TableInfo): ReadonlySet<number> | undefined => keep?.get(t.name);
  const kept = (table: string, column: string): boolean => {
    if (!keep) return true;
    if (!keep.has(table)) return false;
    const cols = keep.get(table);
    if (!cols) return true;
    const t = schema.tables.find((x) => x.name === table)!;
    return cols.has(t.columns.findIndex((c) => c.name === column));
  };
  const fks = schema.foreignKeys.filter((fk) => kept(fk.table, fk.column) && kept(fk.refTable, fk.refColumn));
  if (format === "ddl") return tables.map((t) => renderTableDdl(t, colsOf(t), fks)).join("\n\n");
  const lines = tables.map((t) => renderTableCodes(t, colsOf(t)));
  if (fks.length > 0) lines.push("foreign keys :", ...fks.map(renderForeignKey));
  return lines.join("\n");
}

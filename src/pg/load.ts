/**
 * Copies a SQLite file into a fresh PostgreSQL database: tables with types mapped by SQLite's
 * affinity rules, primary and foreign keys, every row. Used by scripts/pg-load-examples.ts and the
 * tests to put the example databases on a real server. Needs a role that may create databases.
 */
import Database from "better-sqlite3";
import pg from "pg";
import { loadSchema } from "../sql/index.js";

/** Options of {@link loadSqliteIntoPostgres}. */
export interface LoadOptions {
  /** A role to give SELECT-only access (USAGE on schema public, SELECT on its tables). Default none. */
  readerRole?: string;
  /** Rows per INSERT statement. Default 500. */
  batchRows?: number;
}

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** The PostgreSQL type for a SQLite declared type, by SQLite's affinity rules (numbers kept 64-bit). */
export function postgresType(declared: string): string {
  const t = declared.toUpperCase();
  if (t.includes("INT")) return "bigint";
  if (/CHAR|CLOB|TEXT/.test(t)) return "text";
  if (t === "" || t.includes("BLOB")) return "text";
  if (/REAL|FLOA|DOUB/.test(t)) return "double precision";
  return "numeric";
}

/**
 * Creates database `database` (dropped first when it exists) on the server of `adminUrl` and copies
 * every table of the SQLite file at `sqlitePath` into its schema public.
 */
export async function loadSqliteIntoPostgres(sqlitePath: string, adminUrl: string, database: string, options: LoadOptions = {}): Promise<void> {
  const batch = options.batchRows ?? 500;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${quote(database)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${quote(database)} TEMPLATE template0 ENCODING 'UTF8'`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const schema = loadSchema(sqlitePath, { examples: 0 });
  const src = new Database(sqlitePath, { readonly: true, fileMustExist: true });
  try {
    await client.query("BEGIN");
    for (const t of schema.tables) {
      const cols = t.columns.map((c) => `${quote(c.name)} ${postgresType(c.type)}${c.notNull ? " NOT NULL" : ""}`);
      const pk = t.columns.filter((c) => c.primaryKey).map((c) => quote(c.name));
      if (pk.length > 0) cols.push(`PRIMARY KEY (${pk.join(", ")})`);
      await client.query(`CREATE TABLE ${quote(t.name)} (${cols.join(", ")})`);
    }
    for (const t of schema.tables) {
      const types = t.columns.map((c) => postgresType(c.type));
      const rows = src
        .prepare(`SELECT ${t.columns.map((c) => quote(c.name)).join(", ")} FROM ${quote(t.name)}`)
        .raw()
        .safeIntegers(true)
        .all() as unknown[][];
      for (let i = 0; i < rows.length; i += batch) {
        const chunk = rows.slice(i, i + batch);
        const values: unknown[] = [];
        const tuples = chunk.map(
          (row) =>
            `(${row
              .map((v, j) => {
                values.push(typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : v);
                return `$${values.length}::${types[j]}`;
              })
              .join(", ")})`,
        );
        await client.query(`INSERT INTO ${quote(t.name)} VALUES ${tuples.join(", ")}`, values);
      }
    }
    for (const fk of schema.foreignKeys) {
      await client.query(`ALTER TABLE ${quote(fk.table)} ADD FOREIGN KEY (${quote(fk.column)}) REFERENCES ${quote(fk.refTable)} (${quote(fk.refColumn)})`);
    }
    if (options.readerRole) {
      await client.query(`GRANT USAGE ON SCHEMA public TO ${quote(options.readerRole)}`);
      await client.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${quote(options.readerRole)}`);
    }
    await client.query("COMMIT");
    await client.query("ANALYZE");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  } finally {
    src.close();
    await client.end();
  }
}

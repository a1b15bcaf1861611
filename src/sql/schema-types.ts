/** The shape of a database schema (types only), below schema.ts and source.ts so that neither imports the other for it. */

/** One column: declared type as written ("" when none), key flags, example values and an optional comment. */
export interface ColumnInfo {
  name: string;
  type: string;
  primaryKey: boolean;
  notNull: boolean;
  /** A few distinct, non-null, non-empty values (strings truncated, BLOBs left out). */
  examples: (string | number)[];
  comment?: string;
}

/** `table.column` references `refTable.refColumn` (names as the schema spells them). */
export interface ForeignKey {
  table: string;
  column: string;
  refTable: string;
  refColumn: string;
}

/** One table (or virtual table; views are left out). `rowCount` is null when it cannot be counted. */
export interface TableInfo {
  name: string;
  columns: ColumnInfo[];
  rowCount: number | null;
  /** CREATE statement from sqlite_schema.sql. */
  sql: string;
  foreignKeys: ForeignKey[];
}

/** The introspected schema of one database, tables in creation order. Shared through a cache: do not mutate. */
export interface DatabaseSchema {
  path: string;
  tables: TableInfo[];
  foreignKeys: ForeignKey[];
}

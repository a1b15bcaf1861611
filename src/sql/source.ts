/**
 * The database source seam: what the loop needs from a database, whatever engine holds it. Two
 * implementations: a SQLite file (`SqliteFileSource` in sqlite-source.ts, the embedded default, run through the
 * executor pool) and a PostgreSQL connection (src/pg). The rest of reex names a database by its
 * key (a SQLite file's path, or `postgres:<name>`), so the executor, `loadSchema` and the prompt
 * builder look a key up here and hand non-file sources their work.
 */
import { ReexError } from "../errors/index.js";
import type { DatabaseSchema } from "./schema-types.js";
import type { ExecResult, ExecuteOptions } from "./types.js";

/** The engine behind a source. */
export type SourceKind = "sqlite" | "postgres";

/** One database reex can query: guarded execution, its schema, the values to match, its dialect. */
export interface DatabaseSource {
  /** What requests carry as the database path: the file path, or `postgres:<name>` (never a URL). */
  readonly key: string;
  /** Display name (no credentials, no host). */
  readonly name: string;
  readonly kind: SourceKind;
  /** The engine as prompts name it: "SQLite" or "PostgreSQL". */
  readonly dialect: string;
  /** Runs one guarded read-only query; never rejects for bad SQL. */
  execute(sql: string, options?: ExecuteOptions): Promise<ExecResult>;
  /** Introspects the schema (cached by the source until {@link DatabaseSource.refresh}). */
  loadSchema(): Promise<DatabaseSchema>;
  /** Path of a SQLite file whose text columns hold the values to match (the file itself for SQLite; a bounded snapshot for others). */
  valuesFile(): Promise<string>;
  /** Releases connections; the source answers EXECUTOR_UNAVAILABLE afterwards. */
  close(): Promise<void>;
}

/** A source that is not a SQLite file, with the schema it last introspected (what the synchronous callers read). */
export interface ExternalSource extends DatabaseSource {
  /** The schema of the last successful {@link DatabaseSource.loadSchema}, undefined before it. */
  readonly schema: DatabaseSchema | undefined;
  /** The values snapshot written by the last {@link DatabaseSource.valuesFile}, undefined before it. */
  readonly valuesPath: string | undefined;
}

const external = new Map<string, ExternalSource>();

/** Makes `source` answer for its key in this process (the executor, `loadSchema` and the prompt builder look it up). */
export function registerSource(source: ExternalSource): void {
  external.set(source.key, source);
}

/** Forgets the source of `key` (does not close it). */
export function unregisterSource(key: string): void {
  external.delete(key);
}

/** The registered non-file source of `key`, or undefined (then the key is a SQLite file path). */
export function sourceFor(key: string): ExternalSource | undefined {
  return external.size === 0 ? undefined : external.get(key);
}

/** The engine name of the database under `key`: a registered source's dialect, else "SQLite". */
export function dialectOf(key: string): string {
  return sourceFor(key)?.dialect ?? "SQLite";
}

/** The introspected schema of a registered source, for the synchronous `loadSchema`; throws DB_UNREACHABLE before its first load. */
export function externalSchema(key: string): DatabaseSchema | undefined {
  const source = sourceFor(key);
  if (!source) return undefined;
  if (!source.schema) throw new ReexError("DB_UNREACHABLE", `the schema of database "${source.name}" has not been read yet`);
  return source.schema;
}

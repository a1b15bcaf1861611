/** The embedded default database source: a SQLite file, queried through an {@link Executor} (the executor pool). */
import { loadSchema } from "./schema.js";
import type { DatabaseSource } from "./source.js";
import type { DatabaseSchema } from "./schema-types.js";
import type { ExecResult, ExecuteOptions, Executor } from "./types.js";

/** A SQLite file queried through an {@link Executor} (the executor pool); the embedded default. */
export class SqliteFileSource implements DatabaseSource {
  readonly kind = "sqlite" as const;
  readonly dialect = "SQLite";
  constructor(
    readonly key: string,
    readonly name: string,
    private readonly executor: Executor,
  ) {}

  execute(sql: string, options?: ExecuteOptions): Promise<ExecResult> {
    return this.executor.execute(this.key, sql, options);
  }

  async loadSchema(): Promise<DatabaseSchema> {
    return loadSchema(this.key);
  }

  async valuesFile(): Promise<string> {
    return this.key;
  }

  async close(): Promise<void> {}
}

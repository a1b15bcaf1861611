/** PostgreSQL as a database source: the guard layers, the read-only session, type normalisation and the source itself. */
export { checkPostgresSql, deniedFunctionsIn, type PgGuardResult } from "./guard.js";
export { deniedFunction } from "./denied.js";
export type { FunctionPolicy } from "./functions.js";
export { ClientStuck, runReadOnly, type ReadOnlyLimits } from "./session.js";
export { classifyPostgresError, parserFor, reexTypes } from "./types.js";
export {
  PostgresSource,
  defaultSourceName,
  expandUrl,
  isPostgresSetting,
  isPostgresUrl,
  openPostgresSource,
  parseSourceSetting,
  type PostgresPoolStats,
  type PostgresSourceOptions,
} from "./source.js";
export { loadSqliteIntoPostgres, type LoadOptions } from "./load.js";

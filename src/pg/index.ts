/** PostgreSQL as a database source: the guard layers, the read-only session, type normalisation and the source itself. */
export { checkPostgresSql, deniedFunction, deniedFunctionsIn, type PgGuardResult } from "./guard.js";
export { ClientStuck, runReadOnly, type ReadOnlyLimits } from "./session.js";
export { classifyPostgresError, parserFor, reexTypes } from "./types.js";
export {
  PostgresSource,
  defaultSourceName,
  expandUrl,
  isPostgresUrl,
  openPostgresSource,
  parseSourceSetting,
  type PostgresPoolStats,
  type PostgresSourceOptions,
} from "./source.js";
export { loadSqliteIntoPostgres, type LoadOptions } from "./load.js";

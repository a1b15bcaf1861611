/** PostgreSQL as a database source: the guard layers, the read-only session, type normalisation and the source itself. */
export { checkPostgresSql } from "./guard.js";
export { PostgresSource, expandUrl, isPostgresSetting, isPostgresUrl, openPostgresSource, parseSourceSetting } from "./source.js";
export { loadSqliteIntoPostgres } from "./load.js";

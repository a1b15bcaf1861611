/** The by-name deny-list of the Postgres guard: its second layer, behind the allow-list of ./functions.ts. */
/**
 * Functions refused by name (schema qualification ignored, case folded as PostgreSQL folds
 * unquoted names): files, large objects, other servers, sleeping, signalling backends, settings,
 * locks, notifications, replication, WAL and backups, sequences, and the functions that run SQL
 * given as a string (the *_to_xml family, ts_stat, ts_rewrite).
 */
const DENIED_PREFIXES = [
  "pg_read_",
  "pg_ls_",
  "pg_stat_file",
  "pg_file_",
  "lo_",
  "dblink",
  "pg_sleep",
  "pg_terminate_backend",
  "pg_cancel_backend",
  "pg_signal_",
  "pg_reload_conf",
  "pg_rotate_logfile",
  "pg_log_",
  "set_config",
  "pg_advisory",
  "pg_try_advisory",
  "pg_notify",
  "pg_logical_",
  "pg_replication_",
  "pg_create_",
  "pg_drop_",
  "pg_copy_",
  "pg_switch_wal",
  "pg_promote",
  "pg_backup_",
  "pg_start_backup",
  "pg_stop_backup",
  "pg_export_snapshot",
  "pg_import_",
  "pg_wal_",
  "pg_current_logfile",
  "pg_stat_reset",
  "pg_truncate_",
  "query_to_xml",
  "cursor_to_xml",
  "database_to_xml",
  "schema_to_xml",
  "table_to_xml",
  "ts_stat",
  "ts_rewrite",
  "nextval",
  "setval",
  "txid_current",
  "pg_current_xact_id",
  "pg_walfile_name",
  "postgres_fdw",
];

/** The function name (last part, lower-cased) when it is one the guard refuses, else null. */
export function deniedFunction(name: string): string | null {
  const n = name.toLowerCase();
  return DENIED_PREFIXES.some((p) => n.startsWith(p)) ? n : null;
}

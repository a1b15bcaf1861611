/*
 * A SQLite loadable extension whose only effect is to turn on double-quoted string literals for
 * the connection that loads it: SQLITE_DBCONFIG_DQS_DML and SQLITE_DBCONFIG_DQS_DDL, the runtime
 * switches behind stock SQLite's default (SQLITE_DQS=3). better-sqlite3 is compiled with
 * SQLITE_DQS=0 and exposes no sqlite3_db_config, so reex loads this into each query connection
 * (src/sql/dqs.ts).
 *
 * It also registers reex_limit_length(N), which the executor calls once right after loading:
 * it lowers the connection's SQLITE_LIMIT_LENGTH (the largest string or BLOB, zeroblob() included)
 * to N and can never raise it. Later calls on the same connection fail, so a query cannot
 * change the limit it runs under.
 */
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

static void reex_limit_length(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  int *used = (int *)sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  sqlite3_int64 n = sqlite3_value_int64(argv[0]);
  int current = sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1);
  (void)argc;
  if (*used) {
    sqlite3_result_error(ctx, "reex_limit_length may be called once per connection", -1);
    return;
  }
  *used = 1;
  if (n > 0 && n < current) sqlite3_limit(db, SQLITE_LIMIT_LENGTH, (int)n);
  sqlite3_result_int(ctx, sqlite3_limit(db, SQLITE_LIMIT_LENGTH, -1));
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_reexdqs_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  int dml = 0, ddl = 0, rc;
  SQLITE_EXTENSION_INIT2(pApi);
  rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 1, &dml);
  if (rc == SQLITE_OK) rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 1, &ddl);
  if (rc == SQLITE_OK && (dml != 1 || ddl != 1)) {
    if (pzErrMsg) *pzErrMsg = sqlite3_mprintf("reex_dqs: SQLite did not turn on double-quoted strings");
    return SQLITE_ERROR;
  }
  if (rc == SQLITE_OK) {
    int *used = (int *)sqlite3_malloc(sizeof(int));
    if (!used) return SQLITE_NOMEM;
    *used = 0;
    rc = sqlite3_create_function_v2(db, "reex_limit_length", 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, used, reex_limit_length, 0, 0, sqlite3_free);
  }
  return rc;
}

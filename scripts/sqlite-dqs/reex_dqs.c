/*
 * A SQLite loadable extension whose only effect is to turn on double-quoted string literals for
 * the connection that loads it: SQLITE_DBCONFIG_DQS_DML and SQLITE_DBCONFIG_DQS_DDL, the runtime
 * switches behind stock SQLite's default (SQLITE_DQS=3). better-sqlite3 is compiled with
 * SQLITE_DQS=0 and exposes no sqlite3_db_config, so reex loads this into each query connection
 * (src/sql/dqs.ts). It registers no SQL function and keeps no state.
 */
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

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
  return rc;
}

/** The execution half of the SQL layer: guard, error classification, registry and executor pool. */
export { classifySqliteError, classifyThrown, type SqlErrorInfo } from "./classify.js";
export { lexicalRefusal, openReadonly, prepareGuarded, refusal, scanSql, type GuardResult, type SqlScan } from "./guard.js";
export { ConnectionCache, type ConnectionCacheOptions, type RunFailure, type RunOutcome, type RunSuccess } from "./connections.js";
export { ExecutorPool, closeDirectConnections, executeDirect, type ExecutorPoolOptions, type ExecutorPoolStats } from "./executor.js";
export {
  DatabaseRegistry,
  checkDatabasePath,
  validateDatabaseFile,
  type DatabaseEntry,
  type DatabaseRegistryOptions,
  type RegisterOptions,
} from "./registry.js";
export {
  SqliteFileSource,
  dialectOf,
  externalSchema,
  registerSource,
  sourceFor,
  unregisterSource,
  type DatabaseSource,
  type ExternalSource,
  type SourceKind,
} from "./source.js";

/** The execution half of the SQL layer: guard, error classification, registry and executor pool. */
export type { SqlErrorInfo } from "./classify.js";
export { ExecutorPool, closeDirectConnections, executeDirect } from "./executor.js";
export { DatabaseRegistry, checkDatabasePath, type DatabaseEntry } from "./registry.js";
export { dialectOf, registerSource, sourceFor, unregisterSource, type ExternalSource } from "./source.js";
export { ExampleStore, questionKey, rankExamples, type VerifiedExample } from "./examples.js";
export { jsonCell, type JsonCell } from "./json-cell.js";

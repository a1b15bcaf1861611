/**
 * The pieces of src/sql that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
import type { ExecResult } from "./types.js";

export { classifySqliteError } from "./classify.js";
export { lexicalRefusal, scanSql } from "./guard.js";
export { withDescriptions, renderSchema } from "./schema.js";

/** A query that did not run or did not finish (the failure half of {@link ExecResult}). */
export type ExecFailure = Extract<ExecResult, { ok: false }>;

/**
 * The pieces of src/pg that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { deniedFunctionsIn } from "./guard.js";
export { deniedFunction } from "./denied.js";

/**
 * The pieces of src/errors that only its tests import. No folder under src/ imports this entry
 * point (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { MAX_MESSAGE_BYTES } from "./redact.js";

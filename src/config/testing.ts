/**
 * The configuration's pieces that only its tests import (the whole schema, and the input type a
 * partial configuration has, the speculative modes only the schema reads). No folder under src/ imports this entry point (docs/architecture.md);
 * the runtime surface is ./index.ts.
 */
export { configSchema, type ConfigInput } from "./schema.js";
export { SPECULATIVE_MODES } from "./vocabulary.js";

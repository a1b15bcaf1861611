/**
 * The runtime's pieces that only its tests import (the model fallback). No folder under src/ imports
 * this entry point (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { PLACEHOLDER_MODEL, resolveModel, STARTER_MODEL } from "./model.js";

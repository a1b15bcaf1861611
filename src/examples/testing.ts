/**
 * The pieces of src/examples that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export type { ExampleSet } from "./types.js";
export { BUILD_MARKER, EXAMPLE_DATABASES, exampleDbPath, PAGE_SIZE } from "./layout.js";

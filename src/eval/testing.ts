/**
 * The pieces of src/eval that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { loadPredictions, parseDataset, resolveDbPath } from "./datasets.js";
export { aggregate, scoreItem, sortDifficulties, summarize, type ScoreInput } from "./metrics.js";
export type { EvalProgress } from "./run.js";
export { renderHtml } from "./report.js";
export { renderProgressLine } from "./progress.js";

/** Evaluation harness: BIRD/Spider loaders, EX metrics under every rule, the runner, the self-check and reports. */
export { alignPredictions, loadDataset, parsePredictions, type DatasetLayout, type EvalItem } from "./datasets.js";
export { EX_RULES, compareResults, copyCount, pairedDifference, type ExRule, type ItemScore } from "./metrics.js";
export {
  DEFAULT_EVAL_MAX_ROWS,
  DEFAULT_EVAL_TIMEOUT_MS,
  describeSelfCheck,
  examplesFromPool,
  runEval,
  scorePredictions,
  selfCheck,
  type EvalExecOptions,
  type EvalRun,
  type RunEvalOptions,
} from "./run.js";
export { createReport, writeReport } from "./report.js";
export { createProgressBar, type ProgressBar, type ProgressStream } from "./progress.js";

/**
 * Training's pieces that its tests check one by one (each reward, advantages, the experience
 * format, group collection, the learner bridge). No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export {
  REEX_WEIGHT_PRESETS,
  cellPrecision,
  cellRecall,
  columnMatchShare,
  emReward,
  entityReward,
  explorationReward,
  gatedQatch,
  qatchScore,
  scoreResponse,
  sigmoid,
  softFormat,
  strictFormat,
  tupleCardinality,
  type RewardSpec,
} from "./rewards.js";
export { advantageDiagnostics, computeAdvantages, correctnessFirst } from "./advantages.js";
export {
  experiencePath,
  parseExperience,
  readExperience,
  sanitizeLogprobs,
  writeExperience,
  type ExperienceRecord,
} from "./experience.js";
export { assignAdvantages, collectStep, toExperienceRecord } from "./groups.js";
export { summarisePreflight, type PreflightOutcome } from "./preflight.js";
export { heldoutDecoder } from "./loop.js";
export { readMetrics } from "./report.js";
export { latestCheckpoint } from "./checkpoints.js";
export { createLearnerStep, learnerArgs, learnerDir, learnerRequestFile, type LearnerRequest, type LearnerStep } from "./learner.js";
export { learnerRequestJsonSchema, learnerRequestSchema } from "./learner-request.js";
export { scheduleFor } from "./schedule.js";
export { parseTraces, sftRecord, splitInjected } from "./traces.js";

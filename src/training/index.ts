/** Training: rewards (every preset of docs/training.md "Rewards"), advantages, rollout groups, the experience format, the learner bridge, the `reex train` loop and the GRPO pre-flight. */
export {
  REWARD_PRESETS,
  REWARD_TEMPLATES,
  GoldCache,
  gatherFacts,
  resolveRewardSpec,
  rewardFromFacts,
  type RewardBreakdown,
  type RewardFacts,
} from "./rewards.js";
export { runSignalCheck } from "./signal.js";
export { exampleFamily, exampleTrace } from "./traces.js";
export { runGroup, type TrainingQuestion } from "./groups.js";
export { loadTrainConfig, parseTrainConfig, type TrainConfig, type TrainConfigInput, type TrainMode } from "./config.js";
export { readMetrics, type MetricsRow } from "./report.js";
export { listCheckpoints } from "./checkpoints.js";
export { learnerEnv } from "./learner.js";
export { type LearnerRequestFile, learnerRequestSchema } from "./learner-request.js";
export { runTraining, type TrainResult } from "./loop.js";
export { runPreflight } from "./preflight.js";
export { runRejectionSampling, type RejectionGroup } from "./rejection.js";

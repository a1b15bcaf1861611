/** The agent: model profiles, prompts, response parsing, probe feedback, the stepwise rollout and constrained-decoding grammars. */
export { FEEDBACK_MODES, PROMPT_FAMILIES, type FeedbackMode, type PromptFamily } from "./types.js";
export {
  PROFILES,
  PROFILE_IDS,
  familyFor,
  getProfile,
  isStarterModel,
  reexProfile,
  resolveProfile,
  STARTER_NAME_PREFIX,
  type ModelProfile,
  type ProfileChoice,
  type ProfileId,
} from "./profiles/index.js";
export { buildPrompt, type BuiltPrompt, type PromptExample, type PromptTurn } from "./prompts.js";
export { extractFinal, extractProbes, formatCheck, normalizeSql, segments } from "./parse.js";
export { formatFeedback, resultBlock } from "./feedback.js";
export {
  cloneRolloutState,
  continueRollout,
  createRolloutState,
  finishRollout,
  forkRollout,
  rollout,
  rolloutStep,
  runRollout,
  type BindingReport,
  type RolloutResult,
  type RolloutState,
} from "./rollout.js";
export { OWN_ANSWERS, resolveRolloutOptions, type RolloutOptions } from "./rollout-options.js";
export { NameBinding } from "./binding.js";
export { buildSegmentGrammars, checkIdentifiers, identifiersIn, type SchemaNames, type SegmentGrammars } from "./grammar.js";
export { suspectCondition } from "./conditions.js";
export {
  REWRITE_RULES,
  copyRewriteFields,
  describeRewrites,
  REWRITES_OFF,
  rewriteSwitches,
  rewritesIn,
  type RewriteFields,
  type RewriteId,
  type RewriteSignal,
} from "./rewrites.js";

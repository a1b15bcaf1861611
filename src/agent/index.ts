/** The agent: prompts, response parsing, probe feedback, the stepwise rollout and constrained-decoding grammars. */
export {
  FAMILY_INSTRUCTIONS,
  ROLE_TEXT,
  TABLE_ALIASES,
  UNANSWERABLE_MARKER,
  buildPrompt,
  schemaSection,
  systemPrompt,
  type BuiltPrompt,
  type PromptInput,
} from "./prompts.js";
export {
  END_TOKENS,
  extractFinal,
  extractProbes,
  formatCheck,
  normalizeSql,
  segments,
  stripSemicolons,
  unanswerableReason,
  unwrapSql,
  type FinalAnswer,
  type FormatVerdict,
  type Segment,
  type TagName,
} from "./parse.js";
export {
  LIMIT_FEEDBACK,
  LOCKED_FEEDBACK,
  REPEATED_PROBE_FEEDBACK,
  TIMEOUT_FEEDBACK,
  defuse,
  formatFeedback,
  resultBlock,
  schemaHint,
  type FeedbackOptions,
} from "./feedback.js";
export {
  cloneRolloutState,
  continueRollout,
  createRolloutState,
  finishRollout,
  forkRollout,
  rollout,
  rolloutStep,
  runRollout,
  type ProbeRecord,
  type RolloutOptions,
  type RolloutResult,
  type RolloutState,
  type RolloutStopReason,
  type StepOutcome,
} from "./rollout.js";
export {
  buildGrammar,
  buildSegmentGrammars,
  checkIdentifiers,
  type GrammarStart,
  type SchemaNames,
  type SegmentGrammars,
} from "./grammar.js";
export { preparePrompt, type PrepareOptions, type PreparedPrompt } from "./inputs.js";

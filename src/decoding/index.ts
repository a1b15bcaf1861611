/** Decoding: greedy, linear, tree and tree-prune strategies over the agent's rollout, and the vote on executed candidates. */
export type { Answer, AnswerRequest, Candidate, DecodeContext, FeedbackMode, PromptFamily, Strategy } from "./types.js";
export { STRATEGIES } from "./types.js";
export { VOTE_RULE, saysNothingMatched, vote, type Ballot, type EmptyVotes, type VoteGroup, type VoteOutcome } from "./vote.js";
export { answerStatus, candidateView, type AnswerStatus, type CandidateView } from "./view.js";
export {
  DEFAULT_DECODER_DEFAULTS,
  createDecoder,
  decoderDefaults,
  type Decode,
  type Decoder,
  type DecoderDefaults,
  type DecoderDeps,
} from "./decode.js";
export {
  DEFAULT_MATCH_LIMIT,
  createGrammarBuilder,
  createPromptBuilder,
  schemaNames,
  type GrammarBuilderOptions,
  type GrammarFor,
  type PromptBuilder,
  type PromptBuilderOptions,
  type PromptFor,
} from "./prompt.js";
export { ROOT_PATH, TREE_SPAWN_FACTOR, splitQuota } from "./tree.js";
export { pathSeed } from "./run.js";
export {
  CONFIDENCE_MODEL,
  VOTE_CONFIDENCE_MODEL,
  confidenceModelFor,
  SIGNALS,
  answerSignals,
  assessAnswer,
  probability,
  ungroundedShare,
  type AssessInput,
  type Confidence,
  type ConfidenceModel,
  type SignalName,
  type Signals,
} from "./confidence.js";

/** Decoding: greedy, linear, tree and tree-prune strategies over the agent's rollout, and the vote on executed candidates. */
export type { Answer, AnswerRequest, DecodeContext, FeedbackMode, PromptFamily, RetrievedExample, Strategy } from "./types.js";
export { STRATEGIES } from "./types.js";
export { saysNothingMatched, vote, type EmptyVotes } from "./vote.js";
export { answerStatus, answerView, roundMs, type AnswerView } from "./view.js";
export { DEFAULT_DECODER_DEFAULTS, createDecoder, createServedGrammarFor, type Decode } from "./decode.js";
export { answerRequestFields, CONVERSATION_ID, teachingRequestFields } from "./request-schema.js";
export { DEFAULT_MATCH_LIMIT, createGrammarBuilder, createPromptBuilder, schemaNames, type GrammarFor, type PromptBuilder, type PromptFor } from "./prompt.js";
export { confidenceModelFor, SIGNALS, probability, type ConfidenceModel, type Signals } from "./confidence.js";

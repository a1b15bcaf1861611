/**
 * What one request to answer a question looks like, and what comes back. The server, the CLI,
 * the evaluation harness and the trainer all call the decoder through these types.
 */
import type { EventSink } from "../events/index.js";
import type { ExecResult } from "../sql/index.js";
import type { TokenUsage } from "../policy/index.js";
import type { BindingReport, FeedbackMode, PromptExample, PromptFamily, PromptTurn, RewriteFields } from "../agent/index.js";
import type { Strategy } from "../config/index.js";
import type { VoteOutcome } from "./vote.js";
import type { Confidence } from "./signals.js";

/** The strategy list (src/config's `STRATEGIES`) and the agent's vocabulary, re-exported for callers of the decoder. */
export { STRATEGIES, type Strategy } from "../config/index.js";
export type { FeedbackMode, PromptFamily };

/** One question to answer against one registered database file. */
export interface AnswerRequest {
  /** Absolute path of the SQLite file (already registered and validated). */
  dbPath: string;
  question: string;
  evidence?: string;
  /** Default "greedy". */
  strategy?: Strategy;
  /** Candidates for linear/tree strategies. Default 16. */
  candidates?: number;
  /** Most children per tree node. Default 3. */
  branching?: number;
  /** Probe rounds per trajectory. Default 10. */
  maxInteractions?: number;
  /** Tokens sampled per trajectory at most. Default 1024. */
  maxTokens?: number;
  /** Budget of generated tokens over all trajectories of the request; default unlimited. */
  maxTotalTokens?: number;
  /** Default "full". */
  feedback?: FeedbackMode;
  /** A probe's name error lists the real columns or tables. Default true (the config's `agent.schemaHints`). */
  schemaHints?: boolean;
  /** Default the profile's first family ("execution-aware" for reex, skyrl-sql and generic). */
  promptFamily?: PromptFamily;
  /** The model profile (`reex`, `skyrl-sql`, `omnisql`, `think-answer`, `generic`); default the decoder's (config or detected). */
  profile?: string;
  /** Sampling temperature for non-greedy strategies. Default 0.7. */
  temperature?: number;
  /** Nucleus (top-p) threshold for non-greedy strategies, in (0, 1]. Default 0.95 (the config's `decoding.topP`). */
  topP?: number;
  seed?: number;
  /** Constrain output to the tag structure and the schema's identifiers. Default the decoder's (`decoding.constrained`: on for the starter model only). */
  constrained?: boolean;
  /** Wall-clock deadline for the whole request, ms; default none. */
  deadlineMs?: number;
  /**
   * Verified examples of the database to show in the prompt, most similar first (a front end's
   * retrieval: the store's ids and scores); the prompt keeps those that fit its share of the token
   * budget (`teach.examplesTokenShare`), dropping the lowest-scored first. Default none.
   */
  examples?: readonly RetrievedExample[];
  /** The conversation's earlier turns, oldest first; the prompt keeps the newest that fit `teach.historyTokenShare`. Default none. */
  turns?: readonly PromptTurn[];
}

/** A verified example as a front end retrieved it for a request: the prompt's example, its store id and its similarity. */
export interface RetrievedExample extends PromptExample {
  id: string;
  score: number;
}

/** What the prompt showed besides the schema: the examples that fit (best first), the earlier turns that fit, and their estimated tokens. */
export interface ShownExtras {
  examples: { id: string; question: string; score: number }[];
  turns: number;
  exampleTokens: number;
  turnTokens: number;
}

/** One finished trajectory's answer and how the vote saw it; each rewrite rule that changed its final SQL lists its changes under its field (`repairs`, …: the agent's `REWRITE_RULES`). */
export interface Candidate extends RewriteFields {
  index: number;
  /** Tree path / trajectory id that produced it. */
  path: string;
  sql: string | null;
  answerable: boolean;
  /** Execution of the final SQL (absent when there is no SQL). */
  result?: ExecResult;
  /** Vote group (identical results share one); null when the candidate failed. */
  group: number | null;
  /** Size of this candidate's group. */
  votes: number;
  error?: string;
  interactions: number;
  /** How its names were bound to their FROM lists (`decoding.bindNames`, constrained requests); absent when they were not. */
  binding?: BindingReport;
  /** Mean log-probability of the sampled tokens; NaN for a single candidate (greedy), which has no tie to break and skips computing them. */
  meanLogprob: number;
  /** The whole response after the prompt, injected feedback included (the server leaves it out of its answers). */
  text: string;
}

/** The answer to one request. */
export interface Answer {
  sql: string | null;
  answerable: boolean;
  /** Why the model said the question cannot be answered, when it did. */
  reason?: string;
  result?: ExecResult;
  candidates: Candidate[];
  /** Index of the winning candidate, or null. */
  winner: number | null;
  /**
   * How the vote chose the winner (see VOTE_RULE): "majority", "tie-logprob", "tie-first", or
   * "fallback-logprob" when no candidate's SQL ran (the winner's `error` says why), "none" without one.
   */
  decidedBy: VoteOutcome["decidedBy"];
  /** How sure the answer is, and why not more; the decoder always sets it (a caller's own decoder may not). */
  confidence?: Confidence;
  /** Why fewer than the requested candidates came back, if so. */
  shortfall?: string;
  /** A word about who answered, shown by every front end: set when a random-weight placeholder model wrote the answer. Default none. */
  notice?: string;
  /** The examples and earlier turns the prompt showed; absent when the request gave none (or a caller's own prompt source reports none). */
  shown?: ShownExtras;
  usage: TokenUsage;
  timings: { totalMs: number; firstTokenMs?: number };
}

/** Context for one decode: where events go and how to stop. */
export interface DecodeContext {
  sink?: EventSink;
  signal?: AbortSignal;
}

/**
 * The fixed lists of reex, each written once: the config schema, the HTTP and MCP schemas, the
 * CLI's flags and docs/architecture.md's "Fixed lists and defaults" table derive from them (a test
 * compares the table). Adding a strategy is one entry here plus its runner in src/decoding.
 */

/** Decoding strategies: one greedy rollout, k independent rollouts, or a tree that shares prefixes (optionally pruned). */
export const STRATEGIES = ["greedy", "linear", "tree", "tree-prune"] as const;

/** One of {@link STRATEGIES}. */
export type Strategy = (typeof STRATEGIES)[number];

/** Feedback modes: what the model is shown of a probe's execution (the robustness study's settings). */
export const FEEDBACK_MODES = ["full", "schema-only", "row-count", "error-only", "locked", "timeout"] as const;

/** One of {@link FEEDBACK_MODES}. */
export type FeedbackMode = (typeof FEEDBACK_MODES)[number];

/** Prompt families of the ReEx appendix: probes allowed, think then answer, answer only (in the appendix's order). */
export const PROMPT_FAMILIES = ["execution-aware", "standard", "direct"] as const;

/** One of {@link PROMPT_FAMILIES}. */
export type PromptFamily = (typeof PROMPT_FAMILIES)[number];

/** The built-in model profiles (src/agent/profiles), in the order docs list them. */
export const PROFILE_IDS = ["reex", "skyrl-sql", "omnisql", "think-answer", "generic"] as const;

/** One of {@link PROFILE_IDS}. */
export type ProfileId = (typeof PROFILE_IDS)[number];

/**
 * How a vote chose its winner: by a majority of results, by the higher mean log-probability or the
 * first candidate among tied groups, by log-probability when no candidate's SQL ran, or none.
 */
export const DECIDED_BY = ["majority", "tie-logprob", "tie-first", "fallback-logprob", "none"] as const;

/** One of {@link DECIDED_BY}. */
export type DecidedBy = (typeof DECIDED_BY)[number];

/** Speculative decoding modes of the policy: none, or n-gram drafting verified exactly (src/policy/draft.ts). */
export const SPECULATIVE_MODES = ["off", "ngram"] as const;

/** One of {@link SPECULATIVE_MODES}. */
export type SpeculativeMode = (typeof SPECULATIVE_MODES)[number];

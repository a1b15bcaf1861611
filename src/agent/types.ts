/**
 * The agent's own vocabulary: prompt families and feedback modes. The agent owns them (it builds the
 * prompts and writes the feedback); decoding, training and the front ends import them from here.
 */

/** Prompt families of the ReEx appendix: probes allowed, think then answer, answer only. */
export type PromptFamily = "execution-aware" | "standard" | "direct";

/** Every prompt family, in the order the ReEx appendix lists them. */
export const PROMPT_FAMILIES: readonly PromptFamily[] = ["execution-aware", "standard", "direct"];

/** Feedback modes: what the model is shown of a probe's execution. */
export type FeedbackMode = "full" | "schema-only" | "row-count" | "error-only" | "locked" | "timeout";

/** Every feedback mode: what the model is shown of a probe's result, for the ReEx paper's robustness study (`full` in serving). */
export const FEEDBACK_MODES: readonly FeedbackMode[] = ["full", "schema-only", "row-count", "error-only", "locked", "timeout"];

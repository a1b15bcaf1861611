/**
 * The agent's vocabulary: prompt families and feedback modes. The lists are written once in
 * src/config's vocabulary (the config schema is their lowest user); the agent re-exports them.
 */

export { FEEDBACK_MODES, PROMPT_FAMILIES, type FeedbackMode, type PromptFamily } from "../config/index.js";

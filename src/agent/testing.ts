/**
 * The agent's pieces that its tests check one by one (profiles by name, prompt text, feedback
 * strings, the grammar builder, resuming a rollout). No folder under src/ imports this entry
 * point (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { detectProfile, omnisqlProfile, skyrlSqlProfile, thinkAnswerProfile } from "./profiles/index.js";
export { FAMILY_INSTRUCTIONS, ROLE_TEXT, UNANSWERABLE_MARKER, systemPrompt } from "./prompts.js";
export { unwrapSql } from "./parse.js";
export { LIMIT_FEEDBACK, LOCKED_FEEDBACK, REPEAT_LIMIT_FEEDBACK, REPEATED_PROBE_FEEDBACK, TIMEOUT_FEEDBACK, schemaHint, wrapFeedback } from "./feedback.js";
export { buildGrammar } from "./grammar.js";
export { tagWith } from "./syntax.js";
export { preparePrompt } from "./inputs.js";
export { repairTables } from "./repair.js";
export { repairCoverage, rowsAsked } from "./coverage.js";
export { repairLiterals, type NamedValue, type ReadRows } from "./literals.js";

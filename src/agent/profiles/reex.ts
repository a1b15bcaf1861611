/**
 * `reex`: the ReEx-SQL protocol this project's own models are trained on (`<think>`,
 * `<intermediate_sql>` probes answered in `<result>`, `<final_sql>`), under the three prompt
 * families of the ReEx appendix. Source: the ReEx-SQL paper's appendix prompts (no public
 * repository); the wording is this project's (src/agent/prompts.ts).
 */
import { buildPrompt } from "../prompts.js";
import { REEX_SYNTAX } from "../syntax.js";
import { tagFormat, wrappersOf } from "./common.js";
import type { ModelProfile } from "./types.js";

/** The ReEx-tag profile: reex's starter and ReEx-style fine-tunes. */
export const reexProfile: ModelProfile = {
  id: "reex",
  title: "ReEx tags: <think>, <intermediate_sql> → <result>, <final_sql>",
  models: ["reex starter (models/reex-starter.gguf)", "ReEx-SQL-style fine-tunes"],
  sources: ["ReEx-SQL paper, appendix prompts (no public repository)"],
  families: ["execution-aware", "standard", "direct"],
  schemaFormat: "codes",
  syntax: REEX_SYNTAX,
  ...wrappersOf(REEX_SYNTAX),
  feedbackStyle: "lines",
  unanswerable: true,
  // the starter was trained without examples in its prompt: 3 of them took it from 6 right of 21 to 0 (docs/benchmarks.md#verified-examples)
  examples: false,
  buildPrompt: (input) => buildPrompt(input),
  formatCheck: tagFormat(REEX_SYNTAX),
};

/**
 * `generic`: any instruct model that was never trained on a text-to-SQL protocol. The ReEx tags
 * and family instructions, plus one worked example of the family's exchange in the system message,
 * so that a model that only follows instructions sees the tags used once before it writes them.
 */
import { buildPrompt } from "../prompts.js";
import { REEX_SYNTAX } from "../syntax.js";
import type { PromptFamily } from "../types.js";
import { tagFormat, wrappersOf } from "./common.js";
import type { ModelProfile } from "./types.js";

const EXAMPLE_HEAD = ["Example, on a database with the table singer (singer_id, name, country, age):", "Question: How many singers are from France?"];

/** The worked example of each family, in the ReEx tags. */
const EXAMPLES: Readonly<Record<PromptFamily, string>> = {
  "execution-aware": [
    ...EXAMPLE_HEAD,
    "<think>Count the singers whose country is France. First check how countries are written.</think>",
    "<intermediate_sql>SELECT DISTINCT country FROM singer LIMIT 3</intermediate_sql>",
    "<result>\ncountry\nFrance\nNetherlands\nUnited States\n</result>",
    "<think>The value is written 'France'.</think>",
    "<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France'</final_sql>",
  ].join("\n"),
  standard: [
    ...EXAMPLE_HEAD,
    "<think>Count the rows of singer whose country is 'France'.</think>",
    "<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France'</final_sql>",
  ].join("\n"),
  direct: [...EXAMPLE_HEAD, "<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France'</final_sql>"].join("\n"),
};

/** The generic profile: ReEx tags with one worked example, for instruct models with no SQL protocol of their own. */
export const genericProfile: ModelProfile = {
  id: "generic",
  title: "any instruct model: ReEx tags with one worked example",
  models: ["any GGUF chat model (Llama 3, Gemma, Mistral, Phi, …)"],
  sources: ["this project (ReEx tags, one worked example)"],
  families: ["execution-aware", "standard", "direct"],
  schemaFormat: "codes",
  syntax: REEX_SYNTAX,
  ...wrappersOf(REEX_SYNTAX),
  feedbackStyle: "lines",
  unanswerable: true,
  buildPrompt: (input) => {
    const built = buildPrompt(input);
    const [system, user] = built.messages;
    return { ...built, messages: [{ role: "system", content: `${system!.content}\n\n${EXAMPLES[input.family]}` }, user!] };
  },
  formatCheck: tagFormat(REEX_SYNTAX),
};

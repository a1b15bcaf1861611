/**
 * `skyrl-sql`: the multi-turn SQL agent protocol of SkyRL-SQL-7B (NovaSky-AI; Qwen2.5-Coder-7B
 * base). The model thinks in `<think>`, runs one query per `<sql>` block, reads the executor's
 * dataframe in `<observation>` and answers in `<solution>`, under a "Task Overview" user prompt
 * with no system message.
 *
 * Prompt read in the authors' repository: NovaSky-AI/SkyRL, skyrl-train/examples/text_to_sql
 * (the SkyRL-SQL data's prompt) and skyrl-gym/skyrl_gym/envs/sql (the environment: observations,
 * turn limit). Kept: the sections and their order (task overview, engine, schema, external
 * knowledge, question, instructions, format), the tags, the 50-row observation cap and what the
 * instructions ask. The sentences are this project's.
 */
import type { ResponseSyntax } from "../syntax.js";
import { OVERVIEW_INSTRUCTIONS, overviewPrompt, tagFormat, wrappersOf } from "./common.js";
import type { ModelProfile } from "./types.js";

const SYNTAX: ResponseSyntax = { tags: { think: "think", sql: "probe", observation: "feedback", solution: "final" } };

const PARTS = {
  task: "You are a data science expert. You are given a database schema and a question in natural language. Understand the schema and write one valid SQL query that answers the question, within a limited number of turns. Break the problem down, reason it through, and produce the solution.",
  instructions: [
    ...OVERVIEW_INSTRUCTIONS,
    "- Before the final query, think through how to write it: analyse the question, sum up what you have found, try new ideas, check the current steps, correct mistakes, plan how to use the SQL tool, and revisit earlier steps.",
    "",
    "Format:",
    "- Think inside <think>...</think> blocks each time you get a new observation or new information.",
    "- To explore or verify, you may use the SQL tool: one query in a single <sql>your sql</sql> block. Its output comes back as a dataframe inside <observation>...</observation>; use it to think again and refine.",
    "- An observation that is too long is cut to 50 rows.",
    "- When no more exploration is needed, or the turns run out, you MUST give the final SQL query inside <solution>...</solution>.",
  ],
};

/** The SkyRL-SQL profile: `<think>`, `<sql>` → `<observation>`, `<solution>`. */
export const skyrlSqlProfile: ModelProfile = {
  id: "skyrl-sql",
  title: "SkyRL-SQL: <think>, <sql> → <observation>, <solution>",
  models: ["SkyRL-SQL-7B (NovaSky-AI)"],
  sources: ["NovaSky-AI/SkyRL:skyrl-train/examples/text_to_sql", "NovaSky-AI/SkyRL:skyrl-gym/skyrl_gym/envs/sql"],
  families: ["execution-aware"],
  schemaFormat: "ddl",
  syntax: SYNTAX,
  ...wrappersOf(SYNTAX),
  feedbackStyle: "dataframe",
  feedbackRowCap: 50,
  unanswerable: false,
  buildPrompt: (input) => overviewPrompt(input, PARTS),
  formatCheck: tagFormat(SYNTAX),
};


/**
 * `omnisql`: single-turn models that reason in prose and answer in one ```sql fence, under a "Task
 * Overview" user prompt: OmniSQL-7B/32B (RUCKBReasoning), XiYan-SQL-QwenCoder and
 * Qwen2.5-Coder-Instruct (which was never trained on a SQL protocol but writes ```sql fences).
 * No probes: decoding is greedy or voting over linear or tree samples.
 *
 * Prompt read in the authors' repository: RUCKBReasoning/OmniSQL, README.md ("Prompt Template":
 * `input_prompt_template`, one user message; external knowledge is joined to the question).
 * Kept: the sections and their order (task overview, engine, schema, question, instructions,
 * output format), the CREATE TABLE schema and the ```sql fence. reex adds the values that match
 * the question after the schema. The sentences are this project's.
 */
import { fencedFormatCheck, OVERVIEW_INSTRUCTIONS, overviewPrompt } from "./common.js";
import type { ModelProfile } from "./types.js";

const PARTS = {
  task: "You are a data science expert. You are given a database schema and a question in natural language. Understand the schema and write one valid SQL query that answers the question.",
  instructions: [
    ...OVERVIEW_INSTRUCTIONS,
    "- Before the final query, think through the steps of writing it.",
    "",
    "Output Format:",
    "Put the SQL query in a code block:",
    "```sql",
    "-- your SQL query",
    "```",
    "",
    "Think step by step to find the correct SQL query.",
  ],
};

/** The OmniSQL profile: prose reasoning, one ```sql fence; no probes. */
export const omnisqlProfile: ModelProfile = {
  id: "omnisql",
  title: "OmniSQL / XiYan / Qwen2.5-Coder: one ```sql fence, no probes",
  models: ["OmniSQL-7B / 14B / 32B", "XiYan-SQL-QwenCoder", "Qwen2.5-Coder-Instruct"],
  sources: ["RUCKBReasoning/OmniSQL:README.md (Prompt Template)"],
  families: ["direct"],
  schemaFormat: "ddl",
  syntax: { tags: { think: "think-alias" } },
  answer: { open: "```sql\n", close: "```" },
  feedbackStyle: "lines",
  unanswerable: false,
  buildPrompt: (input) => overviewPrompt(input, PARTS),
  formatCheck: (text) => fencedFormatCheck(text),
};

/**
 * `think-answer`: single-turn reasoning models trained with RL to answer in
 * `<think>…</think><answer>…</answer>`: Arctic-Text2SQL-R1 (Snowflake), SQL-R1 and Think2SQL
 * (which writes `<reasoning>` for the think block; both are read). The answer holds the SQL,
 * usually in a ```sql fence. No probes: decoding is greedy or voting over linear or tree samples.
 *
 * Prompt read in the authors' repository: snowflakedb/ArcticTraining,
 * projects/arctic_text2sql_r1/bird_eval/infer.py (a system message with the task sentence; a user
 * message with the OmniSQL sections from "Database Engine:" on, the hint joined to the question,
 * and an output format asking for `<think>` then `<answer>` around a ```sql fence). SQL-R1 and
 * Think2SQL use the same two tags under OmniSQL-style prompts. Kept: the split, the sections and
 * their order, the tags and the fenced SQL inside `<answer>`. The sentences are this project's.
 * Not kept: infer.py also pre-fills the reply with a sentence and `<think>`; reex lets the model
 * open its own `<think>`, which the parser and the format check require.
 */
import type { ResponseSyntax } from "../syntax.js";
import { OVERVIEW_INSTRUCTIONS, overviewPrompt, tagFormat, type OverviewParts } from "./common.js";
import type { ModelProfile } from "./types.js";

const SYNTAX: ResponseSyntax = { tags: { think: "think", reasoning: "think", answer: "final" } };

const PARTS: OverviewParts = {
  taskIn: "system",
  task: "You are a data science expert. You are given a database schema and a question in natural language. Understand the schema and write one valid SQL query that answers the question.",
  instructions: [
    ...OVERVIEW_INSTRUCTIONS,
    "- Before the final query, think through the steps of writing it.",
    "",
    "Output Format:",
    "Write your step-by-step reasoning inside <think>...</think>, then the answer inside <answer>...</answer>. Inside the answer, put the SQL query in a code block:",
    "```sql",
    "-- your SQL query",
    "```",
  ],
};

/** The think/answer profile: `<think>` then `<answer>` with a ```sql fence; no probes. */
export const thinkAnswerProfile: ModelProfile = {
  id: "think-answer",
  title: "Arctic-R1 / SQL-R1 / Think2SQL: <think> then <answer>, no probes",
  models: ["Arctic-Text2SQL-R1-7B (Snowflake)", "SQL-R1-7B / 14B", "Think2SQL-4B / 7B"],
  sources: ["snowflakedb/ArcticTraining:projects/arctic_text2sql_r1/bird_eval/infer.py"],
  families: ["standard"],
  schemaFormat: "ddl",
  syntax: SYNTAX,
  think: { open: "<think>", close: "</think>" },
  answer: { open: "<answer>", close: "</answer>" },
  feedbackStyle: "lines",
  unanswerable: false,
  buildPrompt: (input) => overviewPrompt(input, PARTS),
  formatCheck: tagFormat(SYNTAX),
};

/**
 * `skyrl-sql`: the multi-turn SQL agent protocol of SkyRL-SQL-7B (NovaSky-AI; Qwen2.5-Coder-7B
 * base). The model thinks in `<think>`, runs one query per `<sql>` block, reads the executor's
 * dataframe in `<observation>` and answers in `<solution>`.
 *
 * Layout read in the authors' repository, NovaSky-AI/SkyRL:
 * skyrl-train/examples/text_to_sql/sql_dataset.py (the training prompt: a system message holding
 * the task overview, the engine, the schema/knowledge/question sections with `{db_details}`,
 * `{external_knowledge}` and `{question}` left as placeholders, the instructions, the format and
 * one worked example; a user message that fills the placeholders as `{db_details}:…;`), and
 * skyrl-gym/skyrl_gym/envs/sql/env.py (observations, the turn limit). Kept: that split, the
 * sections and their order, the tags, the 50-row observation cap and what the instructions ask.
 * The sentences and the example are this project's.
 */
import type { BuiltPrompt, PromptExtras } from "../prompts.js";
import type { ResponseSyntax } from "../syntax.js";
import { OVERVIEW_INSTRUCTIONS, tagFormat, wrappersOf } from "./common.js";
import type { ModelProfile, ProfilePromptInput } from "./types.js";

const SYNTAX: ResponseSyntax = { tags: { think: "think", sql: "probe", observation: "feedback", solution: "final" } };

/** The system message: the same for every database and question, so it is always in the prefix cache. */
const SYSTEM = [
  "Task Overview:",
  "You are a data science expert. You are given a database schema and a question in natural language. Understand the schema and write one valid SQL query that answers the question, within a limited number of turns. Break the problem down, reason it through, and produce the solution.",
  "",
  "Database Engine:",
  "SQLite",
  "",
  "Database Schema:",
  "{db_details}",
  "The schema above lists the database's tables and columns with their keys, foreign keys and relationships.",
  "",
  "External Knowledge:",
  "{external_knowledge}",
  "",
  "Question:",
  "{question}",
  "",
  "Instructions:",
  ...OVERVIEW_INSTRUCTIONS,
  "- Before the final query, think through how to write it: analyse the question, sum up what you have found, try new ideas, check the current steps, correct mistakes, plan how to use the SQL tool, and revisit earlier steps.",
  "",
  "Format:",
  "- Think inside <think>...</think> blocks each time you get a new observation or new information.",
  "- To explore or verify, you may use the SQL tool: one query in a single <sql>your sql</sql> block. Its output comes back as a dataframe inside <observation>...</observation>; use it to think again and refine.",
  "- An observation that is too long is cut to 50 rows.",
  "- When no more exploration is needed, or the turns run out, you MUST give the final SQL query inside <solution>...</solution>.",
  "",
  "------------------------ EXAMPLE ------------------------",
  "Question: how many books in the library were published before 1950?",
  "    Database Schema:",
  "    Table: books",
  "    - book_id (INTEGER, PRIMARY KEY)",
  "    - title (TEXT)",
  "    - published_year (INTEGER)",
  "",
  "<think>The question counts books by publication year. I will check the years the books table holds before counting.</think>",
  "<sql>SELECT MIN(published_year), MAX(published_year) FROM books;</sql>",
  "<observation>",
  "   MIN(published_year)  MAX(published_year)",
  "0                 1887                 2021",
  "</observation>",
  "<think>Years are stored as integers and some are before 1950, so a simple comparison counts them.</think>",
  "<solution>SELECT COUNT(*) FROM books WHERE published_year < 1950;</solution>",
  "------------------------ END OF EXAMPLE ------------------------",
].join("\n");

/** The user message fills the system message's three placeholders, in the authors' `{name}:value;` form. */
function buildSkyrlPrompt(input: ProfilePromptInput): BuiltPrompt {
  const details = `{db_details}:${input.schema.trim()}`;
  const values = input.matchedValues?.trim() ? `\n-- Values in the database that match words of the question:\n${commented(input.matchedValues.trim())}` : "";
  const user = `${details}${values}${commentedExtras(input)};\n {external_knowledge}: ${input.evidence?.trim() ?? ""};\n {question}: ${input.question.trim()}`;
  // the cached part ends after the schema's last line break: a BPE merges the schema's last characters with the ";" after them (Qwen: ");;\n")
  const system = input.dialect && input.dialect !== "SQLite" ? SYSTEM.replace("Database Engine:\nSQLite\n", `Database Engine:\n${input.dialect}\n`) : SYSTEM;
  return {
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
    sharedPrefix: details.slice(0, details.lastIndexOf("\n") + 1),
  };
}

/** The extras as SQL comments after the schema, where the matched values go: each question, then its SQL (and an earlier turn's result). */
function commentedExtras(input: PromptExtras): string {
  const pair = (question: string, sql: string | null, result?: string): string =>
    commented([`Question: ${question.trim()}`, `SQL: ${sql?.trim().replace(/\s*\n\s*/g, " ") ?? ""}`, ...(result ? [`Result: ${result}`] : [])].join("\n"));
  const examples = input.examples?.length ? `\n-- Verified examples on this database:\n${input.examples.map((e) => pair(e.question, e.sql)).join("\n")}` : "";
  const turns = input.turns?.length
    ? `\n-- Earlier in this conversation (the question may refer to them):\n${input.turns.map((t) => pair(t.question, t.sql, t.summary)).join("\n")}`
    : "";
  return examples + turns;
}

function commented(text: string): string {
  return text
    .split("\n")
    .map((line) => `-- ${line}`)
    .join("\n");
}

/** The SkyRL-SQL profile: `<think>`, `<sql>` → `<observation>`, `<solution>`. */
export const skyrlSqlProfile: ModelProfile = {
  id: "skyrl-sql",
  title: "SkyRL-SQL: <think>, <sql> → <observation>, <solution>",
  models: ["SkyRL-SQL-7B (NovaSky-AI)"],
  sources: ["NovaSky-AI/SkyRL:skyrl-train/examples/text_to_sql/sql_dataset.py", "NovaSky-AI/SkyRL:skyrl-gym/skyrl_gym/envs/sql/env.py"],
  families: ["execution-aware"],
  schemaFormat: "ddl",
  syntax: SYNTAX,
  ...wrappersOf(SYNTAX),
  feedbackStyle: "dataframe",
  feedbackRowCap: 50,
  unanswerable: false,
  buildPrompt: buildSkyrlPrompt,
  formatCheck: tagFormat(SYNTAX),
};

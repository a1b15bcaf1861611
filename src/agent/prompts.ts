/**
 * The three prompt families of the ReEx appendix, kept short for small models. The system message
 * depends only on the family; the user message starts with the schema so that everything up to the
 * end of the schema is shared by every question on the same database and can be cached.
 */
import type { PromptFamily } from "./types.js";
import type { ChatMessage } from "../policy/index.js";

/** The word that opens a final answer declaring the question unanswerable: `<final_sql>UNANSWERABLE: reason</final_sql>`. */
export const UNANSWERABLE_MARKER = "UNANSWERABLE";

/** The role sentence every family starts with. */
export const ROLE_TEXT = "You are an experienced database expert. Write one SQLite query that answers the question over the database below.";

/** Table aliases the model is told to use (and the only ones the constrained grammar accepts): T1..T9. */
export const TABLE_ALIASES: readonly string[] = ["T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8", "T9"];

const ALIAS_TEXT = "Use table aliases T1, T2, ... when a query has several tables.";
const UNANSWERABLE_TEXT = `If the database cannot answer the question, write <final_sql>${UNANSWERABLE_MARKER}: reason</final_sql>.`;

/** Family-specific instructions (the system message after the role); reusable by the training data generator. */
export const FAMILY_INSTRUCTIONS: Readonly<Record<PromptFamily, string>> = {
  "execution-aware": [
    "Think inside <think>...</think>. You may run a probe query inside <intermediate_sql>...</intermediate_sql>; its execution result comes back inside <result>...</result>.",
    "Check each result against the question's conditions and revise your query if needed. Do not repeat probes or probe endlessly.",
    "Give the answer as <final_sql>query</final_sql>.",
  ].join("\n"),
  standard: "Think inside <think>...</think>, then give the answer as <final_sql>query</final_sql>. Do not run queries.",
  direct: "Give only the answer as <final_sql>query</final_sql>.",
};

/** The whole system message of a family: role (naming `dialect`, default "SQLite"), family instructions, alias and unanswerable conventions. */
export function systemPrompt(family: PromptFamily, dialect = "SQLite"): string {
  const role = dialect === "SQLite" ? ROLE_TEXT : ROLE_TEXT.replace("SQLite", dialect);
  return [role, FAMILY_INSTRUCTIONS[family], ALIAS_TEXT, UNANSWERABLE_TEXT].join("\n");
}

/** A verified example of the database (question and its right SQL), as a prompt shows it. */
export interface PromptExample {
  question: string;
  sql: string;
  evidence?: string;
}

/** An earlier turn of the conversation: its question, its final SQL (null when it had none) and a one-line summary of its result. */
export interface PromptTurn {
  question: string;
  sql: string | null;
  summary: string;
}

/** The examples and earlier turns a prompt may show between the schema and the question; each profile lays them out its own way. */
export interface PromptExtras {
  /** Verified examples of the database, most similar first; omitted when empty. */
  examples?: readonly PromptExample[];
  /** The conversation's earlier turns, oldest first; omitted when empty. */
  turns?: readonly PromptTurn[];
}

/** What a prompt is built from; `schema` and `matchedValues` are already serialised text. */
export interface PromptInput extends PromptExtras {
  family: PromptFamily;
  /** Serialised schema (`table.column (type | …)` lines or CREATE TABLE statements). */
  schema: string;
  /** Serialised values from the database that match words of the question; omitted when empty. */
  matchedValues?: string;
  question: string;
  /** The hint ("evidence") of BIRD-style datasets; omitted when empty. */
  evidence?: string;
  /** The database engine the role sentence names. Default "SQLite". */
  dialect?: string;
}

/** A chat prompt plus the part of it that depends only on the database. */
export interface BuiltPrompt {
  /** `[system, user]`. */
  messages: ChatMessage[];
  /**
   * The start of the user message that depends only on the database (the schema section); the
   * system message precedes it. In the rendered prompt, everything up to the end of its first
   * occurrence is identical for every question on this database (pass it to `Policy.renderChat`).
   */
  sharedPrefix: string;
  /** The database values the question names, as the prompt's matched values show them (the decoder's prompt builder sets it; the server's literal repair reads it). */
  matches?: readonly { table: string; column: string; value: string; score: number }[];
}

/** The schema section that opens the user message; the prompt's cacheable part. */
export function schemaSection(schema: string): string {
  return `Database schema:\n${schema.trim()}\n\n`;
}

/** One question and its SQL in the ReEx tags, as the examples and the conversation show them. */
function taggedPair(question: string, sql: string | null, evidence?: string): string {
  return [`Question: ${question.trim()}`, ...(evidence?.trim() ? [`Hint: ${evidence.trim()}`] : []), `<final_sql>${sql?.trim() ?? ""}</final_sql>`].join("\n");
}

/**
 * The ReEx layout of the extras, after the schema: each verified example as a question and its
 * `<final_sql>`, then each earlier turn likewise with its result's summary.
 */
function extrasSections(input: PromptExtras): string[] {
  const out: string[] = [];
  if (input.examples?.length)
    out.push(`Verified examples on this database:\n${input.examples.map((e) => taggedPair(e.question, e.sql, e.evidence)).join("\n\n")}\n`);
  if (input.turns?.length)
    out.push(
      `Earlier in this conversation (the question may refer to them):\n${input.turns.map((t) => `${taggedPair(t.question, t.sql)}\nResult: ${t.summary}`).join("\n\n")}\n`,
    );
  return out;
}

/** Builds the system + user messages of a family; schema first, then verified examples, earlier turns, matched values, question and hint. */
export function buildPrompt(input: PromptInput): BuiltPrompt {
  const sharedPrefix = schemaSection(input.schema);
  const parts: string[] = extrasSections(input);
  const values = input.matchedValues?.trim();
  if (values) parts.push(`Matched values:\n${values}`);
  parts.push(`Question: ${input.question.trim()}`);
  const evidence = input.evidence?.trim();
  if (evidence) parts.push(`Hint: ${evidence}`);
  return {
    messages: [
      { role: "system", content: systemPrompt(input.family, input.dialect) },
      { role: "user", content: sharedPrefix + parts.join("\n") },
    ],
    sharedPrefix,
  };
}

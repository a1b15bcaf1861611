/**
 * Pieces the profiles share: the tag-protocol parts of a profile, the fenced-answer format check,
 * and the section writer of the "Task Overview" prompts (OmniSQL, SkyRL-SQL, Arctic-R1).
 */
import { END_TOKENS, formatCheck, type FormatVerdict } from "../parse.js";
import { closeTag, openTag, tagWith, type ResponseSyntax } from "../syntax.js";
import type { PromptFamily } from "../types.js";
import type { BuiltPrompt, PromptExtras } from "../prompts.js";
import type { ProfilePromptInput, Wrapper } from "./types.js";

/** The wrapper of a tag, `<name>` … `</name>`. */
export function tagWrapper(name: string): Wrapper {
  return { open: openTag(name), close: closeTag(name) };
}

/** The think, probe, feedback and answer wrappers of a tag syntax (those it has). */
export function wrappersOf(syntax: ResponseSyntax): { think?: Wrapper; probe?: Wrapper; feedback?: Wrapper; answer: Wrapper } {
  const name = (role: "think" | "probe" | "feedback" | "final"): string | undefined => tagWith(syntax, role);
  const think = name("think");
  const probe = name("probe");
  const feedback = name("feedback");
  const final = name("final");
  if (!final) throw new Error("a tag syntax needs a final tag");
  return {
    ...(think ? { think: tagWrapper(think) } : {}),
    ...(probe ? { probe: tagWrapper(probe) } : {}),
    ...(feedback ? { feedback: tagWrapper(feedback) } : {}),
    answer: tagWrapper(final),
  };
}

/** The family check of a tag syntax (see `formatCheck`). */
export function tagFormat(syntax: ResponseSyntax): (text: string, family: PromptFamily) => FormatVerdict {
  return (text, family) => formatCheck(text, family, syntax);
}

function withoutEndTokens(text: string): string {
  let body = text;
  for (let changed = true; changed; ) {
    changed = false;
    const trimmed = body.trimEnd();
    for (const t of END_TOKENS) {
      if (trimmed.endsWith(t)) {
        body = trimmed.slice(0, -t.length);
        changed = true;
      }
    }
  }
  return body;
}

/**
 * The format check of a fenced-answer protocol (OmniSQL): free reasoning, then one closed ```sql
 * fence with a non-empty query, and nothing after it but whitespace and end tokens; no tags.
 */
export function fencedFormatCheck(text: string): FormatVerdict {
  const problems: string[] = [];
  const body = withoutEndTokens(text).trimEnd();
  const fences = [...body.matchAll(/```[ \t]*(sql|sqlite)?[ \t]*\n([\s\S]*?)```/gi)];
  const last = fences.at(-1);
  if (!last) problems.push("no closed ```sql block");
  else {
    if ((last[1] ?? "").length === 0) problems.push("the last code block is not marked sql");
    if (last[2]!.trim().length === 0) problems.push("empty ```sql block");
    if (body.slice(last.index! + last[0].length).trim().length > 0) problems.push("text after the last ```sql block");
  }
  if (/<\/?(?:think|final_sql|intermediate_sql|result|answer|sql|solution|observation)>/i.test(body)) problems.push("tags in a fenced-answer response");
  return { ok: problems.length === 0, problems };
}

/** A `Heading:` section of the Task-Overview prompts, or nothing when the body is empty. */
export function section(heading: string, body: string | undefined): string {
  const text = body?.trim();
  return text ? `${heading}:\n${text}\n\n` : "";
}

/** The matched values as the Task-Overview prompts show them, after the schema. */
export function matchedValuesSection(values: string | undefined): string {
  return section("Values in the database that match words of the question", values);
}

/** A question and its SQL in a ```sql fence, as the Task-Overview prompts show examples and earlier turns. */
function fencedPair(question: string, sql: string | null, evidence?: string): string {
  const asked = evidence?.trim() ? `${question.trim()}\n${evidence.trim()}` : question.trim();
  return `Question:\n${asked}\n\`\`\`sql\n${sql?.trim() ?? ""}\n\`\`\``;
}

/**
 * The Task-Overview layout of the extras, after the matched values: each verified example as a
 * question and its ```sql fence, then each earlier turn likewise with its result's summary.
 */
function overviewExtras(input: PromptExtras): string {
  const examples = input.examples?.map((e) => fencedPair(e.question, e.sql, e.evidence)).join("\n\n");
  const turns = input.turns?.map((t) => `${fencedPair(t.question, t.sql)}\nResult: ${t.summary}`).join("\n\n");
  return (
    section("Examples (questions on this database with their verified SQL)", examples) +
    section("Earlier questions in this conversation (the question below may refer to them)", turns)
  );
}

const SCHEMA_NOTE = "The schema above lists the database's tables and columns with their keys, foreign keys and relationships.";

/** The instruction lines the Task-Overview prompts share (only what is asked, all of it, think first). */
export const OVERVIEW_INSTRUCTIONS: readonly string[] = [
  "- Output only what the question asks for: when it asks for a column, select that column and nothing more.",
  "- The query must return all of the information the question asks for, with nothing missing and nothing extra.",
];

/** What differs between the Task-Overview prompts: the task sentence, the instruction and format lines, and two layout choices. */
export interface OverviewParts {
  task: string;
  /** Lines after "Instructions:", the format section included. */
  instructions: readonly string[];
  /**
   * Where the task sentence goes: "overview", a "Task Overview:" section opening the one user
   * message (OmniSQL); "system", the system message, the user message opening at "Database
   * Engine:" (Arctic-R1). Default "overview".
   */
  taskIn?: "overview" | "system";
  /**
   * Where the hint goes: "with-question", on the line after the question, as OmniSQL concatenates
   * external knowledge to the question; "section", an "External Knowledge:" section before it.
   * Default "with-question".
   */
  evidence?: "with-question" | "section";
}

/**
 * A Task-Overview prompt (OmniSQL's layout, also Arctic-R1's): task overview, engine, schema (the
 * cached part ends after it), matched values, verified examples and earlier turns (reex's
 * additions), external knowledge, question, instructions.
 */
export function overviewPrompt(input: ProfilePromptInput, parts: OverviewParts): BuiltPrompt {
  const inSystem = parts.taskIn === "system";
  const shared = [
    ...(inSystem ? [] : ["Task Overview:", parts.task, ""]),
    "Database Engine:",
    input.dialect ?? "SQLite",
    "",
    "Database Schema:",
    input.schema.trim(),
    SCHEMA_NOTE,
    "",
    "",
  ].join("\n");
  const evidence = input.evidence?.trim();
  const question =
    parts.evidence === "section"
      ? section("External Knowledge", evidence) + section("Question", input.question)
      : section("Question", evidence ? `${input.question.trim()}\n${evidence}` : input.question);
  const user = shared + matchedValuesSection(input.matchedValues) + overviewExtras(input) + question + ["Instructions:", ...parts.instructions].join("\n");
  return {
    messages: [...(inSystem ? [{ role: "system" as const, content: parts.task }] : []), { role: "user", content: user }],
    sharedPrefix: shared,
  };
}

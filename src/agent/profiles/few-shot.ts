/**
 * `few-shot`: a pretrained base model (or a small model that follows patterns better than
 * instructions). The ReEx tags and family instructions, then three worked exchanges written as
 * earlier turns of the conversation (a user message in the server's own layout, the model's answer
 * in the tags with the server's own `<result>` blocks), shaped like the project's training traces
 * (examples/training/sft-traces.json), so that the question to answer is the fourth of a pattern.
 */
import type { ChatMessage } from "../../policy/index.js";
import { buildPrompt, schemaSection } from "../prompts.js";
import { REEX_SYNTAX } from "../syntax.js";
import type { PromptFamily } from "../types.js";
import { tagFormat, wrappersOf } from "./common.js";
import type { ModelProfile } from "./types.js";

/** One worked exchange: its user message parts and the answer each family would write. */
interface Shot {
  schema: string;
  matched?: string;
  question: string;
  /** Reasoning, probes with their results, reasoning again, in execution-aware order. */
  steps: readonly ({ think: string } | { probe: string; result: string })[];
  final: string;
  /** The one-sentence plan a standard-family answer writes before its final SQL. */
  plan: string;
}

const SHOTS: readonly Shot[] = [
  {
    schema:
      "table singer , columns = [ singer.singer_id ( integer | primary key | values : 1 , 2 , 3 ) , singer.name ( text | values : Joe Sharp , Rose White , Justin Brown ) , singer.country ( text | values : Netherlands , United States , France ) , singer.age ( integer | values : 52 , 32 , 29 ) ]",
    question: "How many singers are from France?",
    steps: [
      { think: "Count the singers whose country is France. First check how countries are written." },
      { probe: "SELECT DISTINCT country FROM singer LIMIT 5", result: "country\nNetherlands\nUnited States\nFrance" },
      { think: "The value is written 'France'." },
    ],
    final: "SELECT COUNT(*) FROM singer WHERE country = 'France'",
    plan: "Count the rows of singer whose country is 'France'.",
  },
  {
    schema: [
      "table author , columns = [ author.author_id ( integer | primary key | values : 1 , 2 , 3 ) , author.name ( text | values : Ann Lee , Omar Haddad , Mia Klein ) ]",
      "table book , columns = [ book.book_id ( integer | primary key | values : 10 , 11 , 12 ) , book.title ( text | values : Deep Water , The Hill , Salt ) , book.author_id ( integer | values : 1 , 2 , 3 ) , book.year ( integer | values : 1998 , 2004 , 2011 ) ]",
      "foreign keys :",
      "book.author_id = author.author_id",
    ].join("\n"),
    matched: "author.name : 'Omar Haddad'",
    question: "List the titles of the books Omar Haddad wrote after 2000.",
    steps: [
      { think: "Join book to author on author_id and keep Omar Haddad's books." },
      {
        probe: "SELECT T1.title, T1.year FROM book AS T1 JOIN author AS T2 ON T1.author_id = T2.author_id WHERE T2.name = 'Omar Haddad'",
        result: "title | year\nThe Hill | 2004\nSalt | 1999",
      },
      { think: "Salt is from 1999, so the year condition is needed." },
    ],
    final: "SELECT T1.title FROM book AS T1 JOIN author AS T2 ON T1.author_id = T2.author_id WHERE T2.name = 'Omar Haddad' AND T1.year > 2000",
    plan: "Join book to author, keep Omar Haddad's books from after 2000.",
  },
  {
    schema:
      "table flight , columns = [ flight.flight_no ( text | primary key | values : BA117 , LH400 , AF22 ) , flight.origin ( text | values : London , Frankfurt , Paris ) , flight.destination ( text | values : New York , Boston , Chicago ) , flight.distance ( integer | values : 5540 , 6200 , 5830 ) ]",
    question: "What is the longest distance of a flight from Paris?",
    steps: [{ think: "The largest distance among the flights whose origin is Paris; the schema shows 'Paris' as written." }],
    final: "SELECT MAX(distance) FROM flight WHERE origin = 'Paris'",
    plan: "The largest distance among flights whose origin is 'Paris'.",
  },
];

function userText(shot: Shot): string {
  const parts = shot.matched ? [`Matched values:\n${shot.matched}`] : [];
  parts.push(`Question: ${shot.question}`);
  return schemaSection(shot.schema) + parts.join("\n");
}

function answerText(shot: Shot, family: PromptFamily): string {
  const final = `<final_sql>${shot.final}</final_sql>`;
  if (family === "direct") return final;
  if (family === "standard") return `<think>${shot.plan}</think>\n${final}`;
  const lines: string[] = [];
  for (const step of shot.steps) {
    if ("think" in step) lines.push(`<think>${step.think}</think>\n`);
    else lines.push(`<intermediate_sql>${step.probe}</intermediate_sql><result>\n${step.result}\n</result>\n`);
  }
  return `${lines.join("")}${final}`;
}

/** The worked exchanges of a family as alternating user and assistant messages. */
function shotMessages(family: PromptFamily): ChatMessage[] {
  return SHOTS.flatMap((shot): ChatMessage[] => [
    { role: "user", content: userText(shot) },
    { role: "assistant", content: answerText(shot, family) },
  ]);
}

/** The few-shot profile: ReEx tags taught by three worked exchanges as earlier turns, for base models and small models. */
export const fewShotProfile: ModelProfile = {
  id: "few-shot",
  title: "base or small models: ReEx tags taught by three worked exchanges as earlier turns",
  models: ["pretrained base models and small chat models (Gemma 3 270M, …)"],
  sources: ["this project (ReEx tags; exchanges shaped like examples/training/sft-traces.json)"],
  families: ["execution-aware", "standard", "direct"],
  schemaFormat: "codes",
  syntax: REEX_SYNTAX,
  ...wrappersOf(REEX_SYNTAX),
  feedbackStyle: "lines",
  unanswerable: true,
  buildPrompt: (input) => {
    const built = buildPrompt(input);
    const [system, user] = built.messages;
    return { ...built, messages: [system!, ...shotMessages(input.family), user!] };
  },
  formatCheck: tagFormat(REEX_SYNTAX),
};

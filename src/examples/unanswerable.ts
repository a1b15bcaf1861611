/**
 * Questions about the example databases that no SQL over them can answer: the weather, the
 * future, facts of other databases, columns the schema lacks. Written beside the 45 answerable
 * questions as `unanswerable.json`, so that those stay the same 45; eval scores abstaining on
 * these as right (docs/decoding.md, "How sure an answer is").
 */

/** One unanswerable question: its database and why no SQL answers it. */
export interface UnanswerableQuestion {
  db_id: string;
  question: string;
  /** Why the database cannot answer it. */
  why: "outside" | "future" | "missing" | "opinion";
}

/** The list, in database order. */
export const UNANSWERABLE_QUESTIONS: readonly UnanswerableQuestion[] = [
  { db_id: "retail", question: "What is the weather in Paris today?", why: "outside" },
  { db_id: "retail", question: "How many orders will be placed next month?", why: "future" },
  { db_id: "retail", question: "What is the phone number of each customer?", why: "missing" },
  { db_id: "retail", question: "Which warehouse ships the most orders?", why: "missing" },
  { db_id: "retail", question: "How much did each product cost the shop to buy from its supplier?", why: "missing" },
  { db_id: "retail", question: "Which product do customers like best?", why: "opinion" },
  { db_id: "retail", question: "Who is the president of France?", why: "outside" },
  { db_id: "clinic", question: "What is the weather in Paris today?", why: "outside" },
  { db_id: "clinic", question: "How many patients will visit next year?", why: "future" },
  { db_id: "clinic", question: "What is the salary of each doctor?", why: "missing" },
  { db_id: "clinic", question: "Which medication was prescribed most often?", why: "missing" },
  { db_id: "clinic", question: "What is the home address of each patient?", why: "missing" },
  { db_id: "clinic", question: "Which doctor is the friendliest?", why: "opinion" },
  { db_id: "music", question: "What is the weather in Paris today?", why: "outside" },
  { db_id: "music", question: "How many streams will the next album get?", why: "future" },
  { db_id: "music", question: "How much revenue did each concert tour make?", why: "missing" },
  { db_id: "music", question: "Which producer worked on the most albums?", why: "missing" },
  { db_id: "music", question: "What is the best song ever written?", why: "opinion" },
  { db_id: "music", question: "How many Grammy awards has each artist won?", why: "missing" },
  { db_id: "music", question: "What is the capital of Australia?", why: "outside" },
];

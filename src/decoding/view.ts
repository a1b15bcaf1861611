/** What the front ends show of a decoder answer. */
import { copyRewriteFields, type BindingReport, type RewriteFields } from "../agent/index.js";
import type { Answer, Candidate } from "./types.js";

/** How an answer stands for a client: answerable only when its final SQL ran and its confidence reaches the threshold, with the reason and the final SQL's error when not. */
export interface AnswerStatus {
  answerable: boolean;
  reason?: string;
  /** The final SQL's error, when it failed. */
  error?: { code: string; message: string };
}

/**
 * The REST, WebSocket, MCP and CLI view of whether an answer answers: a final SQL that failed, no
 * final SQL at all, or a confidence below `decoding.confidenceThreshold` is not answerable, and says why.
 */
export function answerStatus(answer: Answer): AnswerStatus {
  if (!answer.answerable) return { answerable: false, ...(answer.reason !== undefined ? { reason: answer.reason } : {}) };
  if (answer.result && !answer.result.ok) {
    const { code, message } = answer.result.error;
    return { answerable: false, reason: `the final SQL failed: ${code}: ${message}`, error: { code, message } };
  }
  if (answer.sql === null) return { answerable: false, reason: "no candidate wrote a final SQL" };
  const c = answer.confidence;
  if (c && c.value < c.threshold) {
    const why = c.doubts.length > 0 ? `: ${c.doubts.join("; ")}` : "";
    return { answerable: false, reason: `low confidence (${c.value.toFixed(3)}, below ${c.threshold})${why}` };
  }
  return { answerable: true };
}

/** A candidate as an answer shows it: its SQL, how the vote saw it and each rewrite rule's changes, without its text, rows, interactions or log-probability. */
export interface CandidateView extends RewriteFields {
  index: number;
  path: string;
  sql: string | null;
  answerable: boolean;
  votes: number;
  group: number | null;
  error?: string;
  /** How its names were bound to their FROM lists; absent when they were not. */
  binding?: BindingReport;
}

/** The REST and MCP answers' view of one candidate. */
export function candidateView(c: Candidate): CandidateView {
  return {
    index: c.index,
    path: c.path,
    sql: c.sql,
    answerable: c.answerable,
    votes: c.votes,
    group: c.group,
    ...(c.error !== undefined ? { error: c.error } : {}),
    ...copyRewriteFields(c),
    ...(c.binding ? { binding: { ...c.binding } } : {}),
  };
}

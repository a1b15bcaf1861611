/** What the front ends show of a decoder answer. */
import { copyRewriteFields, type BindingReport, type RewriteFields } from "../agent/index.js";
import type { Answer, Candidate } from "./types.js";

/** Milliseconds as every answer and log line shows them: two decimals. */
export function roundMs(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/** The fields every front end's answer shares (REST, WebSocket final, MCP `ask`, `reex ask --json`), in the REST answer's order, with the front end's `result`. */
export interface AnswerView<R> extends AnswerStatus {
  sql: string | null;
  /** Estimated chance that the answer is right, in [0, 1], three decimals; null from a decoder that does not compute it. */
  confidence: number | null;
  doubts?: string[];
  notice?: string;
  result: R;
  candidates: CandidateView[];
  winner: number | null;
  decidedBy: Answer["decidedBy"];
}

/** The one view of a decoder answer that every front end builds its answer from; `result` is the final SQL's rows as the front end shows them. */
export function answerView<R>(answer: Answer, result: R): AnswerView<R> {
  const status = answerStatus(answer);
  return {
    sql: answer.sql,
    answerable: status.answerable,
    ...(status.reason !== undefined ? { reason: status.reason } : {}),
    confidence: answer.confidence ? Math.round(answer.confidence.value * 1000) / 1000 : null,
    ...(answer.confidence?.doubts.length ? { doubts: answer.confidence.doubts.slice() } : {}),
    ...(status.error ? { error: status.error } : {}),
    ...(answer.notice !== undefined ? { notice: answer.notice } : {}),
    result,
    candidates: answer.candidates.map(candidateView),
    winner: answer.winner,
    decidedBy: answer.decidedBy,
  };
}

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

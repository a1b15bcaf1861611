/** What the front ends show of a decoder answer. */
import type { Candidate } from "./types.js";

/** A candidate as an answer shows it: its SQL and how the vote saw it, without its text, rows, interactions or log-probability. */
export interface CandidateView {
  index: number;
  path: string;
  sql: string | null;
  answerable: boolean;
  votes: number;
  group: number | null;
  error?: string;
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
  };
}

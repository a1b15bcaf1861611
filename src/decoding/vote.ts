import type { DecidedBy } from "../config/index.js";
import { resultKey } from "../sql/index.js";
import type { ExecResult, ResultRows } from "../sql/index.js";

/** What the vote needs to know of one finished candidate. */
export interface Ballot {
  sql: string | null;
  result?: ExecResult;
  meanLogprob: number;
  /** False when the candidate declared the question unanswerable (it then votes for "unanswerable"). Default true. */
  answerable?: boolean;
}

/** One group of candidates whose final SQL returned the same result (as a set of rows), or that all declared the question unanswerable. */
export interface VoteGroup {
  group: number;
  votes: number;
  members: number[];
  meanLogprob: number;
  /** True for the group of candidates that declared the question unanswerable. Default false. */
  unanswerable?: boolean;
  /** True when the group's result says only "nothing matched" (no rows, or one row of zeros and NULLs). Default false. */
  empty?: boolean;
}

/** The outcome: the winning candidate index (or null), each candidate's group, and the groups. */
export interface VoteOutcome {
  winner: number | null;
  /** Group of each candidate by index; null for candidates that failed or had no SQL. */
  groupOf: (number | null)[];
  groups: VoteGroup[];
  decidedBy: DecidedBy;
}

/**
 * How results that say only "nothing matched" vote: "last" (they win only when no candidate
 * returned anything else; the server's rule) or "equal" (they vote like any result: the rule
 * before issue #30, kept for bench/decoding's side-by-side). Default "last".
 */
export type EmptyVotes = "last" | "equal";

/** The tie rule, stated once for docs, events and reports. */
export const VOTE_RULE =
  "group by executed result (set of rows, order- and duplicate-insensitive); candidates declaring the question unanswerable form one group; " +
  'failed candidates do not vote; results that say only "nothing matched" (no rows, or one row of zeros and NULLs) win only when no other result ran; ' +
  "largest group wins; ties go to the higher mean log-probability, then to the group seen first; " +
  "if every candidate failed, the candidate with SQL and the highest mean log-probability (then the lowest index) wins";

const UNANSWERABLE_KEY = "\u0000unanswerable";

/**
 * True when rows say only "nothing matched": no rows, or a single row whose every value is 0 or
 * NULL (what `COUNT(*)`, `SUM` or `MAX` return over no matching rows).
 */
export function saysNothingMatched(rows: ResultRows): boolean {
  if (rows.length === 0) return true;
  if (rows.length > 1) return false;
  const row = rows[0]!;
  return row.length > 0 && row.every((v) => v === null || v === 0 || v === 0n);
}

/**
 * Self-consistency vote over executed candidates: identical results form a group, the
 * largest group wins, and "nothing matched", ties and total failure are resolved by {@link VOTE_RULE}.
 */
export function vote(ballots: readonly Ballot[], options: { emptyVotes?: EmptyVotes } = {}): VoteOutcome {
  const emptyLast = (options.emptyVotes ?? "last") === "last";
  const groupOf: (number | null)[] = ballots.map(() => null);
  const byKey = new Map<string, VoteGroup>();
  const groups: VoteGroup[] = [];
  ballots.forEach((b, i) => {
    let key: string;
    let empty = false;
    if (b.answerable === false) key = UNANSWERABLE_KEY;
    else if (b.sql !== null && b.result?.ok) {
      key = resultKey(b.result.rows);
      empty = saysNothingMatched(b.result.rows);
    } else return;
    let g = byKey.get(key);
    if (!g) {
      g = {
        group: groups.length,
        votes: 0,
        members: [],
        meanLogprob: 0,
        ...(key === UNANSWERABLE_KEY ? { unanswerable: true } : {}),
        ...(empty ? { empty: true } : {}),
      };
      byKey.set(key, g);
      groups.push(g);
    }
    g.votes += 1;
    g.members.push(i);
    groupOf[i] = g.group;
  });
  for (const g of groups) {
    g.meanLogprob = g.members.reduce((s, i) => s + finite(ballots[i]!.meanLogprob), 0) / g.members.length;
  }

  const informative = emptyLast ? groups.filter((g) => !g.empty) : groups;
  const contenders = informative.length > 0 ? informative : groups;
  if (contenders.length > 0) {
    const top = Math.max(...contenders.map((g) => g.votes));
    const tied = contenders.filter((g) => g.votes === top);
    if (tied.length === 1) return { winner: tied[0]!.members[0]!, groupOf, groups, decidedBy: "majority" };
    const best = Math.max(...tied.map((g) => g.meanLogprob));
    const byLogprob = tied.filter((g) => g.meanLogprob === best);
    const chosen = byLogprob[0]!;
    return { winner: chosen.members[0]!, groupOf, groups, decidedBy: byLogprob.length === 1 ? "tie-logprob" : "tie-first" };
  }

  let winner: number | null = null;
  ballots.forEach((b, i) => {
    if (b.sql === null) return;
    if (winner === null || finite(b.meanLogprob) > finite(ballots[winner]!.meanLogprob)) winner = i;
  });
  return { winner, groupOf, groups, decidedBy: winner === null ? "none" : "fallback-logprob" };
}

function finite(x: number): number {
  return Number.isFinite(x) ? x : -Infinity;
}

/**
 * The one stream of typed events that a request produces. WebSocket streaming, CLI progress,
 * traces and training all consume this union; `path` names the trajectory (tree node) it belongs to.
 */
import type { DecidedBy } from "../config/index.js";
import type { ExecResult } from "../sql/index.js";

/** Sampled text from one trajectory. */
interface TokenEvent {
  type: "token";
  path: string;
  text: string;
}
/** The model wrote a probe query; the server is about to execute it. */
interface ProbeEvent {
  type: "probe";
  path: string;
  step: number;
  sql: string;
  /** The model's final SQL, which failed to run, taken back and answered as this probe (`agent.finalRetries`); absent otherwise. */
  retried?: true;
}
/** The executor answered a probe; `feedback` is the exact text injected as `<result>`. */
interface ResultEvent {
  type: "result";
  path: string;
  step: number;
  result: ExecResult;
  feedback: string;
}
/**
 * A final SQL the server rewrote: rebound to the tables that hold its columns after it failed on a
 * missing column (`agent.repairTables`), with its string comparisons fitted to the column's values
 * (`agent.repairLiterals`), and/or with what the question names and it left out put in
 * (`agent.repairCoverage`); `repaired` ran and is the trajectory's answer.
 */
interface RepairEvent {
  type: "repair";
  path: string;
  /** The model's final SQL. */
  sql: string;
  repaired: string;
  /** Each FROM table replaced, as written and as put in its place; empty when none was. */
  swaps: { from: string; to: string }[];
  /** Each comparison rewritten (`table.column`, as written, as rewritten, the rule); absent when none was. */
  literals?: { column: string; from: string; to: string; rule: "date-format" | "case" | "variants" | "named" | "column" }[];
  /** Each part of the question put in (the rule, what the query had: empty for an added condition, what it has now); absent when none was. */
  coverage?: { rule: "condition" | "year" | "limit"; from: string; to: string }[];
}
/**
 * The decoder took back a SQL (a probe or the final SQL) whose names after its FROM list (or in its
 * ON conditions) are in none of the list's tables, and draws it again from just past that FROM,
 * holding the list to `columns` too: the tokens that follow are the new draw (see `NameBinding.rebind`).
 */
interface RebindEvent {
  type: "rebind";
  path: string;
  /** The SQL as first drawn. */
  sql: string;
  /** The names after the FROM list that its tables must now hold (lower case; `t2.col` for an alias's), empty when only its ON conditions did not bind. */
  columns: string[];
}
/** A tree node expanded into a new branch forked from `parent`. */
interface BranchEvent {
  type: "branch";
  path: string;
  parent: string | null;
  depth: number;
}
/** A branch was dropped, with why. */
interface PruneEvent {
  type: "prune";
  path: string;
  reason: "probe_error" | "sql_error" | "duplicate_result" | "budget" | "cancelled";
}
/** A trajectory committed to a final SQL (or gave up). */
interface CandidateEvent {
  type: "candidate";
  path: string;
  index: number;
  sql: string | null;
  ok: boolean;
  error?: string;
  /** The stable code of `error` when it has one (the executor's or the rollout's), e.g. "SQL_TIMEOUT". */
  errorCode?: string;
  answerable: boolean;
}
/** The vote over executed candidates. */
interface VoteEvent {
  type: "vote";
  winner: number | null;
  /** `empty`: the group's result says only "nothing matched", so it won only if nothing else ran. */
  groups: { group: number; votes: number; members: number[]; empty?: boolean }[];
  rule: string;
  decidedBy: DecidedBy;
}
/** The request's answer. */
interface FinalEvent {
  type: "final";
  sql: string | null;
  answerable: boolean;
  reason?: string;
  /** The answer's confidence in [0, 1] (README "How sure an answer is"); absent on a single trajectory's own final. */
  confidence?: number;
}
/** A failure that ended a trajectory or the request. */
interface ErrorEvent {
  type: "error";
  path?: string;
  code: string;
  message: string;
}

/** Everything a request can emit, in order of occurrence. */
export type ReexEvent =
  | TokenEvent
  | ProbeEvent
  | ResultEvent
  | RepairEvent
  | RebindEvent
  | BranchEvent
  | PruneEvent
  | CandidateEvent
  | VoteEvent
  | FinalEvent
  | ErrorEvent;

/** A consumer of events; must not throw and should return quickly. */
export type EventSink = (event: ReexEvent) => void;

/** One line on what a repair changed: the tables rebound, the comparisons rewritten (`a -> b`, comma-separated) and the parts of the question put in. */
export function describeRepair(event: Pick<RepairEvent, "swaps" | "literals" | "coverage">): string {
  const parts: string[] = [];
  if (event.swaps.length > 0) parts.push(`final SQL failed; tables rebound (${event.swaps.map((s) => `${s.from} -> ${s.to}`).join(", ")})`);
  if (event.literals?.length) parts.push(`literals fitted to the column's values (${event.literals.map((l) => `${l.from} -> ${l.to}`).join(", ")})`);
  if (event.coverage?.length)
    parts.push(`what the question names put in (${event.coverage.map((c) => (c.from ? `${c.from} -> ${c.to}` : `+ ${c.to}`)).join(", ")})`);
  return parts.join("; ");
}

/**
 * `sink` with its exceptions caught, so a failing consumer (a closed socket) cannot break a decode
 * or a rollout: it loses only its own events; `onError` hears of each failure (default: ignored).
 */
export function guardSink(sink: EventSink | undefined, onError?: (err: unknown) => void): EventSink | undefined {
  if (!sink) return undefined;
  return (event) => {
    try {
      sink(event);
    } catch (err) {
      onError?.(err);
    }
  };
}

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
 * The fixes a `repair` event lists, one field a rewrite rule: empty here, each of src/agent's rewrite
 * rules declares its own field into it (declaration merging: `swaps`, …), so the
 * event follows the agent's rule list (`REWRITE_RULES`) without this layer importing the agent.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by the rewrite rules of src/agent (declaration merging)
export interface RepairFixes {}
/**
 * A final SQL the server rewrote with its rewrite rules (src/agent's `REWRITE_RULES`: tables
 * rebound after a missing column, literals fitted to the column's values, what the question names
 * put in); `repaired` ran and is the trajectory's answer. Each rule's changes are in its field
 * ({@link RepairFixes}).
 */
interface RepairEvent extends RepairFixes {
  type: "repair";
  path: string;
  /** The model's final SQL. */
  sql: string;
  repaired: string;
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
  /** The answer's confidence in [0, 1] (docs/decoding.md, "How sure an answer is"); absent on a single trajectory's own final. */
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

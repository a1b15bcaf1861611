/** How tool results look to an MCP client: JSON-safe rows, the answer's fields, and a short trace of the decode. */
import { answerStatus, candidateView, type Answer, type CandidateView } from "../decoding/index.js";
import { describeRewrites } from "../agent/index.js";
import type { ReexEvent } from "../events/index.js";
import type { ExecSuccess, SqlValue } from "../sql/index.js";

/** A cell as MCP clients get it: safe integers as numbers, larger ones as strings, BLOBs as `{base64}`. */
export type McpCell = string | number | null | { base64: string };

/** Rows of a query that ran. */
export interface McpRows {
  columns: string[];
  rows: McpCell[][];
  rowCount: number;
  truncated: boolean;
  elapsedMs: number;
}

/** The `ask` tool's answer. */
export interface McpAnswer {
  sql: string | null;
  /** False when the model declared the question unanswerable, the final SQL failed or there is none; `reason` says which. */
  answerable: boolean;
  reason?: string;
  /** Estimated chance that the answer is right, in [0, 1]; null from a decoder that does not compute it. */
  confidence: number | null;
  /** What lowered the confidence, in words; absent when nothing did. */
  doubts?: string[];
  /** Set when a random-weight placeholder model wrote the answer: its SQL is noise. */
  notice?: string;
  /** The final SQL's rows; null when it failed or there is none. */
  result: McpRows | null;
  /** Why the final SQL failed, when it did. */
  error?: { code: string; message: string };
  candidates: CandidateView[];
  winner: number | null;
  /** How the vote chose the winner (the decoder's `decidedBy`). */
  decidedBy: Answer["decidedBy"];
  shortfall?: string;
  /** One line per probe, probe result, prune, candidate and vote, in order; at most {@link TRACE_LINES}. */
  trace: string[];
  usage: { promptTokens: number; evaluatedTokens: number; generatedTokens: number };
  timings: { totalMs: number; firstTokenMs?: number };
}

/** Lines kept in an answer's trace; later ones are summarised in one last line. */
export const TRACE_LINES = 60;

function cell(value: SqlValue | undefined): McpCell {
  if (value === undefined || value === null) return null;
  if (typeof value === "bigint") return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
  if (value instanceof Uint8Array) return { base64: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return value;
}

/** A successful execution as a tool returns it. */
export function rowsOf(result: ExecSuccess): McpRows {
  return {
    columns: result.columns,
    rows: result.rows.map((r) => r.map(cell)),
    rowCount: result.rowCount,
    truncated: result.truncated,
    elapsedMs: round(result.elapsedMs),
  };
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

function clip(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** One trace line for an event worth showing; undefined for tokens and branches. */
export function traceLine(event: ReexEvent): string | undefined {
  switch (event.type) {
    case "probe":
      return `[${event.path}] probe ${event.step}${event.retried ? " (the final SQL, failed, asked again)" : ""}: ${clip(event.sql)}`;
    case "repair":
      return `[${event.path}] ${describeRewrites(event)}: ${clip(event.repaired)}`;
    case "result":
      return event.result.ok
        ? `[${event.path}] result ${event.step}: ${event.result.rowCount} ${event.result.rowCount === 1 ? "row" : "rows"}${event.result.truncated ? " (truncated)" : ""}`
        : `[${event.path}] result ${event.step}: ${event.result.error.code}: ${clip(event.result.error.message, 200)}`;
    case "rebind":
      return `[${event.path}] FROM drawn again${event.columns.length ? `, held to ${event.columns.join(", ")}` : ""}: ${clip(event.sql)}`;
    case "prune":
      return `[${event.path}] pruned: ${event.reason}`;
    case "candidate":
      return `[${event.path}] candidate ${event.index}: ${event.sql === null ? (event.answerable ? "no SQL" : "unanswerable") : clip(event.sql)}${event.ok ? "" : ` (${clip(event.error ?? "failed", 200)})`}`;
    case "vote":
      return `vote: winner ${event.winner === null ? "none" : `#${event.winner}`}; groups ${event.groups.map((g) => `${g.group}:${g.votes}`).join(", ") || "none"}`;
    case "error":
      return `[${event.path ?? "request"}] ${event.code}: ${clip(event.message, 200)}`;
    default:
      return undefined;
  }
}

/** Collects the short trace of one decode from its events. */
export class TraceCollector {
  readonly lines: string[] = [];
  private dropped = 0;

  /** Records `event` when it has a trace line. */
  add(event: ReexEvent): void {
    const line = traceLine(event);
    if (line === undefined) return;
    if (this.lines.length < TRACE_LINES) this.lines.push(line);
    else this.dropped++;
  }

  /** The lines, with a last line counting the ones left out. */
  finish(): string[] {
    return this.dropped > 0 ? [...this.lines, `… ${this.dropped} more lines`] : [...this.lines];
  }
}

/** The `ask` tool's view of a decoder answer. */
export function answerOf(answer: Answer, trace: string[]): McpAnswer {
  const status = answerStatus(answer);
  const out: McpAnswer = {
    sql: answer.sql,
    answerable: status.answerable,
    confidence: answer.confidence ? Math.round(answer.confidence.value * 1000) / 1000 : null,
    ...(answer.confidence?.doubts.length ? { doubts: answer.confidence.doubts.slice() } : {}),
    ...(answer.notice !== undefined ? { notice: answer.notice } : {}),
    result: answer.result?.ok ? rowsOf(answer.result) : null,
    candidates: answer.candidates.map(candidateView),
    winner: answer.winner,
    decidedBy: answer.decidedBy,
    trace,
    usage: { promptTokens: answer.usage.promptTokens, evaluatedTokens: answer.usage.evaluatedTokens, generatedTokens: answer.usage.generatedTokens },
    timings: {
      totalMs: round(answer.timings.totalMs),
      ...(answer.timings.firstTokenMs !== undefined ? { firstTokenMs: round(answer.timings.firstTokenMs) } : {}),
    },
  };
  if (status.error) out.error = status.error;
  if (status.reason !== undefined) out.reason = status.reason;
  if (answer.shortfall !== undefined) out.shortfall = answer.shortfall;
  return out;
}

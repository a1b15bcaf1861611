/** How tool results look to an MCP client: JSON-safe rows, the answer's fields, and a short trace of the decode. */
import { answerView, roundMs, type Answer, type AnswerView } from "../decoding/index.js";
import { describeRewrites } from "../agent/index.js";
import type { ReexEvent } from "../events/index.js";
import { jsonCell, type ExecSuccess, type JsonCell } from "../sql/index.js";

/** A cell as MCP clients get it: src/sql's one encoding (`jsonCell`), as REST sends it. */
export type McpCell = JsonCell;

/** Rows of a query that ran. */
export interface McpRows {
  columns: string[];
  rows: McpCell[][];
  rowCount: number;
  truncated: boolean;
  elapsedMs: number;
}

/** The `ask` tool's answer: the one answer view ({@link answerView}) with its rows (with their time), a short trace, the token counts and the decode's timings. */
export interface McpAnswer extends AnswerView<McpRows | null> {
  shortfall?: string;
  /** One line per probe, probe result, prune, candidate and vote, in order; at most {@link TRACE_LINES}. */
  trace: string[];
  usage: { promptTokens: number; evaluatedTokens: number; generatedTokens: number };
  timings: { totalMs: number; firstTokenMs?: number };
}

/** Lines kept in an answer's trace; later ones are summarised in one last line. */
export const TRACE_LINES = 60;

/** A successful execution as a tool returns it. */
export function rowsOf(result: ExecSuccess): McpRows {
  return {
    columns: result.columns,
    rows: result.rows.map((r) => r.map(jsonCell)),
    rowCount: result.rowCount,
    truncated: result.truncated,
    elapsedMs: roundMs(result.elapsedMs),
  };
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
  const out: McpAnswer = {
    ...answerView(answer, answer.result?.ok ? rowsOf(answer.result) : null),
    trace,
    usage: { promptTokens: answer.usage.promptTokens, evaluatedTokens: answer.usage.evaluatedTokens, generatedTokens: answer.usage.generatedTokens },
    timings: {
      totalMs: roundMs(answer.timings.totalMs),
      ...(answer.timings.firstTokenMs !== undefined ? { firstTokenMs: roundMs(answer.timings.firstTokenMs) } : {}),
    },
  };
  if (answer.shortfall !== undefined) out.shortfall = answer.shortfall;
  return out;
}

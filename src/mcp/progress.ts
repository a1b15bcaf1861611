/** MCP progress notifications from the decoder's events: every probe, result, prune, candidate and vote, and token counts at most every interval. */
import type { EventSink, ReexEvent } from "../events/index.js";
import { traceLine } from "./format.js";

/** One progress notification's parameters, without the token. */
export interface ProgressUpdate {
  /** Events seen so far (tokens included); grows with every update. */
  progress: number;
  message: string;
}

/**
 * An event sink that turns decoder events into progress updates for `send`: structural events at
 * once, token events at most every `intervalMs` (default 250). `send` must not throw.
 */
export function progressSink(send: (update: ProgressUpdate) => void, intervalMs = 250, now: () => number = performance.now.bind(performance)): EventSink {
  let seen = 0;
  let tokens = 0;
  let sentAt = -Infinity;
  return (event: ReexEvent) => {
    seen++;
    if (event.type === "token") {
      tokens++;
      const t = now();
      if (t - sentAt < intervalMs) return;
      sentAt = t;
      send({ progress: seen, message: `generating: ${tokens} tokens so far` });
      return;
    }
    const line = event.type === "final" ? `final: ${event.sql ?? (event.answerable ? "no SQL" : "unanswerable")}` : traceLine(event);
    if (line === undefined) return;
    sentAt = now();
    send({ progress: seen, message: line });
  };
}

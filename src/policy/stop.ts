/**
 * Incremental text for a stream of sampled tokens, and stop-string detection on it. Shared by the
 * backends so that every policy stops the same way: on the decoded text, including a stop string
 * split across tokens.
 */

import { ReexError } from "../errors/index.js";
import type { GenerateOptions, GenerateResult, StopReason } from "./types.js";

/** A request's temperature (default 0) and top-p (default 1), checked the same way by every backend. */
export function samplingSettings(options: GenerateOptions): { temperature: number; topP: number } {
  const temperature = options.temperature ?? 0;
  const topP = options.topP ?? 1;
  if (!(temperature >= 0)) throw new ReexError("BAD_REQUEST", `temperature must be ≥ 0, got ${temperature}`);
  if (!(topP > 0 && topP <= 1)) throw new ReexError("BAD_REQUEST", `topP must be in (0, 1], got ${topP}`);
  return { temperature, topP };
}

/** A generation that produced nothing, ended for `stopReason`. */
export function emptyResult(stopReason: StopReason): GenerateResult {
  return { text: "", tokens: [], logprobs: [], stopReason };
}

/** Finds the earliest-ending stop string in a growing text; scans only what new text can complete. */
export class StopMatcher {
  private readonly stops: string[];
  private readonly longest: number;
  private scanned = 0;

  constructor(stops: readonly string[]) {
    this.stops = stops.filter((s) => s.length > 0);
    this.longest = this.stops.reduce((m, s) => Math.max(m, s.length), 0);
  }

  /** The stop string whose first occurrence in `text` ends earliest, with where it ends; undefined if none. */
  match(text: string): { stop: string; end: number } | undefined {
    if (this.longest === 0) return undefined;
    const from = Math.max(0, this.scanned - this.longest + 1);
    let best: { stop: string; end: number } | undefined;
    for (const stop of this.stops) {
      const at = text.indexOf(stop, from);
      if (at >= 0) {
        const end = at + stop.length;
        if (!best || end < best.end || (end === best.end && stop.length > best.stop.length)) best = { stop, end };
      }
    }
    this.scanned = text.length;
    return best;
  }
}

/**
 * Decodes a token stream into text as it grows. A multi-byte character split across tokens shows as
 * U+FFFD until its last byte arrives, so trailing replacement characters are held back (at most
 * `holdTokens` tokens) from the stable text.
 */
export class IncrementalText {
  private readonly tokens: number[] = [];
  private committedTokens = 0;
  private committedText = "";
  private tail = "";

  constructor(
    private readonly detokenize: (tokens: readonly number[], lastTokens: readonly number[]) => string,
    private readonly holdTokens = 4,
  ) {}

  /** Adds a token; returns the stable text so far (trailing incomplete characters held back). */
  push(token: number): string {
    this.tokens.push(token);
    const pendingTokens = this.tokens.slice(this.committedTokens);
    const lastTokens = this.tokens.slice(Math.max(0, this.committedTokens - 8), this.committedTokens);
    this.tail = this.detokenize(pendingTokens, lastTokens);
    if (!this.tail.endsWith("\uFFFD") || pendingTokens.length >= this.holdTokens) {
      this.committedText += this.tail;
      this.committedTokens = this.tokens.length;
      this.tail = "";
      return this.committedText;
    }
    return this.committedText + this.tail.replace(/\uFFFD+$/u, "");
  }

  /** All text, incomplete trailing characters included. */
  get text(): string {
    return this.committedText + this.tail;
  }
}

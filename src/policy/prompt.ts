/**
 * Prompt pieces: splitting a rendered chat at the shared prefix, and tokenising pieces so that only
 * chat-template text may produce control tokens.
 */
import type { PromptPart, PromptSpec } from "./types.js";

/** The concatenated text of parts. */
export function joinParts(parts: readonly PromptPart[]): string {
  return parts.map((p) => p.text).join("");
}

/** Splits parts at a character offset of their joined text. */
export function splitParts(parts: readonly PromptPart[], at: number): [PromptPart[], PromptPart[]] {
  const left: PromptPart[] = [];
  const right: PromptPart[] = [];
  let pos = 0;
  for (const p of parts) {
    const end = pos + p.text.length;
    if (end <= at) left.push(p);
    else if (pos >= at) right.push(p);
    else {
      left.push({ text: p.text.slice(0, at - pos), special: p.special });
      right.push({ text: p.text.slice(at - pos), special: p.special });
    }
    pos = end;
  }
  return [left.filter((p) => p.text.length > 0), right.filter((p) => p.text.length > 0)];
}

/**
 * Builds a PromptSpec from rendered parts: split after the first occurrence of `sharedPrefix`, else
 * at `fallbackSplit` (a character offset), else not at all (everything in the suffix).
 */
export function promptFromParts(parts: readonly PromptPart[], sharedPrefix: string | undefined, fallbackSplit: number | undefined): PromptSpec {
  const text = joinParts(parts);
  let at = -1;
  if (sharedPrefix) {
    const i = text.indexOf(sharedPrefix);
    if (i >= 0) at = i + sharedPrefix.length;
  }
  if (at < 0 && fallbackSplit !== undefined && fallbackSplit >= 0 && fallbackSplit <= text.length) at = fallbackSplit;
  if (at < 0) at = 0;
  const [prefix, suffix] = splitParts(parts, at);
  return { prefix: text.slice(0, at), suffix: text.slice(at), parts: { prefix, suffix } };
}

/**
 * The pieces to tokenise for one side of a prompt: `parts` when they join to exactly `text`,
 * otherwise the whole text as template text (control-token spellings recognised).
 */
export function piecesOf(text: string, parts: readonly PromptPart[] | undefined): PromptPart[] {
  if (parts && joinParts(parts) === text) return parts.filter((p) => p.text.length > 0);
  return text.length > 0 ? [{ text, special: true }] : [];
}

/** Tokenises pieces one by one with a tokenizer that takes a "recognise control tokens" flag. */
export function tokenizePieces(pieces: readonly PromptPart[], tokenize: (text: string, special: boolean) => number[]): number[] {
  const out: number[] = [];
  for (const p of pieces) for (const token of tokenize(p.text, p.special)) out.push(token);
  return out;
}

/** Where the last occurrence of `content` starts inside a plain (message content) part; undefined if nowhere. */
export function contentOffset(parts: readonly PromptPart[], content: string): number | undefined {
  if (content.length === 0) return undefined;
  let pos = parts.reduce((n, p) => n + p.text.length, 0);
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    pos -= part.text.length;
    if (!part.special) {
      const at = part.text.lastIndexOf(content);
      if (at >= 0) return pos + at;
    }
  }
  return undefined;
}

/** Drops empty parts and joins neighbours of the same kind. */
export function mergeParts(parts: readonly PromptPart[]): PromptPart[] {
  const out: PromptPart[] = [];
  for (const p of parts) {
    if (p.text.length === 0) continue;
    const prev = out.at(-1);
    if (prev && prev.special === p.special) prev.text += p.text;
    else out.push({ ...p });
  }
  return out;
}

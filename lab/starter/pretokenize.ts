/**
 * SFT records → token ids with a loss mask, exactly as the server's context will hold them:
 *
 * - the prompt is rendered through the model's chat template by the llama policy's own
 *   `renderChat` and tokenised piece by piece the way `LlamaPolicy.start` does (control-token
 *   pieces with special-token parsing, message text without);
 * - the response is cut at each executor block (`<result>\n…\n</result>\n`, `resultBlock`'s exact
 *   text): model-written pieces and injected blocks are tokenised separately (special tokens off),
 *   as the rollout samples the one and `Trajectory.append`s the other;
 * - mask: 0 on the prompt and on injected result blocks, 1 on everything the model writes — the
 *   closing `</intermediate_sql>`, the text after each result, `</final_sql>` — and on the
 *   end-of-turn token `<|im_end|>` appended after the response, so the model learns to stop.
 *
 * The output is the learner's experience format (docs/learner.md): one JSON line per record with
 * `prompt_tokens`, `tokens`, `mask` (plus `db_id`, `family`, `question_id`), readable by
 * the learner's SFT steps and runs (`reex_learner step --request FILE`).
 */
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { openModelTokenizer, type ModelTokenizer } from "../../src/policy/tooling.js";
import type { SftRecord } from "../synth/index.js";

/** A piece of a response: model-written text or an injected executor block. */
export interface ResponsePiece {
  text: string;
  injected: boolean;
}

/** An injected executor block exactly as `resultBlock` writes it. */
const RESULT_BLOCK = /<result>\n[\s\S]*?\n<\/result>\n/g;

/** Cuts a response into model-written and injected pieces (in order; empty pieces dropped). */
export function splitResponse(response: string): ResponsePiece[] {
  const out: ResponsePiece[] = [];
  let at = 0;
  for (const m of response.matchAll(RESULT_BLOCK)) {
    const start = m.index ?? 0;
    if (start > at) out.push({ text: response.slice(at, start), injected: false });
    out.push({ text: m[0], injected: true });
    at = start + m[0].length;
  }
  if (at < response.length) out.push({ text: response.slice(at), injected: false });
  return out;
}

/** Response tokens and loss mask: each piece tokenised alone, injected pieces mask 0, then end-of-turn (mask 1). */
export function encodeResponse(
  pieces: readonly ResponsePiece[],
  tokenize: (text: string) => number[],
  endOfTurn: number,
): { tokens: number[]; mask: number[] } {
  const tokens: number[] = [];
  const mask: number[] = [];
  for (const p of pieces) {
    const ids = tokenize(p.text);
    tokens.push(...ids);
    for (let i = 0; i < ids.length; i++) mask.push(p.injected ? 0 : 1);
  }
  tokens.push(endOfTurn);
  mask.push(1);
  return { tokens, mask };
}

/** One pre-tokenized SFT example in the learner's experience format. */
export interface TokenizedRecord {
  prompt_tokens: number[];
  tokens: number[];
  mask: number[];
  advantage: number;
  question_id: string;
  db_id: string;
  family: string;
}

/** A loaded GGUF's tokenizer plus the policy whose chat template renders prompts (src/policy's tooling). */
export type StarterTokenizer = ModelTokenizer;

/** Opens `modelPath` for tokenisation. */
export const openTokenizer: (modelPath: string) => Promise<StarterTokenizer> = openModelTokenizer;

/** Tokenises one SFT record. */
export function tokenizeRecord(rec: SftRecord, tok: StarterTokenizer): TokenizedRecord {
  const prompt = tok.promptTokens(rec.messages);
  const { tokens, mask } = encodeResponse(splitResponse(rec.response), (t) => tok.tokenize(t, false), tok.endOfTurn);
  return {
    prompt_tokens: prompt,
    tokens,
    mask,
    advantage: 0,
    question_id: `${rec.db_id}:${rec.question_id}:${rec.family}`,
    db_id: rec.db_id,
    family: rec.family,
  };
}

/** Reads a JSONL file line by line. */
export async function* readJsonl<T>(path: string): AsyncGenerator<T> {
  const rl = createInterface({ input: createReadStream(path, "utf8"), crlfDelay: Infinity });
  for await (const line of rl) if (line.trim()) yield JSON.parse(line) as T;
}

/** Length statistics of a tokenized set. */
export interface TokenStats {
  records: number;
  byFamily: Record<string, number>;
  prompt: { mean: number; p95: number; max: number };
  response: { mean: number; p95: number; max: number };
  total: { mean: number; p95: number; max: number; sum: number };
  lossTokens: number;
  injectedTokens: number;
  droppedTooLong: number;
}

function summary(xs: number[]): { mean: number; p95: number; max: number } {
  if (!xs.length) return { mean: 0, p95: 0, max: 0 };
  const s = [...xs].sort((a, b) => a - b);
  return { mean: Math.round(xs.reduce((a, b) => a + b, 0) / xs.length), p95: s[Math.floor(0.95 * (s.length - 1))]!, max: s.at(-1)! };
}

/** Options of {@link pretokenize}. */
export interface PretokenizeOptions {
  /** Families kept. Default all. */
  families?: readonly string[];
  /** Records longer than this (prompt + response) are dropped (they would not fit the context). Default 1024. */
  maxTokens?: number;
  /** Keep at most this many records (the file's order). Default all. */
  limit?: number;
  /** Progress callback every 1000 records. */
  onProgress?: (done: number) => void;
}

/** Tokenises `sftPath` (train_sft.jsonl) with the model at `modelPath`, writes `outPath`, returns length statistics. */
export async function pretokenize(modelPath: string, sftPath: string, outPath: string, options: PretokenizeOptions = {}): Promise<TokenStats> {
  const tok = await openTokenizer(modelPath);
  await mkdir(dirname(outPath), { recursive: true });
  const out = createWriteStream(outPath, "utf8");
  const maxTokens = options.maxTokens ?? 1024;
  const prompts: number[] = [];
  const responses: number[] = [];
  const totals: number[] = [];
  const byFamily: Record<string, number> = {};
  let lossTokens = 0;
  let injected = 0;
  let dropped = 0;
  try {
    for await (const rec of readJsonl<SftRecord>(sftPath)) {
      if (options.families && !options.families.includes(rec.family)) continue;
      if (options.limit !== undefined && prompts.length >= options.limit) break;
      const t = tokenizeRecord(rec, tok);
      const total = t.prompt_tokens.length + t.tokens.length;
      if (total > maxTokens) {
        dropped++;
        continue;
      }
      prompts.push(t.prompt_tokens.length);
      responses.push(t.tokens.length);
      totals.push(total);
      byFamily[rec.family] = (byFamily[rec.family] ?? 0) + 1;
      for (const m of t.mask) m ? lossTokens++ : injected++;
      if (!out.write(JSON.stringify(t) + "\n")) await new Promise<void>((r) => out.once("drain", () => r()));
      if (prompts.length % 1000 === 0) options.onProgress?.(prompts.length);
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    await tok.close();
  }
  return {
    records: prompts.length,
    byFamily,
    prompt: summary(prompts),
    response: summary(responses),
    total: { ...summary(totals), sum: totals.reduce((a, b) => a + b, 0) },
    lossTokens,
    injectedTokens: injected,
    droppedTooLong: dropped,
  };
}

/**
 * The starter policy's tokenizer: a byte-level BPE (GPT-2 style: 256 byte tokens + learned merges)
 * trained on the synthetic corpus, plus the ChatML control tokens. Stored in the GGUF as
 * `tokenizer.ggml.model = "gpt2"` with pre-tokenizer `trillion` (see `STARTER_PRE_TOKENIZER` in
 * model.ts: GPT-2's split regex without llama.cpp's space clean-up on detokenisation), so llama.cpp
 * splits text with the GPT-2 regex before applying the merges — the same split this trainer counts
 * pairs over (the trainer's regex adds a trailing `\s+` branch; any difference in how whitespace runs
 * split only changes merge statistics, never round-trip correctness, since training data is
 * tokenised by llama.cpp itself).
 *
 * Merges are learned with an incremental pair index (count → best pair; only words holding the
 * merged pair are revisited), so a 3k vocabulary over ~20 MB of text takes seconds, not minutes.
 * Ties are broken by the pair's string (smallest first), so the result is deterministic.
 */
import { byteToUnicode, CHATML_SPECIALS, GPT2_PRETOKENIZE, vocabularyFromMerges, type ChatmlVocabulary } from "../../src/policy/tooling.js";

export { GPT2_PRETOKENIZE, vocabularyFromMerges };

/** ChatML specials, in vocabulary order after the merges: BOS/padding, turn start, turn end (EOS/EOT). */
export const STARTER_SPECIALS = CHATML_SPECIALS;

/** A trained vocabulary, ready for the GGUF `tokenizer.ggml.*` keys. */
export type StarterVocabulary = ChatmlVocabulary;

/** Options of {@link trainTokenizer}. */
export interface TokenizerOptions {
  /** Total vocabulary: 256 bytes + merges + the specials. Default 3072. */
  vocabSize?: number;
  /** Words (pre-tokens) seen fewer times than this do not take part in merge counting. Default 2. */
  minWordCount?: number;
}

/** Counts pre-tokens of `texts` (byte-level spelling). */
export function countWords(texts: Iterable<string>): Map<string, number> {
  const words = new Map<string, number>();
  for (const text of texts) {
    for (const m of text.matchAll(GPT2_PRETOKENIZE)) words.set(m[0], (words.get(m[0]) ?? 0) + 1);
  }
  return words;
}

/**
 * Learns `count` merges over pre-token counts. Incremental: a pair index maps each adjacent symbol
 * pair to its total count and the words holding it; a merge rewrites only those words.
 */
export function learnMergesFast(words: Map<string, number>, count: number, minWordCount = 2): [string, string][] {
  const b2u = byteToUnicode();
  const symbols: string[] = [...b2u];
  const symbolId = new Map<string, number>(symbols.map((s, i) => [s, i]));
  const seqs: number[][] = [];
  const freq: number[] = [];
  for (const [w, n] of words) {
    if (n < minWordCount) continue;
    const bytes = [...Buffer.from(w, "utf8")];
    if (bytes.length < 2) continue;
    seqs.push(bytes.map((b) => symbolId.get(b2u[b]!)!));
    freq.push(n);
  }
  const key = (a: number, b: number): number => a * 1_048_576 + b;
  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const add = (wi: number, seq: number[], sign: number): void => {
    const n = freq[wi]! * sign;
    for (let i = 0; i + 1 < seq.length; i++) {
      const k = key(seq[i]!, seq[i + 1]!);
      pairCount.set(k, (pairCount.get(k) ?? 0) + n);
      if (sign > 0) {
        let set = pairWords.get(k);
        if (!set) pairWords.set(k, (set = new Set()));
        set.add(wi);
      }
    }
  };
  seqs.forEach((s, i) => add(i, s, 1));
  const merges: [string, string][] = [];
  while (merges.length < count) {
    let best = -1;
    let bestN = 0;
    let bestStr = "";
    for (const [k, n] of pairCount) {
      if (n < bestN || n <= 0) continue;
      if (n > bestN) {
        best = k;
        bestN = n;
        bestStr = "";
        continue;
      }
      if (!bestStr) bestStr = symbols[Math.floor(best / 1_048_576)]! + "\u0000" + symbols[best % 1_048_576]!;
      const str = symbols[Math.floor(k / 1_048_576)]! + "\u0000" + symbols[k % 1_048_576]!;
      if (str < bestStr) {
        best = k;
        bestStr = str;
      }
    }
    if (best < 0 || bestN < 2) break;
    const a = Math.floor(best / 1_048_576);
    const b = best % 1_048_576;
    const merged = symbols[a]! + symbols[b]!;
    let id = symbolId.get(merged);
    if (id === undefined) {
      id = symbols.length;
      symbols.push(merged);
      symbolId.set(merged, id);
    }
    merges.push([symbols[a]!, symbols[b]!]);
    const affected = pairWords.get(best) ?? new Set<number>();
    pairWords.delete(best);
    for (const wi of affected) {
      const seq = seqs[wi]!;
      add(wi, seq, -1);
      const out: number[] = [];
      for (let i = 0; i < seq.length; i++) {
        if (i + 1 < seq.length && seq[i] === a && seq[i + 1] === b) {
          out.push(id);
          i++;
        } else out.push(seq[i]!);
      }
      seqs[wi] = out;
      add(wi, out, 1);
    }
    pairCount.delete(best);
    // keep the map from filling with dead zero-count pairs (cheap relative to the scan above)
    if (merges.length % 64 === 0) for (const [k, n] of [...pairCount]) if (n <= 0) pairCount.delete(k);
  }
  return merges;
}

/** Trains the starter tokenizer on `texts` (deterministic for the same texts and options). */
export function trainTokenizer(texts: Iterable<string>, options: TokenizerOptions = {}): StarterVocabulary {
  const vocabSize = options.vocabSize ?? 3072;
  const mergeCount = vocabSize - 256 - STARTER_SPECIALS.length;
  if (mergeCount < 0) throw new Error(`vocabSize must be at least ${256 + STARTER_SPECIALS.length}`);
  const words = countWords(texts);
  const merges = learnMergesFast(words, mergeCount, options.minWordCount ?? 2);
  return vocabularyFromMerges(merges);
}

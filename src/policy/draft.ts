/**
 * Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
 * occurrence of a trajectory's last few tokens, looked up in its prompt (schema, matched values,
 * question) and in everything appended or sampled since (its own text, probes and their results).
 * The decode step verifies a draft against the model (internals.ts); this module only proposes.
 */

/** The longest n-gram looked up; longer matches are tried first. */
const MAX_NGRAM = 3;
/** The shortest n-gram looked up: single tokens match too often to be worth a drafted token's cost. */
const MIN_NGRAM = 2;

/** For each n-gram (n from MIN_NGRAM to MAX_NGRAM), the position right after its latest occurrence. */
type NgramIndex = Map<string, number>;

const promptIndexes = new WeakMap<readonly number[], NgramIndex>();

function key(at: (i: number) => number, end: number, n: number): string {
  let k = String(n);
  for (let i = end - n; i < end; i++) k += "," + at(i);
  return k;
}

/** The n-grams of `tokens` whose continuation is known, each mapped to its latest continuation. */
function indexOf(tokens: readonly number[]): NgramIndex {
  let index = promptIndexes.get(tokens);
  if (index) return index;
  index = new Map();
  const at = (i: number): number => tokens[i]!;
  for (let end = MIN_NGRAM; end < tokens.length; end++) {
    for (let n = MIN_NGRAM; n <= MAX_NGRAM && n <= end; n++) index.set(key(at, end, n), end);
  }
  promptIndexes.set(tokens, index);
  return index;
}

/**
 * Expected tokens a step yields when `k` tokens are drafted, each accepted with probability `alpha`
 * independently, and one more is sampled after the last accepted one.
 */
function expectedYield(alpha: number, k: number): number {
  return alpha >= 1 ? k + 1 : (1 - alpha ** (k + 1)) / (1 - alpha);
}

/** How a drafter sizes its drafts. */
export interface DraftOptions {
  /** Most tokens drafted in one step. Default 8. */
  draftMax?: number;
  /**
   * What one drafted token adds to the cost of a one-sequence decode step, as a share of that
   * step's cost with none (a step costs a fixed part plus a part per token, so the share grows with
   * the tokens already in the batch: see {@link NgramDrafter.length}). Default 0.4: on the starter
   * on CPU a batch of 4 tokens of one sequence took 2.2–4× one token's step (under load).
   */
  tokenCost?: number;
}

/**
 * Proposes drafts for one trajectory whose history is `prompt` followed by `record`, and adapts
 * their length to the acceptance it observes.
 */
export class NgramDrafter {
  private readonly own: NgramIndex = new Map();
  private indexed = 0;
  /** Running estimate of the chance that a drafted token is accepted. */
  private alpha: number;
  private readonly draftMax: number;
  private readonly tokenCost: number;

  constructor(
    private readonly prompt: readonly number[],
    private readonly record: readonly number[],
    options: DraftOptions = {},
    alpha = 0.6,
  ) {
    this.draftMax = Math.max(0, Math.floor(options.draftMax ?? 8));
    this.tokenCost = Math.min(0.95, Math.max(0.01, options.tokenCost ?? 0.4));
    this.alpha = alpha;
  }

  /** A drafter for a fork whose record starts as a copy of this one's, keeping what was learned of acceptance. */
  fork(record: readonly number[]): NgramDrafter {
    return new NgramDrafter(this.prompt, record, { draftMax: this.draftMax, tokenCost: this.tokenCost }, this.alpha);
  }

  /**
   * The draft length that maximises expected tokens per unit of step cost when `width` sequences
   * share the step (0: do not draft). With a step costing F + c per token, a drafted token costs
   * c against the (F + c × width) / width a plain step spends per sequence, so the wider the
   * step, the surer a draft must be to pay.
   */
  length(width = 1): number {
    const x = this.tokenCost / (1 - this.tokenCost);
    const cost = (Math.max(1, width) * x) / (1 + Math.max(1, width) * x);
    let best = 0;
    let bestRate = 1;
    for (let k = 1; k <= this.draftMax; k++) {
      const rate = expectedYield(this.alpha, k) / (1 + cost * k);
      if (rate > bestRate) {
        best = k;
        bestRate = rate;
      }
    }
    return best;
  }

  private at(i: number): number {
    return i < this.prompt.length ? this.prompt[i]! : this.record[i - this.prompt.length]!;
  }

  /** Indexes the n-grams of the record whose continuation is now known. */
  private sync(): void {
    const total = this.prompt.length + this.record.length;
    const from = Math.max(this.prompt.length, this.indexed, MIN_NGRAM);
    const at = (i: number): number => this.at(i);
    for (let end = from; end < total; end++) {
      for (let n = MIN_NGRAM; n <= MAX_NGRAM && n <= end; n++) this.own.set(key(at, end, n), end);
    }
    this.indexed = Math.max(this.indexed, total);
  }

  /**
   * Up to `max` tokens (and at most the adaptive length for a step of `width` sequences) that followed the latest earlier
   * occurrence of the history's last n tokens, longest n first, the trajectory's own text before
   * the prompt; [] when nothing matches.
   */
  draft(max = Infinity, width = 1): number[] {
    const k = Math.min(max, this.length(width));
    const total = this.prompt.length + this.record.length;
    if (k <= 0 || total < MIN_NGRAM) return [];
    this.sync();
    const at = (i: number): number => this.at(i);
    const promptIndex = indexOf(this.prompt);
    for (let n = Math.min(MAX_NGRAM, total); n >= MIN_NGRAM; n--) {
      const ngram = key(at, total, n);
      const from = this.own.get(ngram) ?? promptIndex.get(ngram);
      if (from === undefined) continue;
      const out: number[] = [];
      for (let i = from; i < total && out.length < k; i++) out.push(this.at(i));
      if (out.length > 0) return out;
    }
    return [];
  }

  /** Records a verified draft: `accepted` of its first `compared` tokens matched what the model sampled. */
  observe(compared: number, accepted: number): void {
    if (compared <= 0) return;
    // one draft is a run of trials ending at the first miss: the maximum-likelihood per-token rate
    // of this run is accepted / (accepted + misses); blended into a running estimate
    const misses = compared - accepted;
    const rate = accepted / (accepted + misses);
    const weight = Math.min(0.5, 0.15 * compared);
    this.alpha = Math.min(0.98, Math.max(0.02, (1 - weight) * this.alpha + weight * rate));
  }
}

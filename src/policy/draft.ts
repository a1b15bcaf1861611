/**
 * Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
 * occurrence of a trajectory's last tokens (the longest such match, up to eight tokens), looked up
 * in its own text (what it sampled and what was appended: probes and their results) and in its
 * prompt (schema, matched values, question). The decode step verifies a draft against the model
 * (internals.ts); this module proposes drafts and sizes them.
 *
 * A draft's size comes from two measurements, not a fixed rule: how many drafted tokens matches of
 * the same kind (own text or prompt, by match length) had accepted lately, per policy, and what a
 * decode step of so many tokens costs on this machine (the decode step times itself). On the
 * starter's rollouts of the example questions, a match of six or more tokens in the trajectory's
 * own text had its first drafted token accepted 92% of the time (8.2 tokens a run on average),
 * a two-to-five-token match in the prompt 23–56% (0.6–1.0): one acceptance rate for all drafts
 * would draft too much of the second and too little of the first. And on these CPUs a step of two
 * tokens costs 1.7–2× a step of one, eight 2.8–3.4× (llama-bench at 300–1,800 tokens of context,
 * one thread; 1.25× and 1.8× at two threads), so a short draft rarely pays where a long one can.
 */

import type { StepCost } from "./types.js";

/** The longest n-gram looked up; longer matches are tried first. */
const MAX_NGRAM = 8;
/** The shortest n-gram looked up: single tokens match too often to be worth a drafted token's cost. */
const MIN_NGRAM = 2;
/** Matches of this many tokens or more share one record of acceptance. */
const LONG_MATCH = 6;
/** Drafts remembered per kind of match. */
const WINDOW = 32;

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

/** A step of `n` tokens' cost, in one-token steps, when each token beyond the first adds `tokenCost` of one. */
function assumedCost(n: number, tokenCost: number): number {
  return 1 + tokenCost * (n - 1);
}

/** How a policy drafts. */
export interface DraftOptions {
  /** Most tokens drafted in one step. Default 8. */
  draftMax?: number;
  /**
   * What one more token adds to a decode step's cost, as a share of a one-token step, assumed for
   * step sizes not yet measured (see {@link StepCosts}). Default 0.4 (CPU; the policy passes 0.1 on a GPU).
   */
  tokenCost?: number;
  /**
   * "measured": step costs as the decode step timed them ({@link StepCosts}); "assumed": always
   * `1 + tokenCost × (n − 1)`, so drafting decisions depend on the tokens alone. Default "measured".
   */
  stepCosts?: "measured" | "assumed";
}

/**
 * Wall time of a context's decode steps by the number of tokens a step evaluates (the lower median
 * of the last 15 steps of each size, in milliseconds), recorded by the decode step itself. A median,
 * not an average: the first step of a size, or the first after the size changed, can carry one-off
 * work (a compute buffer grown, a CUDA graph captured) many times a plain step's cost; on an H100 an
 * average that one step moved by at most 20% (a faster second step replacing the first) held an
 * 8-token step at 8.0× a 1-token step after 26 steps, against 1.4× in a run that drafted more
 * (bench/runs/2026-11-27-h100).
 */
export class StepCosts {
  private readonly recent = new Map<number, number[]>();
  private readonly median = new Map<number, number>();
  private readonly seen = new Map<number, number>();

  /** Records a step of `tokens` tokens that took `ms` milliseconds (decode and sampling). */
  observe(tokens: number, ms: number): void {
    if (!(Number.isInteger(tokens) && tokens >= 1 && Number.isFinite(ms) && ms >= 0)) return;
    const recent = this.recent.get(tokens) ?? [];
    recent.push(ms);
    if (recent.length > STEP_WINDOW) recent.shift();
    this.recent.set(tokens, recent);
    const sorted = [...recent].sort((a, b) => a - b);
    this.median.set(tokens, sorted[(sorted.length - 1) >> 1]!);
    this.seen.set(tokens, (this.seen.get(tokens) ?? 0) + 1);
  }

  /**
   * The cost of a step of `n` tokens: measured where it was; else between the nearest measured
   * sizes, or scaled from the nearest one by `1 + tokenCost × (n − 1)`; that alone where nothing is measured.
   */
  cost(n: number, tokenCost: number): number {
    const measured = this.median.get(n);
    if (measured !== undefined) return measured;
    const prior = (k: number): number => assumedCost(k, tokenCost);
    let below: number | undefined;
    let above: number | undefined;
    for (const size of this.median.keys()) {
      if (size < n && (below === undefined || size > below)) below = size;
      if (size > n && (above === undefined || size < above)) above = size;
    }
    if (below !== undefined && above !== undefined) {
      const a = this.median.get(below)!;
      const b = this.median.get(above)!;
      return a + ((b - a) * (n - below)) / (above - below);
    }
    const near = below ?? above;
    return near === undefined ? prior(n) : (this.median.get(near)! * prior(n)) / prior(near);
  }

  /** The measured sizes, each with its cost in milliseconds and the steps seen, smallest size first. */
  table(): StepCost[] {
    return [...this.median.keys()].sort((a, b) => a - b).map((tokens) => ({ tokens, ms: this.median.get(tokens)!, steps: this.seen.get(tokens)! }));
  }
}

/** Steps of one size whose median is its cost. */
const STEP_WINDOW = 15;

/** A verified draft: how many of its tokens were compared with a sample, and how many were accepted. */
interface Run {
  compared: number;
  accepted: number;
}

/** Pseudo-drafts at each position, at the prior's rate, before a kind's own drafts are counted. */
const PRIOR_WEIGHT = 2;

/**
 * A policy's drafting: its options and, per kind of match (own text or prompt, by match length),
 * the drafts of its trajectories lately verified.
 */
export class DraftingState {
  readonly draftMax: number;
  readonly tokenCost: number;
  private readonly measured: boolean;
  private readonly runs = new Map<string, Run[]>();
  private refusals = 0;

  constructor(options: DraftOptions = {}) {
    this.draftMax = Math.max(0, Math.floor(options.draftMax ?? 8));
    this.tokenCost = Math.min(0.95, Math.max(0.01, options.tokenCost ?? 0.4));
    this.measured = options.stepCosts !== "assumed";
  }

  /** Records that a draft of `kind` had `accepted` of its first `compared` tokens accepted. */
  observe(kind: string, compared: number, accepted: number): void {
    if (compared <= 0) return;
    const runs = this.runs.get(kind) ?? [];
    runs.push({ compared, accepted });
    if (runs.length > WINDOW) runs.shift();
    this.runs.set(kind, runs);
  }

  /**
   * Expected accepted tokens of drafts of 1, 2, …, `kMax` tokens of a kind whose match was `n` tokens
   * long (element k − 1 for k tokens): the sum over positions j ≤ k of the chance that the first j are
   * all accepted, each position's chance of a rejection estimated from the recent drafts that reached
   * it (a draft that ran out first says nothing of the positions after it), starting from 1/n for a
   * kind not yet seen.
   */
  expectedAccepted(kind: string, n: number, kMax: number): number[] {
    const runs = this.runs.get(kind) ?? [];
    const prior = 1 / Math.max(2, n);
    const out: number[] = [];
    let survive = 1;
    let sum = 0;
    for (let j = 1; j <= kMax; j++) {
      let reached = 0;
      let rejected = 0;
      for (const r of runs) {
        if (r.compared < j || r.accepted < j - 1) continue;
        reached++;
        if (r.accepted === j - 1) rejected++;
      }
      survive *= 1 - (rejected + prior * PRIOR_WEIGHT) / (reached + PRIOR_WEIGHT);
      sum += survive;
      out.push(sum);
    }
    return out;
  }

  /**
   * The draft length (0: none) that maximises tokens per unit of step cost when `width` sequences
   * share the step, for a match of `kind` (`n` tokens long) with `available` tokens after it. A plain
   * step yields one token a sequence for cost(width); with every sequence taken to draft alike (the
   * others' drafts are not known yet, and on a wide step they make it dear), drafting k yields
   * 1 + E[accepted] a sequence for cost(width × (1 + k)).
   */
  length(kind: string, n: number, available: number, width: number, costs: StepCosts | undefined): number {
    const expected = this.expectedAccepted(kind, n, Math.min(this.draftMax, available));
    const assumed = (size: number): number => assumedCost(size, this.tokenCost);
    if (!(costs && this.measured)) return bestLength(expected, width, assumed);
    const best = bestLength(expected, width, (size) => costs.cost(size, this.tokenCost));
    if (best > 0) return best;
    // a refusal that rests on measured costs is overruled now and then, so that a size measured
    // once when it was dear (a one-off, another process) is measured again instead of never
    const hoped = bestLength(expected, width, assumed);
    if (hoped > 0 && ++this.refusals % REMEASURE_EVERY === 0) return hoped;
    return 0;
  }
}

/** Every how many refusals based on measured costs a draft is made anyway, sized by the assumed costs. */
const REMEASURE_EVERY = 32;

/** The draft length (0: none) with the most tokens per unit of `cost` for `width` sequences drafting alike. */
function bestLength(expected: readonly number[], width: number, cost: (size: number) => number): number {
  const w = Math.max(1, width);
  let best = 0;
  let bestRate = 1 / cost(w);
  for (let k = 1; k <= expected.length; k++) {
    const rate = (1 + expected[k - 1]!) / cost(w * (1 + k));
    if (rate > bestRate) {
      best = k;
      bestRate = rate;
    }
  }
  return best;
}

/**
 * Proposes drafts for one trajectory whose history is `prompt` followed by `record`, sized by its
 * policy's {@link DraftingState} and the step costs of its context.
 */
export class NgramDrafter {
  private readonly own: NgramIndex = new Map();
  private indexed = 0;
  /** The kind of match the last draft came from, for {@link observe}. */
  private lastKind = "";

  constructor(
    private readonly prompt: readonly number[],
    private readonly record: readonly number[],
    private readonly state: DraftingState,
  ) {}

  /** A drafter for a fork whose record starts as a copy of this one's. */
  fork(record: readonly number[]): NgramDrafter {
    return new NgramDrafter(this.prompt, record, this.state);
  }

  /** Indexes the n-grams of the record whose continuation is now known. */
  private sync(): void {
    const total = this.prompt.length + this.record.length;
    const from = Math.max(this.prompt.length, this.indexed, MIN_NGRAM);
    const at = (i: number): number => this.tokenAt(i);
    for (let end = from; end < total; end++) {
      for (let n = MIN_NGRAM; n <= MAX_NGRAM && n <= end; n++) this.own.set(key(at, end, n), end);
    }
    this.indexed = Math.max(this.indexed, total);
  }

  /**
   * The latest earlier occurrence of the history's last n tokens, longest n first (up to 8), the
   * trajectory's own text before the prompt: where its continuation starts, how many tokens follow,
   * and the kind of match; undefined when nothing matches.
   */
  match(): { from: number; available: number; n: number; kind: string } | undefined {
    const total = this.prompt.length + this.record.length;
    if (total < MIN_NGRAM) return undefined;
    this.sync();
    const at = (i: number): number => this.tokenAt(i);
    const promptIndex = indexOf(this.prompt);
    for (let n = Math.min(MAX_NGRAM, total); n >= MIN_NGRAM; n--) {
      const ngram = key(at, total, n);
      const own = this.own.get(ngram);
      const from = own ?? promptIndex.get(ngram);
      if (from === undefined) continue;
      return { from, available: total - from, n, kind: `${own !== undefined ? "own" : "prompt"}${Math.min(n, LONG_MATCH)}` };
    }
    return undefined;
  }

  /** The history's token at position `i` (the prompt's, then the record's). */
  tokenAt(i: number): number {
    return i < this.prompt.length ? this.prompt[i]! : this.record[i - this.prompt.length]!;
  }

  /**
   * Up to `max` tokens that continue the {@link match}, as many as pay for a step of `width`
   * sequences with these `costs`; [] when nothing matches or nothing pays.
   */
  draft(max = Infinity, width = 1, costs?: StepCosts): number[] {
    if (max <= 0 || this.state.draftMax <= 0) return [];
    const m = this.match();
    if (!m) return [];
    const k = this.state.length(m.kind, m.n, Math.min(max, m.available), width, costs);
    if (k <= 0) return [];
    this.lastKind = m.kind;
    const out: number[] = [];
    for (let i = m.from; i < m.from + k; i++) out.push(this.tokenAt(i));
    return out;
  }

  /** Records a verified draft: `accepted` of its first `compared` tokens matched what the model sampled. */
  observe(compared: number, accepted: number): void {
    this.state.observe(this.lastKind, compared, accepted);
  }
}

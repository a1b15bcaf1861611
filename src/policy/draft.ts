/**
 * Prompt-lookup drafting for speculative decoding: the tokens that followed the latest earlier
 * occurrence of a trajectory's last tokens (the longest such match, up to eight tokens), looked up
 * in its own text (what it sampled and what was appended: probes and their results), in its
 * prompt (schema, matched values, question) and in the text of earlier trajectories on the same
 * prompt prefix ({@link DraftHistory}). The decode step verifies a draft against the model
 * (direct-decode.ts); this module proposes drafts and sizes them.
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

import type { Config } from "../config/index.js";
import type { StepCost } from "./types.js";

/** How drafts are sized: by the acceptance seen and the step's cost ("sized"), or always `draftMax` ("fixed"); the config's `decoding.draftShape`. */
export type DraftShape = Config["decoding"]["draftShape"];

/** The longest n-gram looked up; longer matches are tried first. */
const MAX_NGRAM = 8;
/** The shortest n-gram looked up: single tokens match too often to be worth a drafted token's cost. */
const MIN_NGRAM = 2;
/** Matches of this many tokens or more share one record of acceptance. */
const LONG_MATCH = 6;
/** Drafts remembered per kind of match. */
const WINDOW = 32;

/**
 * For each n-gram (n from MIN_NGRAM to MAX_NGRAM, by {@link hashAt}), the position right after its
 * latest occurrence; {@link find} checks the tokens, so a hash collision is never drafted from.
 */
type NgramIndex = Map<number, number>;

const promptIndexes = new WeakMap<readonly number[], NgramIndex>();

/** A hash of the `n` tokens before `end`. */
function hashAt(at: (i: number) => number, end: number, n: number): number {
  let a = 0x811c9dc5 ^ n;
  let b = n * 0x9e3779b1;
  for (let i = end - n; i < end; i++) {
    const t = at(i);
    a = Math.imul(a ^ t, 0x01000193);
    b = Math.imul(b ^ (t + 0x7f4a7c15), 0x5bd1e995) ^ (b >>> 15);
  }
  return (a >>> 0) * 0x100000 + (b >>> 12);
}

/** Indexes the n-grams that end at positions `from` to `to` − 1 and start at `start` or later. */
function indexEnds(index: NgramIndex, at: (i: number) => number, start: number, from: number, to: number): void {
  for (let end = Math.max(from, start + MIN_NGRAM); end < to; end++) {
    for (let n = MIN_NGRAM; n <= MAX_NGRAM && end - n >= start; n++) index.set(hashAt(at, end, n), end);
  }
}

/** Where the continuation of the latest indexed occurrence of the `n` tokens before `end` starts in `source`; undefined where there is none. */
function find(index: NgramIndex, at: (i: number) => number, end: number, n: number, source: (i: number) => number | undefined): number | undefined {
  const from = index.get(hashAt(at, end, n));
  if (from === undefined) return undefined;
  for (let i = 1; i <= n; i++) if (source(from - i) !== at(end - i)) return undefined;
  return from;
}

/** The n-grams of `tokens` whose continuation is known, each mapped to its latest continuation. */
function indexOf(tokens: readonly number[]): NgramIndex {
  let index = promptIndexes.get(tokens);
  if (index) return index;
  index = new Map();
  indexEnds(index, (i) => tokens[i]!, 0, MIN_NGRAM, tokens.length);
  promptIndexes.set(tokens, index);
  return index;
}

/** One scope's remembered text: records laid end to end, each after a SEPARATOR. */
interface HistoryScope {
  tokens: number[];
  /** For each n-gram hash, the position right after its latest occurrence in `tokens`. */
  index: Map<number, number>;
}

/** Ends each remembered record; never a token, so no n-gram or draft runs across it. */
const SEPARATOR = -1;

/**
 * Text the policy's trajectories wrote and were given (their own tokens, probes and the results
 * injected after them), remembered across trajectories and requests per scope (the prompt's shared
 * prefix: system message and schema), so that one answer drafts from the answers before it on the
 * same database: the starter's reasoning and SQL repeat across questions (draft-replay: a
 * 1.26× ceiling from the prompt and the trajectory's own text, 1.56× with the earlier answers on
 * the same database). Oldest scopes are forgotten first past `maxTokens` in all.
 */
export class DraftHistory {
  private readonly scopes = new Map<string, HistoryScope>();
  private size = 0;

  /** @param maxTokens Tokens remembered across all scopes; 0 remembers nothing. */
  constructor(readonly maxTokens: number) {}

  /** Tokens remembered across all scopes. */
  get tokens(): number {
    return this.size;
  }

  /** Remembers `tokens` as one record of `scope` (n-grams within it only). */
  add(scope: string, tokens: readonly number[]): void {
    if (this.maxTokens <= 0 || tokens.length < MIN_NGRAM + 1) return;
    let entry = this.scopes.get(scope);
    if (entry) this.scopes.delete(scope);
    entry ??= { tokens: [], index: new Map() };
    this.scopes.set(scope, entry);
    const record = tokens.length > this.maxTokens ? tokens.slice(-this.maxTokens) : tokens;
    const start = entry.tokens.length + 1;
    entry.tokens.push(SEPARATOR);
    for (const t of record) entry.tokens.push(t);
    this.size += record.length + 1;
    indexRecord(entry, start);
    if (entry.tokens.length > this.maxTokens) {
      // keep the later half of this scope's records, whole records only
      const cut = entry.tokens.indexOf(SEPARATOR, entry.tokens.length - (this.maxTokens >> 1));
      const kept = entry.tokens.slice(cut >= 0 ? cut : entry.tokens.length - record.length - 1);
      this.size -= entry.tokens.length - kept.length;
      entry.tokens = kept;
      entry.index = new Map();
      for (let i = 0; i < kept.length; i++) if (kept[i] === SEPARATOR) indexRecord(entry, i + 1);
    }
    for (const [name, other] of this.scopes) {
      if (this.size <= this.maxTokens || name === scope) break;
      this.scopes.delete(name);
      this.size -= other.tokens.length;
    }
  }

  /**
   * The tokens that followed the latest remembered occurrence in `scope` of the `n` tokens before
   * `end` (read through `at`), up to `limit` and never past a record's end, with the length of the
   * match counted back up to 32 tokens; undefined where there is none.
   */
  continuation(scope: string, at: (i: number) => number, end: number, n: number, limit: number): { tokens: number[]; matched: number } | undefined {
    const entry = this.scopes.get(scope);
    if (!entry) return undefined;
    const t = entry.tokens;
    const read = (i: number): number | undefined => (t[i] === SEPARATOR ? undefined : t[i]);
    const from = find(entry.index, at, end, n, read);
    return from === undefined ? undefined : continuationAt(from, n, end, at, read, limit);
  }
}

/** Matched tokens counted back from a match of `n`, at most this many: a longer match drafts more reliably. */
const MAX_MATCHED = 32;

/**
 * The continuation at `from` in `source` (undefined past its text) of a match of the `n` tokens
 * before `end` (read through `at`): up to `limit` tokens of it, and how many tokens the match
 * reaches back, from `n` up to {@link MAX_MATCHED}; undefined where nothing follows.
 */
function continuationAt(
  from: number,
  n: number,
  end: number,
  at: (i: number) => number,
  source: (i: number) => number | undefined,
  limit: number,
): { tokens: number[]; matched: number } | undefined {
  const tokens: number[] = [];
  for (let t = source(from); t !== undefined && tokens.length < limit; t = source(from + tokens.length)) tokens.push(t);
  if (tokens.length === 0) return undefined;
  let matched = n;
  while (matched < MAX_MATCHED && end - matched - 1 >= 0 && source(from - matched - 1) === at(end - matched - 1)) matched++;
  return { tokens, matched };
}

/** The acceptance record a match of `matched` tokens from `source` shares with others (own, prompt or history; 2–5, 6–7, 8–11, 12–19, 20+ tokens). */
function kindOf(source: string, matched: number): string {
  const bucket = matched >= 20 ? 20 : matched >= 12 ? 12 : matched >= 8 ? 8 : Math.min(matched, LONG_MATCH);
  return `${source}${bucket}`;
}

/** Indexes the n-grams of the record that starts at `start` in a scope (it runs to the next separator). */
function indexRecord(entry: HistoryScope, start: number): void {
  const t = entry.tokens;
  const next = t.indexOf(SEPARATOR, start);
  indexEnds(entry.index, (i) => t[i]!, start, start, next < 0 ? t.length : next);
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
  /**
   * Tokens of earlier trajectories' text remembered to draft from ({@link DraftHistory}), across
   * all scopes; 0 drafts from the prompt and the trajectory's own text only. Default 0.
   */
  historyTokens?: number;
  /**
   * "sized": {@link DraftingState.length} chooses each draft's length; "fixed": a lone generating
   * sequence drafts `draftMax` tokens every step, filled up with guesses where the lookup has fewer,
   * so its steps keep one shape. Default "sized".
   */
  shape?: DraftShape;
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
  /** See {@link DraftOptions.shape}. */
  readonly shape: DraftShape;
  private readonly measured: boolean;
  private readonly runs = new Map<string, Run[]>();
  private refusals = 0;
  /** Earlier trajectories' text, where {@link DraftOptions.historyTokens} keeps any. */
  readonly history: DraftHistory | undefined;

  constructor(options: DraftOptions = {}) {
    this.draftMax = Math.max(0, Math.floor(options.draftMax ?? 8));
    this.tokenCost = Math.min(0.95, Math.max(0.01, options.tokenCost ?? 0.4));
    this.measured = options.stepCosts !== "assumed";
    this.shape = options.shape ?? "sized";
    const historyTokens = Math.max(0, Math.floor(options.historyTokens ?? 0));
    this.history = historyTokens > 0 ? new DraftHistory(historyTokens) : undefined;
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

/** Where a trajectory's drafter remembers and looks up earlier text ({@link DraftHistory}). */
export interface HistoryScopeOptions {
  /** The scope's name: trajectories of one scope draft from each other's text. */
  scope: string;
  /** Whether this trajectory's text is remembered for later ones (false: it only reads). Default true. */
  write?: boolean;
}

/** The longest continuation a match returns. */
const MAX_CONTINUATION = 64;

/**
 * Proposes drafts for one trajectory whose history is `prompt` followed by `record`, sized by its
 * policy's {@link DraftingState} and the step costs of its context; with a `history` scope it also
 * drafts from, and adds its text to, the policy's {@link DraftHistory}.
 */
export class NgramDrafter {
  private readonly own: NgramIndex = new Map();
  private indexed = 0;
  /** The kind of match the last draft came from, for {@link observe}. */
  private lastKind = "";
  /** How many of the last draft's tokens came from the match (the rest are a fixed shape's filling). */
  private lastMatched = Infinity;
  /** How much of the record is in the history already. */
  private remembered: number;

  constructor(
    private readonly prompt: readonly number[],
    private readonly record: readonly number[],
    private readonly state: DraftingState,
    private readonly history?: HistoryScopeOptions,
    remembered = 0,
  ) {
    this.remembered = Math.min(remembered, record.length);
  }

  /** A drafter for a fork whose record starts as a copy of this one's (or a rewound one's). */
  fork(record: readonly number[]): NgramDrafter {
    return new NgramDrafter(this.prompt, record, this.state, this.history, this.remembered);
  }

  /** Indexes the n-grams of the record whose continuation is now known. */
  private sync(): void {
    const total = this.prompt.length + this.record.length;
    const from = Math.max(this.prompt.length, this.indexed, MIN_NGRAM);
    indexEnds(this.own, (i) => this.tokenAt(i), 0, from, total);
    this.indexed = Math.max(this.indexed, total);
  }

  /**
   * The continuation of the longest match (up to 8 tokens) of the history's last tokens: in the
   * trajectory's own text, else its prompt, else the remembered text of its scope (at equal length
   * in that order); up to `limit` tokens of it, its length and kind; undefined when nothing matches.
   */
  match(limit = MAX_CONTINUATION): { tokens: number[]; n: number; kind: string } | undefined {
    const total = this.prompt.length + this.record.length;
    if (total < MIN_NGRAM || limit <= 0) return undefined;
    this.sync();
    const at = (i: number): number => this.tokenAt(i);
    const promptIndex = indexOf(this.prompt);
    const history = this.history && this.state.history;
    // the prompt and the record are one text: a prompt match's continuation runs on into the record
    const read = (i: number): number | undefined => (i >= 0 && i < total ? this.tokenAt(i) : undefined);
    for (let n = Math.min(MAX_NGRAM, total); n >= MIN_NGRAM; n--) {
      const own = find(this.own, at, total, n, read);
      const from = own ?? find(promptIndex, at, total, n, read);
      const found = from !== undefined ? continuationAt(from, n, total, at, read, limit) : history?.continuation(this.history!.scope, at, total, n, limit);
      if (found)
        return { tokens: found.tokens, n: found.matched, kind: kindOf(from === undefined ? "history" : own !== undefined ? "own" : "prompt", found.matched) };
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
    const limit = Math.min(max, this.state.draftMax);
    const m = this.match(limit);
    if (this.state.shape === "fixed" && width <= 1) {
      // one shape every step: the match's continuation, else what followed the last token the
      // last time it came (a guess too weak to pay for a step of its own, free in a step of fixed
      // shape), then its last token again; each verified like any drafted token
      const tokens = m ? m.tokens.slice(0, limit) : this.afterLastToken(limit);
      this.lastKind = m?.kind ?? "";
      this.lastMatched = m ? tokens.length : 0;
      const filler = tokens.at(-1) ?? this.tokenAt(this.prompt.length + this.record.length - 1);
      while (tokens.length < limit) tokens.push(filler);
      return tokens;
    }
    if (!m) return [];
    const k = this.state.length(m.kind, m.n, m.tokens.length, width, costs);
    if (k <= 0) return [];
    this.lastKind = m.kind;
    this.lastMatched = Infinity;
    return m.tokens.slice(0, k);
  }

  /** Up to `limit` tokens that followed the latest earlier occurrence of the last token, in the prompt or the trajectory's text; [] where it is new. */
  afterLastToken(limit: number): number[] {
    const total = this.prompt.length + this.record.length;
    const last = total > 0 ? this.tokenAt(total - 1) : undefined;
    for (let i = total - 2; i >= 0; i--) {
      if (this.tokenAt(i) !== last) continue;
      const out: number[] = [];
      for (let j = i + 1; j < total && out.length < limit; j++) out.push(this.tokenAt(j));
      return out;
    }
    return [];
  }

  /**
   * Records a verified draft: `accepted` of its first `compared` tokens matched what the model
   * sampled (of a filled-up draft, only the match's part counts for its kind).
   */
  observe(compared: number, accepted: number): void {
    const matched = this.lastMatched;
    if (matched === 0) return;
    this.state.observe(this.lastKind, Math.min(compared, matched), Math.min(accepted, matched));
  }

  /**
   * Adds the record's text since the last call to the scope's remembered text (with the tokens
   * before it that its first n-grams need); nothing without a writable scope.
   */
  remember(): void {
    const history = this.state.history;
    if (!history || !this.history || this.history.write === false || this.record.length <= this.remembered) return;
    history.add(this.history.scope, this.record.slice(Math.max(0, this.remembered - MAX_NGRAM)));
    this.remembered = this.record.length;
  }
}

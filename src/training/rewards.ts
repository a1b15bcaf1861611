/**
 * Every training reward (docs/rewards.md) in one module: the ReEx composite with its weight presets,
 * Think2SQL's dense QATCH rewards, SQL-R1, CogniSQL, PaVeRL partial match, Arctic and SkyRL-SQL. Each reward
 * returns its additive components and their weights (`total = Σ weights[k] · components[k]`) plus
 * diagnostics, so a run logs every term separately.
 *
 * Scoring has two halves: {@link gatherFacts} executes the final and gold SQL (gold results cached
 * per database and gold SQL) and reads the response; {@link rewardFromFacts} is pure arithmetic.
 *
 * Choices the papers leave open, fixed here:
 * - "Correct" means EX under the BIRD rule (set of rows) unless `exRule` says otherwise; where the
 *   database has a second row draw (`RewardContext.dbPath2`) the answer must be right on both, so a
 *   wrong WHERE that happens to hit the first draw's one matching row earns nothing. QATCH and
 *   PaVeRL's partial credit take the lower of the two draws'.
 * - Exploration's σ(n) is the logistic function of the raw interaction count n (σ(0) = 0.5,
 *   σ(1) ≈ 0.73, σ(3) ≈ 0.95): with a wrong answer, more probing earns more, never 1.
 * - Entity reward: Ent(s) is the union of tables and `table.column`s; when the gold SQL names
 *   no entity it is 1 for any final SQL; no final SQL gives 0.
 * - Think2SQL cells are compared as sets of normalised cells ({@link cellKey}); the gated
 *   variant keeps the raw QATCH (≤ 0.1) when the format fails.
 * - SQL-R1 is hierarchical: a format failure zeroes the other terms, a non-executable query the
 *   result and length terms. Length term: 0.5 · min(1, generated tokens / k) on correct answers
 *   only (fuller reasoning is rewarded only when it pays off), 0 otherwise.
 * - CogniSQL: strict format 1 and soft format 0.5 are separate terms (a strict response earns both);
 *   the length term is −0.5 when the response has more than k generated tokens.
 * - PaVeRL: a gold column is matched by a distinct predicted column with the same multiset of
 *   values; a correct result counts as EXf = 1.
 * - A response is read in its model profile's protocol (default `reex`): the final SQL, the
 *   probes the exploration term counts, the strict format (the profile's `formatCheck`) and the
 *   soft format all use the profile's tags, so `<sql>`/`<solution>` score under `skyrl-sql` as
 *   `<intermediate_sql>`/`<final_sql>` do under `reex`.
 */
import {
  extractFinal,
  extractProbes,
  familyFor,
  normalizeSql,
  reexProfile,
  segments,
  type ModelProfile,
  type ProfileId,
  type PromptFamily,
} from "../agent/index.js";
import { ReexError } from "../errors/index.js";
import type { ExRule } from "../eval/index.js";
import {
  cellKey,
  exBird,
  exRefined,
  exSpider,
  extractEntities,
  hasOrderBy,
  loadSchema,
  type ExecResult,
  type Executor,
  type ResultRows,
} from "../sql/index.js";

/** The ReEx composite's five weights: format, em, exec, entity, exploration. */
export interface ReexWeights {
  format: number;
  em: number;
  exec: number;
  entity: number;
  exploration: number;
}

/** ReEx weight presets of the paper, keyed by their canonical names. */
export const REEX_WEIGHT_PRESETS = {
  maxtune: { format: 2, em: 1, exec: 3, entity: 1, exploration: 2 },
  base: { format: 1.5, em: 0.8, exec: 1.5, entity: 0.8, exploration: 0.5 },
  "high-exploration": { format: 1.5, em: 0.8, exec: 1.5, entity: 0.8, exploration: 2 },
  "high-format-ex": { format: 2, em: 0.8, exec: 3, entity: 0.8, exploration: 0.5 },
  uniform: { format: 1, em: 1, exec: 1, entity: 1, exploration: 1 },
  "reex-explore": { format: 2, em: 1, exec: 3, entity: 1, exploration: 2 },
} as const satisfies Record<string, ReexWeights>;

/** Names of the ReEx composite presets; "custom" starts from all-zero weights. */
export type ReexPreset = keyof typeof REEX_WEIGHT_PRESETS | "custom";

/** Every reward preset: the ReEx composites plus the other papers' rewards. */
export const REWARD_PRESETS = [
  "maxtune",
  "base",
  "high-exploration",
  "high-format-ex",
  "uniform",
  "reex-explore",
  "custom",
  "think2sql",
  "qatch",
  "sql-r1",
  "cognisql",
  "paverl",
  "arctic",
  "skyrl-sql",
  "outcome",
] as const;

/** Presets whose group rule defaults to correctness-first (config `reward.rule: "auto"`). */
export const CORRECTNESS_FIRST_PRESETS: readonly RewardPreset[] = ["outcome", "reex-explore"];

/** A reward preset's canonical name. */
export type RewardPreset = (typeof REWARD_PRESETS)[number];

/** EX rules a reward may call "correct": src/eval's `EX_RULES` (BIRD, Spider test-suite, Think2SQL refined). */
export type RewardExRule = ExRule;

/** Templates the format rewards accept: the prompt family's, or one of the papers' two-block formats. */
export const REWARD_TEMPLATES = ["family", "reasoning-answer", "think-answer"] as const;

/** One of {@link REWARD_TEMPLATES}. */
export type RewardTemplate = (typeof REWARD_TEMPLATES)[number];

/** How to score: a preset plus its knobs. */
export interface RewardSpec {
  /** Case and punctuation are ignored ("MaxTune", "HighFormat-EX" work). Default "maxtune". */
  preset?: string;
  /** ReEx presets only: weights overriding the preset's (all of them for "custom"). Default none. */
  weights?: Partial<ReexWeights>;
  /** ReEx presets only: false sets the exploration weight to 0 (the term is still logged). Default true. */
  exploration?: boolean;
  /** Default "bird". */
  exRule?: RewardExRule;
  /** k of the SQL-R1 and CogniSQL length terms, in generated tokens. Default 512. */
  lengthTokens?: number;
  /** Default "family". */
  template?: RewardTemplate;
}

/** A {@link RewardSpec} with every default filled in and the preset name canonical. */
export interface ResolvedRewardSpec {
  preset: RewardPreset;
  /** Set for ReEx presets. */
  weights?: ReexWeights;
  exploration: boolean;
  exRule: RewardExRule;
  lengthTokens: number;
  template: RewardTemplate;
}

/** One probe as the exploration reward sees it. */
export interface RewardProbe {
  sql: string;
  /** Same normalised SQL as an earlier probe. */
  repeated: boolean;
}

/** Everything one response is scored from. */
export interface RewardContext {
  /** The whole response after the prompt, injected feedback blocks (`<result>`, `<observation>`, …) included. */
  response: string;
  /** The protocol the response is read in: its tags, format check and answer. Default the `reex` profile. */
  profile?: ModelProfile;
  /** Must be one the profile supports (BAD_REQUEST otherwise). Default the profile's first family ("execution-aware" for reex). */
  family?: PromptFamily;
  /** The final SQL; default read from `response` in the profile's tags. */
  finalSql?: string | null;
  /** Default read from `response` (the profile's closed probe blocks; repeats by normalised SQL). */
  probes?: readonly RewardProbe[];
  /** Interaction steps; default the number of probes. */
  interactions?: number;
  goldSql: string;
  dbPath: string;
  /**
   * The database's second row draw (the same schema, rows drawn again; src/eval's `EvalItem.dbPath2`): the
   * final and gold SQL run there too and "correct" means correct on both draws. Default none.
   */
  dbPath2?: string;
  /** The gold result when already known; default executed (and cached). */
  goldResult?: ExecResult;
  /** Tokens the model sampled; default 0. */
  generatedTokens?: number;
}

/** What the rewards are computed from: the response read, the final and gold SQL executed. */
export interface RewardFacts {
  /** The profile the response was read in. */
  profile: ProfileId;
  family: PromptFamily;
  /** The response follows the strict template (the profile's format check for the "family" template). */
  formatOk: boolean;
  formatProblems: string[];
  /** A reasoning block followed by a closed answer block, other text allowed (in the profile's tags). */
  softFormatOk: boolean;
  finalSql: string | null;
  goldSql: string;
  /** Null when there is no final SQL. */
  finalResult: ExecResult | null;
  goldResult: ExecResult;
  executable: boolean;
  /** The final result equals the gold result under the spec's EX rule: on the first row draw and, with a second ({@link RewardContext.dbPath2}), on it too. */
  correct: boolean;
  /** With a second row draw: the verdict on each draw, and the final and gold results on the second. */
  draws?: { first: boolean; second: boolean; finalResult: ExecResult | null; goldResult: ExecResult };
  /** Normalised SQL equality, 0/1. */
  em: number;
  /** |Ent(final) ∩ Ent(gold)| / |Ent(gold)|. */
  entity: number;
  probes: RewardProbe[];
  interactions: number;
  generatedTokens: number;
}

/** One response's reward: `total = Σ weights[k] · components[k]`; `details` are diagnostics outside the sum. */
export interface RewardBreakdown {
  preset: RewardPreset;
  total: number;
  components: Record<string, number>;
  weights: Record<string, number>;
  details: Record<string, number>;
  correct: boolean;
  /** With a second row draw: whether the answer was right on each (`correct` is both). */
  draws?: { first: boolean; second: boolean };
  executable: boolean;
  formatOk: boolean;
}

/** Executions the rewards need, with their limits. */
export interface RewardEnv {
  executor: Executor;
  /** Shared cache of gold results; default a fresh one per call. */
  goldCache?: GoldCache;
  /** Per-query limit for final and gold SQL, ms. Default 30000 (SQL-R1's training limit). */
  timeoutMs?: number;
  /** Rows kept per result. Default 100000. */
  maxRows?: number;
}

const DEFAULT_REWARD_TIMEOUT_MS = 30_000;
const DEFAULT_REWARD_MAX_ROWS = 100_000;

/** Gold results cached per (database, gold SQL); concurrent requests share one execution. */
export class GoldCache {
  private readonly results = new Map<string, Promise<ExecResult>>();

  /** The cached gold result, executing it on first use. A failed execution is cached too (gold SQL does not change). */
  get(executor: Executor, dbPath: string, goldSql: string, options: { timeoutMs?: number; maxRows?: number } = {}): Promise<ExecResult> {
    const key = `${dbPath}\0${goldSql}`;
    let hit = this.results.get(key);
    if (!hit) {
      hit = executor.execute(dbPath, goldSql, options);
      this.results.set(key, hit);
      hit.catch(() => this.results.delete(key));
    }
    return hit;
  }

  /** Stores a known gold result. */
  set(dbPath: string, goldSql: string, result: ExecResult): void {
    this.results.set(`${dbPath}\0${goldSql}`, Promise.resolve(result));
  }

  get size(): number {
    return this.results.size;
  }
}

/** The logistic function 1 / (1 + e^−x). */
export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

function canonicalPreset(name: string): RewardPreset | null {
  const key = name.toLowerCase().replace(/[^a-z0-9]/g, "");
  for (const p of REWARD_PRESETS) if (p.replace(/[^a-z0-9]/g, "") === key) return p;
  return null;
}

/** True for presets of the ReEx composite (weighted format, em, exec, entity, exploration). */
export function isReexPreset(preset: RewardPreset): preset is ReexPreset {
  return preset === "custom" || preset in REEX_WEIGHT_PRESETS;
}

/** Fills in a spec's defaults and checks it (idempotent); unknown presets and misplaced weights are BAD_REQUEST. */
export function resolveRewardSpec(spec: RewardSpec = {}): ResolvedRewardSpec {
  const name = spec.preset ?? "maxtune";
  const preset = canonicalPreset(name);
  if (!preset) throw new ReexError("BAD_REQUEST", `unknown reward preset "${name}"; use one of ${REWARD_PRESETS.join(", ")}`);
  const lengthTokens = spec.lengthTokens ?? 512;
  if (!(lengthTokens > 0)) throw new ReexError("BAD_REQUEST", `lengthTokens must be positive, got ${lengthTokens}`);
  const resolved: ResolvedRewardSpec = {
    preset,
    exploration: spec.exploration ?? true,
    exRule: spec.exRule ?? "bird",
    lengthTokens,
    template: spec.template ?? "family",
  };
  if (isReexPreset(preset)) {
    const base: ReexWeights = preset === "custom" ? { format: 0, em: 0, exec: 0, entity: 0, exploration: 0 } : { ...REEX_WEIGHT_PRESETS[preset] };
    const weights = { ...base, ...spec.weights };
    for (const [k, v] of Object.entries(weights)) {
      if (!Number.isFinite(v)) throw new ReexError("BAD_REQUEST", `reward weight ${k} must be a finite number, got ${v}`);
    }
    if (!resolved.exploration) weights.exploration = 0;
    resolved.weights = weights;
  } else if (spec.weights && Object.keys(spec.weights).length > 0) {
    throw new ReexError("BAD_REQUEST", `reward weights apply to the ReEx presets only, not "${preset}"`);
  }
  return resolved;
}

// ---------------------------------------------------------------------------------------------
// Reading the response
// ---------------------------------------------------------------------------------------------

/** Probes of a response in order (the profile's probe tag), each flagged when its normalised SQL repeats an earlier one. Default profile `reex`. */
export function probesOf(response: string, profile: ModelProfile = reexProfile): RewardProbe[] {
  const seen = new Set<string>();
  return extractProbes(response, profile.syntax).map((sql) => {
    const key = normalizeSql(sql);
    const repeated = seen.has(key);
    seen.add(key);
    return { sql, repeated };
  });
}

const TWO_BLOCK: Record<Exclude<RewardTemplate, "family">, RegExp> = {
  "reasoning-answer": /^\s*<reasoning>[\s\S]*?<\/reasoning>\s*<answer>[\s\S]*?\S[\s\S]*?<\/answer>\s*$/i,
  "think-answer": /^\s*<think>[\s\S]*?<\/think>\s*<answer>[\s\S]*?\S[\s\S]*?<\/answer>\s*$/i,
};

/**
 * Strict format: the whole response follows the template, end tokens allowed after it. The
 * "family" template is the profile's own format check for the family. Default profile `reex`.
 */
export function strictFormat(
  response: string,
  family: PromptFamily,
  template: RewardTemplate = "family",
  profile: ModelProfile = reexProfile,
): { ok: boolean; problems: string[] } {
  if (template === "family") return profile.formatCheck(response, family);
  const body = response.replace(/(?:\s*(?:<\|im_end\|>|<\|eot_id\|>|<\|endoftext\|>|<\|end\|>|<end_of_turn>|<\/s>|<eos>))+\s*$/, "");
  const ok = TWO_BLOCK[template].test(body);
  return { ok, problems: ok ? [] : [`does not follow the ${template} template`] };
}

const CLOSED_SQL_FENCE = /```[ \t]*(?:sql|sqlite)[ \t]*\n([\s\S]*?)```/gi;

/**
 * Soft format, in the profile's tags: a closed reasoning block (`<think>`, `<reasoning>`) followed
 * somewhere later by a closed, non-empty answer block (`<final_sql>`, `<answer>`, `<solution>`).
 * A fenced-answer profile (OmniSQL) reasons in free text: some text, then a closed non-empty
 * ```sql fence. Default profile `reex`.
 */
export function softFormat(response: string, profile: ModelProfile = reexProfile): boolean {
  const segs = segments(response, profile.syntax);
  if (!profile.answer.open.startsWith("<")) {
    const fences = [...response.matchAll(CLOSED_SQL_FENCE)];
    const last = fences.at(-1);
    return last !== undefined && last[1]!.trim().length > 0 && response.slice(0, last.index).trim().length > 0;
  }
  const think = segs.findIndex((s) => (s.role === "think" || s.role === "think-alias") && s.closed);
  if (think < 0) return false;
  return segs.slice(think + 1).some((s) => (s.role === "final" || s.role === "final-alias") && s.closed && s.content.trim().length > 0);
}

// ---------------------------------------------------------------------------------------------
// Component functions (pure)
// ---------------------------------------------------------------------------------------------

/** 1 iff the final SQL equals the gold SQL after normalisation (whitespace, case outside quotes, trailing ";"), else 0. */
export function emReward(finalSql: string | null, goldSql: string): number {
  if (finalSql === null || finalSql.trim() === "") return 0;
  return normalizeSql(finalSql) === normalizeSql(goldSql) ? 1 : 0;
}

/** Whether `pred` equals `gold` under an EX rule (Spider's row order counts only when the gold SQL orders). */
export function resultsMatch(pred: ResultRows, gold: ResultRows, rule: RewardExRule = "bird", goldSql = ""): boolean {
  if (rule === "spider") return exSpider(pred, gold, { orderMatters: hasOrderBy(goldSql) });
  if (rule === "refined") return exRefined(pred, gold);
  return exBird(pred, gold);
}

/** |Ent(final) ∩ Ent(gold)| / |Ent(gold)| over tables and `table.column`s; 1 when gold names none, 0 without final SQL. */
export function entityReward(finalSql: string | null, goldSql: string, schema: Parameters<typeof extractEntities>[1]): number {
  if (finalSql === null || finalSql.trim() === "") return 0;
  const ent = (sql: string): Set<string> => {
    const e = extractEntities(sql, schema);
    return new Set([...e.tables, ...e.columns]);
  };
  const gold = ent(goldSql);
  if (gold.size === 0) return 1;
  const pred = ent(finalSql);
  let hit = 0;
  for (const x of gold) if (pred.has(x)) hit++;
  return hit / gold.size;
}

/** ReEx exploration: 0 if any probe repeats; 1 if the final result is correct; else σ(n), n the raw interaction count. */
export function explorationReward(probes: readonly RewardProbe[], correct: boolean, interactions: number): number {
  if (probes.some((p) => p.repeated)) return 0;
  if (correct) return 1;
  return sigmoid(interactions);
}

function cellSet(rows: ResultRows): Set<string> {
  const out = new Set<string>();
  for (const row of rows) for (const cell of row) out.add(cellKey(cell));
  return out;
}

function overlap(a: Set<string>, b: Set<string>): number {
  let n = 0;
  for (const x of a) if (b.has(x)) n++;
  return n;
}

/** Think2SQL cell precision: |cells(gold) ∩ cells(pred)| / |cells(pred)| (sets); both empty 1, one empty 0. */
export function cellPrecision(pred: ResultRows, gold: ResultRows): number {
  const p = cellSet(pred);
  const g = cellSet(gold);
  if (p.size === 0 || g.size === 0) return p.size === g.size ? 1 : 0;
  return overlap(g, p) / p.size;
}

/** Think2SQL cell recall: |cells(gold) ∩ cells(pred)| / |cells(gold)| (sets); both empty 1, one empty 0. */
export function cellRecall(pred: ResultRows, gold: ResultRows): number {
  const p = cellSet(pred);
  const g = cellSet(gold);
  if (p.size === 0 || g.size === 0) return p.size === g.size ? 1 : 0;
  return overlap(g, p) / g.size;
}

/** Think2SQL tuple cardinality: min(|gold|, |pred|) / max(…) over row counts; both empty 1. */
export function tupleCardinality(pred: ResultRows, gold: ResultRows): number {
  const hi = Math.max(pred.length, gold.length);
  return hi === 0 ? 1 : Math.min(pred.length, gold.length) / hi;
}

/** QATCH = (CP + CR + TC) / 3, and 1 when EX holds; both empty 1, one empty 0. */
export function qatchScore(pred: ResultRows, gold: ResultRows, ex: boolean): { cp: number; cr: number; tc: number; qatch: number } {
  const cp = cellPrecision(pred, gold);
  const cr = cellRecall(pred, gold);
  const tc = tupleCardinality(pred, gold);
  let qatch: number;
  if (ex || (pred.length === 0 && gold.length === 0)) qatch = 1;
  else if (pred.length === 0 || gold.length === 0) qatch = 0;
  else qatch = (cp + cr + tc) / 3;
  return { cp, cr, tc, qatch };
}

/** Think2SQL's gated QATCH: 0 if not executable; 0.1 if executable, QATCH ≤ 0.1 and the format is ok; QATCH otherwise. */
export function gatedQatch(executable: boolean, qatch: number, formatOk: boolean): number {
  if (!executable) return 0;
  if (qatch <= 0.1 && formatOk) return 0.1;
  return qatch;
}

/** PaVeRL's EXf: the share of gold result columns matched by a distinct predicted column with the same multiset of values. */
export function columnMatchShare(pred: ResultRows, gold: ResultRows, goldWidth?: number): number {
  const width = goldWidth ?? gold[0]?.length ?? 0;
  if (width === 0) return 0;
  const predWidth = pred[0]?.length ?? 0;
  const signature = (rows: ResultRows, c: number): string => JSON.stringify(rows.map((r) => cellKey(r[c] ?? null)).sort());
  const available = new Map<string, number>();
  for (let c = 0; c < predWidth; c++) {
    const s = signature(pred, c);
    available.set(s, (available.get(s) ?? 0) + 1);
  }
  let matched = 0;
  for (let c = 0; c < width; c++) {
    const s = signature(gold, c);
    const n = available.get(s) ?? 0;
    if (n > 0) {
      matched++;
      available.set(s, n - 1);
    }
  }
  return matched / width;
}

// ---------------------------------------------------------------------------------------------
// Facts and scoring
// ---------------------------------------------------------------------------------------------

/**
 * Reads the response in its profile's tags and executes the final and gold SQL (gold through the
 * cache). Never throws for bad SQL; a family the profile does not support is BAD_REQUEST.
 */
export async function gatherFacts(context: RewardContext, env: RewardEnv, spec: ResolvedRewardSpec = resolveRewardSpec()): Promise<RewardFacts> {
  const profile = context.profile ?? reexProfile;
  const family = familyFor(profile, context.family);
  const limits = { timeoutMs: env.timeoutMs ?? DEFAULT_REWARD_TIMEOUT_MS, maxRows: env.maxRows ?? DEFAULT_REWARD_MAX_ROWS };
  const finalSql = context.finalSql === undefined ? extractFinal(context.response, profile.syntax).sql : context.finalSql;
  const probes = context.probes ? context.probes.map((p) => ({ sql: p.sql, repeated: p.repeated })) : probesOf(context.response, profile);
  const goldCache = env.goldCache ?? new GoldCache();
  const hasFinal = finalSql !== null && finalSql.trim() !== "";
  const run = (dbPath: string): Promise<ExecResult | null> => (hasFinal ? env.executor.execute(dbPath, finalSql, limits) : Promise.resolve(null));
  const second = context.dbPath2;
  const [goldResult, finalResult, gold2, final2] = await Promise.all([
    context.goldResult ?? goldCache.get(env.executor, context.dbPath, context.goldSql, limits),
    run(context.dbPath),
    second ? goldCache.get(env.executor, second, context.goldSql, limits) : undefined,
    second ? run(second) : undefined,
  ]);
  if (context.goldResult) goldCache.set(context.dbPath, context.goldSql, context.goldResult);
  const format = strictFormat(context.response, family, spec.template, profile);
  const executable = finalResult?.ok === true;
  const right = (final: ExecResult | null, gold: ExecResult): boolean =>
    final?.ok === true && gold.ok && resultsMatch(final.rows, gold.rows, spec.exRule, context.goldSql);
  const first = right(finalResult, goldResult);
  const draws = gold2 ? { first, second: right(final2 ?? null, gold2), finalResult: final2 ?? null, goldResult: gold2 } : undefined;
  const correct = first && (draws?.second ?? true);
  return {
    profile: profile.id,
    family,
    formatOk: format.ok,
    formatProblems: format.problems,
    softFormatOk: softFormat(context.response, profile),
    finalSql,
    goldSql: context.goldSql,
    finalResult,
    goldResult,
    executable,
    correct,
    ...(draws ? { draws } : {}),
    em: emReward(finalSql, context.goldSql),
    entity: entityReward(finalSql, context.goldSql, loadSchema(context.dbPath)),
    probes,
    interactions: context.interactions ?? probes.length,
    generatedTokens: context.generatedTokens ?? 0,
  };
}

function breakdown(
  spec: ResolvedRewardSpec,
  facts: RewardFacts,
  components: Record<string, number>,
  weights: Record<string, number>,
  details: Record<string, number> = {},
): RewardBreakdown {
  let total = 0;
  for (const [k, v] of Object.entries(components)) total += (weights[k] ?? 0) * v;
  return {
    preset: spec.preset,
    total,
    components,
    weights,
    details: {
      ...details,
      correct: facts.correct ? 1 : 0,
      executable: facts.executable ? 1 : 0,
      ...(facts.draws ? { correct_first_draw: facts.draws.first ? 1 : 0, correct_second_draw: facts.draws.second ? 1 : 0 } : {}),
    },
    correct: facts.correct,
    ...(facts.draws ? { draws: { first: facts.draws.first, second: facts.draws.second } } : {}),
    executable: facts.executable,
    formatOk: facts.formatOk,
  };
}

/** The ReEx composite: weighted format, em, exec (0..2; its result half is `correct`, so on both row draws where there are two), entity and exploration. */
export function reexReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const weights = spec.weights ?? REEX_WEIGHT_PRESETS.maxtune;
  // validity (1 if the final SQL runs) + result (1 if correct), so 0..2
  const exec = { valid: facts.executable ? 1 : 0, result: facts.correct ? 1 : 0 };
  return breakdown(
    spec,
    facts,
    {
      format: facts.formatOk ? 1 : 0,
      em: facts.em,
      exec: exec.valid + exec.result,
      entity: facts.entity,
      exploration: explorationReward(facts.probes, facts.correct, facts.interactions),
    },
    { ...weights },
    { exec_valid: exec.valid, exec_result: exec.result },
  );
}

function rowsOf(result: ExecResult | null): ResultRows | null {
  return result?.ok ? result.rows : null;
}

/**
 * Think2SQL: 0.95 · QATCH (gated for "think2sql", plain for "qatch"; 0 when not executable) + 0.05 · format.
 * With a second row draw the QATCH term is the lower of the two draws' (details: the first draw's).
 */
export function think2sqlReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const onDraw = (final: ExecResult | null, goldResult: ExecResult) => {
    const pred = rowsOf(final);
    const gold = rowsOf(goldResult);
    const q = pred && gold ? qatchScore(pred, gold, facts.correct) : { cp: 0, cr: 0, tc: 0, qatch: 0 };
    const executable = final?.ok === true;
    return { q, main: spec.preset === "think2sql" ? gatedQatch(executable, q.qatch, facts.formatOk) : executable ? q.qatch : 0 };
  };
  const { q, main } = onDraw(facts.finalResult, facts.goldResult);
  const second = facts.draws ? onDraw(facts.draws.finalResult, facts.draws.goldResult).main : main;
  return breakdown(
    spec,
    facts,
    { qatch: Math.min(main, second), format: facts.formatOk ? 1 : 0 },
    { qatch: 0.95, format: 0.05 },
    {
      cell_precision: q.cp,
      cell_recall: q.cr,
      tuple_cardinality: q.tc,
      qatch_raw: q.qatch,
    },
  );
}

/** SQL-R1: format ±1, execution ±2, result ±3, length (see the module doc); hierarchical. */
export function sqlR1Reward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const format = facts.formatOk ? 1 : -1;
  const execution = !facts.formatOk ? 0 : facts.executable ? 2 : -2;
  const result = !facts.formatOk || !facts.executable ? 0 : facts.correct ? 3 : -3;
  const length = result === 3 ? 0.5 * Math.min(1, facts.generatedTokens / spec.lengthTokens) : 0;
  return breakdown(spec, facts, { format, execution, result, length }, { format: 1, execution: 1, result: 1, length: 1 });
}

/** CogniSQL: strict format 1, soft format 0.5, correctness 2, length −0.5 past k generated tokens. */
export function cogniSqlReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  return breakdown(
    spec,
    facts,
    {
      format: facts.formatOk ? 1 : 0,
      soft_format: facts.softFormatOk ? 0.5 : 0,
      correctness: facts.correct ? 2 : 0,
      length: facts.generatedTokens > spec.lengthTokens ? -0.5 : 0,
    },
    { format: 1, soft_format: 1, correctness: 1, length: 1 },
  );
}

/** PaVeRL partial match: 10 · EXf when some gold column is matched, 0.5 if the query runs but matches none, 0 otherwise (EXf: the lower of the two row draws' where there are two). */
export function paverlReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const share = (final: ExecResult | null, goldResult: ExecResult): number => {
    const pred = rowsOf(final);
    return pred && goldResult.ok ? columnMatchShare(pred, goldResult.rows, goldResult.columns.length) : 0;
  };
  const first = share(facts.finalResult, facts.goldResult);
  const exf = facts.correct ? 1 : facts.draws ? Math.min(first, share(facts.draws.finalResult, facts.draws.goldResult)) : first;
  const partial = exf > 0 ? 10 * exf : facts.executable ? 0.5 : 0;
  return breakdown(spec, facts, { partial }, { partial: 1 }, { exf });
}

/** Arctic: 1 if correct, 0.1 if it runs and the response follows the template, 0 otherwise. */
export function arcticReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const outcome = facts.correct ? 1 : facts.executable && facts.formatOk ? 0.1 : 0;
  return breakdown(spec, facts, { outcome }, { outcome: 1 });
}

/**
 * SkyRL-SQL's outcome reward (NovaSky-AI/SkyRL, skyrl-gym's SQL environment): −1 when the response
 * fails the format check, else 1 if the final result equals gold, 0 otherwise. The format check is
 * the profile's strict one, not skyrl-gym's own (which allows text between tags and asks for a
 * `<think>` after every observation).
 */
export function skyrlSqlReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  const outcome = !facts.formatOk ? -1 : facts.correct ? 1 : 0;
  return breakdown(spec, facts, { outcome }, { outcome: 1 });
}

/** Outcome: 1 if correct, plus 0.05 if the final SQL runs and 0.05 if the response follows the template (tie-breakers). */
export function outcomeReward(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  return breakdown(
    spec,
    facts,
    { correct: facts.correct ? 1 : 0, executable: facts.executable ? 1 : 0, format: facts.formatOk ? 1 : 0 },
    { correct: 1, executable: 0.05, format: 0.05 },
  );
}

/** The reward of a preset over gathered facts (pure). */
export function rewardFromFacts(facts: RewardFacts, spec: ResolvedRewardSpec): RewardBreakdown {
  switch (spec.preset) {
    case "think2sql":
    case "qatch":
      return think2sqlReward(facts, spec);
    case "sql-r1":
      return sqlR1Reward(facts, spec);
    case "cognisql":
      return cogniSqlReward(facts, spec);
    case "paverl":
      return paverlReward(facts, spec);
    case "arctic":
      return arcticReward(facts, spec);
    case "skyrl-sql":
      return skyrlSqlReward(facts, spec);
    case "outcome":
      return outcomeReward(facts, spec);
    default:
      return reexReward(facts, spec);
  }
}

/** Scores one response: gathers the facts (executing SQL) and applies the preset. */
export async function scoreResponse(context: RewardContext, spec: RewardSpec, env: RewardEnv): Promise<{ reward: RewardBreakdown; facts: RewardFacts }> {
  const resolved = resolveRewardSpec(spec);
  const facts = await gatherFacts(context, env, resolved);
  return { reward: rewardFromFacts(facts, resolved), facts };
}

/**
 * Evaluation metrics: EX under each rule of `EX_RULES` for one prediction, per-item scores (EX,
 * voting accuracy, pass@1, pass@k, error category, cost) and their pure aggregation, overall and
 * by difficulty.
 */
import { checkIdentifiers, copyRewriteFields, identifiersIn, type BindingReport, type RewriteFields, type SchemaNames } from "../agent/index.js";
import { exBird, exRefined, exSpider, hasOrderBy, sqlScopes } from "../sql/index.js";
import type { ExecResult, SqlErrorCategory } from "../sql/index.js";
import { ReexError } from "../errors/index.js";
import type { Signals } from "../decoding/index.js";
import { trustMetrics, type TrustMetrics } from "./trust.js";

/** Every EX rule, in report order: BIRD (set of rows), Spider test-suite (bag, column permutation, order iff gold has ORDER BY), Think2SQL refined. */
export const EX_RULES = ["bird", "spider", "refined"] as const;

/** One of {@link EX_RULES}. */
export type ExRule = (typeof EX_RULES)[number];

/** A verdict per EX rule. */
export type RuleScores = Record<ExRule, boolean>;

/** A share (0..1) per EX rule. */
export type RuleRates = Record<ExRule, number>;

/** Why a prediction produced no comparable result: an executor category, no SQL at all, or the decoder failing. */
export type PredictionErrorCategory = SqlErrorCategory | "no_sql" | "decode";

/** Known BIRD difficulties, in report order; others follow alphabetically. */
export const DIFFICULTY_ORDER: readonly string[] = ["simple", "moderate", "challenging"];

const ALL_FALSE: RuleScores = Object.freeze({ bird: false, spider: false, refined: false });

/**
 * Scores a predicted execution against the gold one under every EX rule; anything that did not
 * run (either side) is wrong under every rule.
 */
export function compareResults(gold: ExecResult | undefined, pred: ExecResult | undefined, goldSql: string): RuleScores {
  if (!gold?.ok || !pred?.ok) return { ...ALL_FALSE };
  const orderMatters = hasOrderBy(goldSql);
  return {
    bird: exBird(pred.rows, gold.rows),
    spider: exSpider(pred.rows, gold.rows, { orderMatters }),
    refined: exRefined(pred.rows, gold.rows),
  };
}

/** How far a predicted SQL copies its names from the schema: table and column identifiers it uses, and how many of them the schema has. */
export interface CopyCount {
  /** Distinct table and column identifiers (case-insensitive), aliases the query defines left out. */
  identifiers: number;
  /** Of those, the ones that name a table or column of the schema. */
  inSchema: number;
  /** The others, as written. */
  invented: string[];
}

/**
 * Counts the table and column identifiers of `sql` and those the schema has; pure. Aliases are not
 * identifiers: the query's own FROM-list aliases (`FROM t x`, `JOIN t AS x`, a derived table's), read by
 * the SQL scope walker, including one that follows an invented table.
 */
export function copyCount(sql: string, schema: SchemaNames): CopyCount {
  const names = new Set(schema.tables.flatMap((t) => [t.name.toLowerCase(), ...t.columns.map((c) => c.toLowerCase())]));
  const aliases = new Set(sqlScopes(sql).scopes.flatMap((scope) => scope.from.flatMap((item) => (item.alias ? [item.alias] : []))));
  const invented = checkIdentifiers(sql, schema).filter((n) => !aliases.has(n.toLowerCase()) || names.has(n.toLowerCase()));
  const inSchema = new Set(identifiersIn(sql).filter((n) => names.has(n))).size;
  return { identifiers: inSchema + invented.length, inSchema, invented };
}

/** One candidate as the scorer sees it: its SQL, its evaluation-time execution, and what the decoder said of it (each rewrite rule's changes under its field: `agent.repairTables`'s `repairs`, …). */
export interface CandidateInput extends RewriteFields {
  index: number;
  path?: string;
  sql: string | null;
  result?: ExecResult;
  votes?: number;
  group?: number | null;
  interactions?: number;
  /** How the decoder bound its names to their FROM lists (`decoding.bindNames`). */
  binding?: BindingReport;
}

/** A candidate's summary in the record, with each rewrite rule's changes under its field. */
export interface CandidateScore extends RewriteFields {
  index: number;
  path?: string;
  sql: string | null;
  ex: RuleScores;
  error: PredictionErrorCategory | null;
  votes?: number;
  group?: number | null;
  interactions?: number;
  binding?: BindingReport;
}

/** Everything known about one evaluated question, before scoring. */
export interface ScoreInput {
  index: number;
  questionId: number | string;
  dbId: string;
  question: string;
  evidence?: string;
  difficulty?: string;
  goldSql: string;
  gold: ExecResult;
  /** The answer's final SQL and its evaluation-time execution. */
  final: { sql: string | null; result?: ExecResult };
  /** The gold and final SQL executed on the database's second row draw, where it has one. Default none. */
  secondDraw?: { gold: ExecResult; final?: ExecResult };
  /** Candidates in the decoder's order; empty for a bare prediction (the final SQL then counts as the only one). */
  candidates: CandidateInput[];
  /** Index of the winning candidate; undefined for a bare prediction (the final SQL is the winner). */
  winner?: number | null;
  /** Probe rounds of the winning trajectory; null when not measured. */
  interactions: number | null;
  latencyMs: number | null;
  /** Generated and evaluated tokens; `examples`: the prompt tokens the verified examples took (present when some were shown). */
  tokens: { generated: number; evaluated: number; examples?: number } | null;
  decodeError?: { code: string; message: string };
  /** The database's names, for {@link CopyCount}; left out, the item has no copy count. */
  schema?: SchemaNames;
  /** The dataset marks the question unanswerable: no SQL is right, abstaining is. */
  unanswerable?: boolean;
  /** What the decoder said of the answer's trust: its confidence and whether it was marked answerable; left out, it counts as answered when its SQL ran. */
  trust?: { confidence: number; answered: boolean; doubts?: string[]; signals?: Signals };
}

/** One question's scored record. */
export interface ItemScore {
  index: number;
  questionId: number | string;
  dbId: string;
  difficulty?: string;
  question: string;
  evidence?: string;
  gold: string;
  predicted: string | null;
  /** Set when the gold SQL itself failed to run (the item then counts as wrong). */
  goldError?: { category: SqlErrorCategory; message: string };
  /** EX of the final SQL (on the first row draw: the database the model saw). */
  ex: RuleScores;
  /** EX of the final SQL on the database's second row draw (gold run there too); absent without one. */
  exSecondDraw?: RuleScores;
  /** The vote's winning candidate is correct. */
  voting: RuleScores;
  /** The first candidate is correct. */
  pass1: RuleScores;
  /** Any candidate is correct. */
  passK: RuleScores;
  /** Candidates considered for pass@k. */
  k: number;
  /** Why the final SQL gave no result; null when it ran. */
  error: PredictionErrorCategory | null;
  errorMessage?: string;
  /** A compared result hit the row cap, so EX was judged on a prefix. */
  truncated?: boolean;
  /** Names of the final SQL against the schema; absent without a final SQL or a schema. */
  copy?: CopyCount;
  candidates: CandidateScore[];
  interactions: number | null;
  latencyMs: number | null;
  /** Generated and evaluated tokens; `examples`: the prompt tokens the verified examples took (present when some were shown). */
  tokens: { generated: number; evaluated: number; examples?: number } | null;
  decodeError?: { code: string; message: string };
  /** The dataset marks the question unanswerable. */
  unanswerable?: true;
  /** The answer's confidence; null when the decoder gave none. */
  confidence: number | null;
  /** The answer was marked answerable (its SQL ran and its confidence reached the threshold). */
  answered: boolean;
  /** What lowered the confidence, in words. */
  doubts?: string[];
  /** The signals the confidence was computed from (scripts/fit-confidence.ts reads them). */
  signals?: Signals;
}

function errorOf(sql: string | null, result: ExecResult | undefined): PredictionErrorCategory | null {
  if (sql === null || sql.trim() === "") return "no_sql";
  if (!result) return "no_sql";
  return result.ok ? null : result.error.category;
}

function any(list: RuleScores[]): RuleScores {
  return { bird: list.some((s) => s.bird), spider: list.some((s) => s.spider), refined: list.some((s) => s.refined) };
}

/** Turns executed gold, final and candidate SQL into one item's scores; pure. */
export function scoreItem(input: ScoreInput): ItemScore {
  const compare = (result: ExecResult | undefined): RuleScores => (input.unanswerable ? { ...ALL_FALSE } : compareResults(input.gold, result, input.goldSql));
  const finalEx = compare(input.final.result);
  const bare = input.candidates.length === 0;
  const candidates: CandidateScore[] = (bare ? [{ index: 0, sql: input.final.sql, result: input.final.result }] : input.candidates).map((c) => ({
    index: c.index,
    ...(c.path !== undefined ? { path: c.path } : {}),
    sql: c.sql,
    ex: compare(c.result),
    error: errorOf(c.sql, c.result),
    ...(c.votes !== undefined ? { votes: c.votes } : {}),
    ...(c.group !== undefined ? { group: c.group } : {}),
    ...(c.interactions !== undefined ? { interactions: c.interactions } : {}),
    ...copyRewriteFields(c),
    ...(c.binding ? { binding: c.binding } : {}),
  }));
  const winnerIndex = bare ? 0 : (input.winner ?? null);
  const winner = winnerIndex === null ? undefined : candidates.find((c) => c.index === winnerIndex);
  const truncated = [input.gold, input.final.result, input.secondDraw?.gold, input.secondDraw?.final, ...input.candidates.map((c) => c.result)].some(
    (r) => r?.ok && r.truncated,
  );
  const error = input.decodeError ? "decode" : errorOf(input.final.sql, input.final.result);
  const finalResult = input.final.result;
  return {
    index: input.index,
    questionId: input.questionId,
    dbId: input.dbId,
    ...(input.difficulty !== undefined ? { difficulty: input.difficulty } : {}),
    question: input.question,
    ...(input.evidence ? { evidence: input.evidence } : {}),
    gold: input.goldSql,
    predicted: input.final.sql,
    ...(input.gold.ok ? {} : { goldError: { category: input.gold.error.category, message: input.gold.error.message } }),
    ex: finalEx,
    ...(input.secondDraw && !input.unanswerable ? { exSecondDraw: compareResults(input.secondDraw.gold, input.secondDraw.final, input.goldSql) } : {}),
    voting: winner ? { ...winner.ex } : { ...ALL_FALSE },
    pass1: candidates[0] ? { ...candidates[0].ex } : { ...ALL_FALSE },
    passK: any(candidates.map((c) => c.ex)),
    k: candidates.length,
    error,
    ...(input.decodeError ? { errorMessage: input.decodeError.message } : finalResult && !finalResult.ok ? { errorMessage: finalResult.error.message } : {}),
    ...(truncated ? { truncated: true } : {}),
    ...(input.schema && input.final.sql && input.final.sql.trim() !== "" ? { copy: copyCount(input.final.sql, input.schema) } : {}),
    candidates,
    interactions: input.interactions,
    latencyMs: input.latencyMs,
    tokens: input.tokens,
    ...(input.decodeError ? { decodeError: input.decodeError } : {}),
    ...(input.unanswerable ? { unanswerable: true as const } : {}),
    confidence: input.trust?.confidence ?? null,
    answered: input.trust ? input.trust.answered : error === null,
    ...(input.trust?.doubts?.length ? { doubts: input.trust.doubts } : {}),
    ...(input.trust?.signals ? { signals: input.trust.signals } : {}),
  };
}

/** Latency distribution over items, ms. */
export interface LatencyStats {
  mean: number;
  p50: number;
  p90: number;
  max: number;
}

/** Aggregate metrics over a set of items; shares are 0..1, averages are per item. */
export interface Metrics {
  count: number;
  /** EX of the final SQL, per rule (on the first row draw). */
  ex: RuleRates;
  /** Where items have a second row draw: the share of items right on every draw they have (both, or their one). Absent otherwise. */
  exBothDraws?: RuleRates;
  /** Where items have a second row draw: items right on exactly one of their two draws ÷ items right on the first (null when none is); absent otherwise. */
  spuriousRate?: Record<ExRule, number | null>;
  /** Voting accuracy: the winning candidate is correct. */
  voting: RuleRates;
  pass1: RuleRates;
  passK: RuleRates;
  /** Mean candidates per item (the k of pass@k). */
  meanK: number;
  /** Share of items whose final SQL failed with category `syntax`. */
  syntaxErrorRate: number;
  /** Share of items whose final SQL was present but failed to run (any category). */
  executionErrorRate: number;
  /** Share of items with no final SQL (abstained or the decoder failed). */
  noSqlRate: number;
  /** Items per failure category of the final SQL. */
  errors: Partial<Record<PredictionErrorCategory, number>>;
  /** Items whose gold SQL failed to run. */
  goldErrors: number;
  /** Items whose compared results hit the row cap. */
  truncated: number;
  /** Mean probe rounds of the winning trajectory; null when not measured. */
  avgInteractions: number | null;
  /** Copy rate: share of the final SQL's table and column identifiers that exist in the schema, over all items' identifiers; null when none was counted. */
  copyRate: number | null;
  /** Items whose final SQL was counted for the copy rate. */
  copyItems: number;
  latencyMs: LatencyStats | null;
  generatedTokensPerItem: number | null;
  evaluatedTokensPerItem: number | null;
  /** Prompt tokens the verified examples took, mean over the items shown some; null when none were. */
  exampleTokensPerItem: number | null;
  /** Abstention scored the TrustSQL way, coverage and calibration (see src/eval/trust.ts). */
  trust: TrustMetrics;
}

/** {@link Metrics} overall plus the same per difficulty (empty when no item has one). */
export interface Summary extends Metrics {
  byDifficulty: Record<string, Metrics>;
}

function rate(items: readonly ItemScore[], pick: (i: ItemScore) => RuleScores): RuleRates {
  const n = items.length;
  const share = (rule: ExRule): number => (n === 0 ? 0 : items.filter((i) => pick(i)[rule]).length / n);
  return { bird: share("bird"), spider: share("spider"), refined: share("refined") };
}

/** EX on both row draws and the spurious rate, where some item has a second draw. */
function drawMetrics(items: readonly ItemScore[]): Pick<Metrics, "exBothDraws" | "spuriousRate"> {
  const two = items.filter((i) => i.exSecondDraw);
  if (two.length === 0) return {};
  const spurious = (rule: ExRule): number | null => {
    const first = two.filter((i) => i.ex[rule]).length;
    return first === 0 ? null : two.filter((i) => i.ex[rule] !== i.exSecondDraw![rule]).length / first;
  };
  return {
    exBothDraws: rate(items, (i) => ({
      bird: i.ex.bird && (i.exSecondDraw?.bird ?? true),
      spider: i.ex.spider && (i.exSecondDraw?.spider ?? true),
      refined: i.ex.refined && (i.exSecondDraw?.refined ?? true),
    })),
    spuriousRate: { bird: spurious("bird"), spider: spurious("spider"), refined: spurious("refined") },
  };
}

function mean(values: readonly (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  return known.length === 0 ? null : known.reduce((s, v) => s + v, 0) / known.length;
}

/** Nearest-rank percentile of sorted values (q in 0..1). */
function percentile(sorted: readonly number[], q: number): number {
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1]!;
}

function copyRate(items: readonly ItemScore[]): Pick<Metrics, "copyRate" | "copyItems"> {
  const counted = items.filter((i) => i.copy);
  const total = counted.reduce((s, i) => s + i.copy!.identifiers, 0);
  const inSchema = counted.reduce((s, i) => s + i.copy!.inSchema, 0);
  return { copyRate: total === 0 ? null : inSchema / total, copyItems: counted.length };
}

/** Aggregates item scores into {@link Metrics}; pure. */
export function aggregate(items: readonly ItemScore[]): Metrics {
  const n = items.length;
  const errors: Partial<Record<PredictionErrorCategory, number>> = {};
  for (const item of items) if (item.error) errors[item.error] = (errors[item.error] ?? 0) + 1;
  const execFailures = items.filter((i) => i.error !== null && i.error !== "no_sql" && i.error !== "decode").length;
  const latencies = items
    .map((i) => i.latencyMs)
    .filter((v): v is number => v !== null)
    .sort((a, b) => a - b);
  return {
    count: n,
    ex: rate(items, (i) => i.ex),
    ...drawMetrics(items),
    voting: rate(items, (i) => i.voting),
    pass1: rate(items, (i) => i.pass1),
    passK: rate(items, (i) => i.passK),
    meanK: n === 0 ? 0 : items.reduce((s, i) => s + i.k, 0) / n,
    syntaxErrorRate: n === 0 ? 0 : (errors.syntax ?? 0) / n,
    executionErrorRate: n === 0 ? 0 : execFailures / n,
    noSqlRate: n === 0 ? 0 : ((errors.no_sql ?? 0) + (errors.decode ?? 0)) / n,
    errors,
    goldErrors: items.filter((i) => i.goldError).length,
    truncated: items.filter((i) => i.truncated).length,
    avgInteractions: mean(items.map((i) => i.interactions)),
    ...copyRate(items),
    latencyMs:
      latencies.length === 0
        ? null
        : {
            mean: latencies.reduce((s, v) => s + v, 0) / latencies.length,
            p50: percentile(latencies, 0.5),
            p90: percentile(latencies, 0.9),
            max: latencies[latencies.length - 1]!,
          },
    generatedTokensPerItem: mean(items.map((i) => i.tokens?.generated ?? null)),
    evaluatedTokensPerItem: mean(items.map((i) => i.tokens?.evaluated ?? null)),
    exampleTokensPerItem: mean(items.map((i) => i.tokens?.examples ?? null)),
    trust: trustMetrics(items.map((i) => ({ correct: i.ex.bird, answered: i.answered, unanswerable: i.unanswerable === true, confidence: i.confidence }))),
  };
}

/** Orders difficulty labels: BIRD's three first, then the rest alphabetically. */
export function sortDifficulties(labels: Iterable<string>): string[] {
  const rank = (d: string): number => {
    const i = DIFFICULTY_ORDER.indexOf(d);
    return i === -1 ? DIFFICULTY_ORDER.length : i;
  };
  return [...new Set(labels)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Aggregates overall and per difficulty (items without one go under "unknown" when others have one); pure. */
export function summarize(items: readonly ItemScore[]): Summary {
  const byDifficulty: Record<string, Metrics> = {};
  if (items.some((i) => i.difficulty !== undefined)) {
    const label = (i: ItemScore): string => i.difficulty ?? "unknown";
    for (const d of sortDifficulties(items.map(label))) byDifficulty[d] = aggregate(items.filter((i) => label(i) === d));
  }
  return { ...aggregate(items), byDifficulty };
}

/** Two runs compared question by question on one rule: who got which items, the EX difference and its uncertainty. */
export interface PairedDifference {
  rule: ExRule;
  /** Questions both runs answered. */
  count: number;
  /** Right in the first run only. */
  firstOnly: number;
  /** Right in the second run only. */
  secondOnly: number;
  /** EX(first) − EX(second), 0..1 scale. */
  delta: number;
  /** 95 % interval of `delta` (normal approximation to the paired difference). */
  ci95: [number, number];
  /** Exact two-sided McNemar p-value: the chance of so lopsided a split of the discordant questions if neither run were better. */
  pValue: number;
}

/** log C(n, k), exact enough for the binomial tails below. */
function logChoose(n: number, k: number): number {
  let s = 0;
  for (let i = 1; i <= k; i++) s += Math.log(n - k + i) - Math.log(i);
  return s;
}

/** Exact two-sided binomial test of `k` of `n` against p = ½ (McNemar's exact form). */
function mcnemarExact(k: number, n: number): number {
  if (n === 0) return 1;
  const low = Math.min(k, n - k);
  let tail = 0;
  for (let i = 0; i <= low; i++) tail += Math.exp(logChoose(n, i) - n * Math.LN2);
  return Math.min(1, 2 * tail);
}

/**
 * Compares two runs over the same questions under `rule`; pure. Questions are matched by database and
 * question id, or by dataset position where ids repeat. BAD_REQUEST when the runs did not answer the same
 * questions. Default rule "bird".
 */
export function pairedDifference(first: readonly ItemScore[], second: readonly ItemScore[], rule: ExRule = "bird"): PairedDifference {
  const byId = (i: ItemScore): string => `${i.dbId}\u0000${String(i.questionId)}`;
  const unique = (items: readonly ItemScore[]): boolean => new Set(items.map(byId)).size === items.length;
  const key = unique(first) && unique(second) ? byId : (i: ItemScore): string => String(i.index);
  const other = new Map(second.map((i) => [key(i), i]));
  if (other.size !== second.length || first.length !== second.length || first.some((i) => !other.has(key(i)))) {
    throw new ReexError("BAD_REQUEST", "paired comparison needs two runs over the same questions");
  }
  let firstOnly = 0;
  let secondOnly = 0;
  for (const a of first) {
    const b = other.get(key(a))!;
    if (a.ex[rule] && !b.ex[rule]) firstOnly++;
    else if (!a.ex[rule] && b.ex[rule]) secondOnly++;
  }
  const n = first.length;
  const delta = n === 0 ? 0 : (firstOnly - secondOnly) / n;
  const se = n === 0 ? 0 : Math.sqrt(Math.max(0, (firstOnly + secondOnly) / n - delta * delta) / n);
  return {
    rule,
    count: n,
    firstOnly,
    secondOnly,
    delta,
    ci95: [delta - 1.96 * se, delta + 1.96 * se],
    pValue: mcnemarExact(firstOnly, firstOnly + secondOnly),
  };
}

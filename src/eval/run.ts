/**
 * The evaluation runner: decodes each question with an injected decoder (or takes a file of
 * predictions), executes gold, final and candidate SQL through the executor, scores them with
 * {@link scoreItem} and summarises. {@link selfCheck} proves the comparison sane before any number
 * is produced.
 */
import { ReexError, toReexError, type ErrorCode } from "../errors/index.js";
import { answerStatus, type Answer, type AnswerRequest, type Decode, type RetrievedExample, type Strategy } from "../decoding/index.js";
import { copyRewriteFields, type SchemaNames } from "../agent/index.js";
import { loadSchema, questionKey, rankExamples, relevanceTokens, type ExecResult, type ExecSuccess, type Executor, type SqlValue } from "../sql/index.js";
import type { EvalItem } from "./datasets.js";
import { EX_RULES, compareResults, scoreItem, summarize, type ExRule, type ItemScore, type ScoreInput, type Summary } from "./metrics.js";

/** Default per-query time limit for evaluation executions (SQL-R1's voting limit), ms. */
export const DEFAULT_EVAL_TIMEOUT_MS = 10_000;
/** Default row cap for evaluation executions; results cut by it are flagged `truncated`. */
export const DEFAULT_EVAL_MAX_ROWS = 100_000;

/** Decoder failures that stop the whole run instead of counting as one wrong item. */
const FATAL_CODES: readonly ErrorCode[] = ["CANCELLED", "MODEL_NOT_FOUND", "MODEL_LOAD_FAILED", "EXECUTOR_UNAVAILABLE", "SHUTTING_DOWN"];

/** How evaluation executes SQL. */
export interface EvalExecOptions {
  executor: Executor;
  /** Per-query limit, ms. Default {@link DEFAULT_EVAL_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** Rows kept per result. Default {@link DEFAULT_EVAL_MAX_ROWS}. */
  maxRows?: number;
  /** Gold results by item index, read and filled (share it between runs of one dataset). Default a fresh map. */
  goldResults?: Map<number, ExecResult>;
  /** Items scored at once. Default 1. */
  concurrency?: number;
  /** Called after each item is scored. */
  onProgress?: (progress: EvalProgress) => void;
  /** Aborting stops the run with CANCELLED. */
  signal?: AbortSignal;
}

/** Progress after one item; `correct` and `item` are absent while the self-check runs. */
export interface EvalProgress {
  done: number;
  total: number;
  /** Items so far whose final SQL is correct under the BIRD rule. */
  correct?: number;
  item?: ItemScore;
}

/** How a run was configured, as the record keeps it. */
export interface EvalRunConfig {
  /** Name shown in reports (the strategy, or "predictions"). */
  label: string;
  source: "decode" | "predictions";
  strategy?: Strategy;
  candidates?: number;
  /** The model profile every decode used (see {@link RunEvalOptions.profile}); absent when the run did not say. */
  profile?: string;
  /** The LoRA adapter files the policy applied (see {@link RunEvalOptions.lora}); absent when none. */
  lora?: string[];
  limit?: number;
  concurrency: number;
  timeoutMs: number;
  maxRows: number;
  /** Extra request fields every decode got. */
  request?: Partial<AnswerRequest>;
  /** Verified examples each question's prompt was offered (see {@link RunEvalOptions.examples}); absent when none. */
  examples?: { k: number; source: string };
  startedAt: string;
  wallMs: number;
}

/** One run's record: configuration, per-item details and the summary. */
export interface EvalRun {
  config: EvalRunConfig;
  items: ItemScore[];
  summary: Summary;
}

/** Options of {@link runEval}. */
export interface RunEvalOptions extends EvalExecOptions {
  items: readonly EvalItem[];
  decode: Decode;
  /** Default "greedy". */
  strategy?: Strategy;
  /** Candidates for linear/tree strategies; default the decoder's. */
  candidates?: number;
  /** Evaluate only the first N items; default all. */
  limit?: number;
  /** More request fields (maxInteractions, feedback, seed, …) for every decode. */
  request?: Partial<AnswerRequest>;
  /** The model profile of every decode (the request's `profile`), recorded in the run's config. Default the decoder's. */
  profile?: string;
  /** The LoRA adapters the decoder's policy applies, recorded in the run's config. Default none. */
  lora?: string[];
  /** Default the strategy name. */
  label?: string;
  /** The verified examples each question's prompt is offered, as the server offers a user's (e.g. {@link examplesFromPool}). Default none. */
  examples?: { k: number; source: string; of: (item: EvalItem) => RetrievedExample[] };
}

/**
 * Retrieval from a pool of questions with their SQL (a training split), as the server retrieves a
 * user's verified examples: the `k` most similar questions on the item's own database, never one
 * with the item's own question text (so a pool that overlaps the evaluated set does not leak answers).
 */
export function examplesFromPool(pool: readonly EvalItem[], k: number): (item: EvalItem) => RetrievedExample[] {
  const byDb = new Map<string, EvalItem[]>();
  for (const entry of pool) {
    if (entry.goldSql === "") continue;
    let shelf = byDb.get(entry.dbId);
    if (!shelf) byDb.set(entry.dbId, (shelf = []));
    shelf.push(entry);
  }
  // each pool question is tokenised once, not once per evaluated question
  const tokens = new Map<EvalItem, string[]>();
  const tokensOf = (e: EvalItem): string[] => {
    let t = tokens.get(e);
    if (!t) tokens.set(e, (t = relevanceTokens(e.question)));
    return t;
  };
  return (item) => {
    const own = questionKey(item.question);
    const shelf = (byDb.get(item.dbId) ?? []).filter((e) => questionKey(e.question) !== own);
    return rankExamples(item.question, shelf, k, tokensOf).map((e) => ({
      id: `${e.dbId}#${e.index}`,
      question: e.question,
      sql: e.goldSql,
      ...(e.evidence ? { evidence: e.evidence } : {}),
      score: e.score,
    }));
  };
}

/** Options of {@link scorePredictions}. */
export interface ScorePredictionsOptions extends EvalExecOptions {
  items: readonly EvalItem[];
  /** One SQL (or null) per item, in item order. */
  predictions: readonly (string | null)[];
  /** Default "predictions". */
  label?: string;
}

function execOptions(opts: EvalExecOptions): { timeoutMs: number; maxRows: number; signal?: AbortSignal } {
  return {
    timeoutMs: opts.timeoutMs ?? DEFAULT_EVAL_TIMEOUT_MS,
    maxRows: opts.maxRows ?? DEFAULT_EVAL_MAX_ROWS,
    ...(opts.signal ? { signal: opts.signal } : {}),
  };
}

/** Executes one query for evaluation (on `dbPath`, default the item's); an unavailable executor ends the run instead of scoring items wrong. */
async function execute(item: EvalItem, sql: string, opts: EvalExecOptions, dbPath = item.dbPath): Promise<ExecResult> {
  const result = await opts.executor.execute(dbPath, sql, execOptions(opts));
  if (!result.ok && result.error.code === "EXECUTOR_UNAVAILABLE") throw new ReexError("EXECUTOR_UNAVAILABLE", result.error.message);
  return result;
}

/** What an unanswerable question's gold "runs" to: nothing (it is never compared). */
const NO_GOLD: ExecResult = Object.freeze({ ok: true, columns: [], rows: [], rowCount: 0, truncated: false, empty: true, elapsedMs: 0 });

async function goldOf(item: EvalItem, opts: EvalExecOptions, cache: Map<number, ExecResult>): Promise<ExecResult> {
  if (item.answerable === false) return NO_GOLD;
  const known = cache.get(item.index);
  if (known) return known;
  const result = await execute(item, item.goldSql, opts);
  cache.set(item.index, result);
  return result;
}

/** Gold results on the second row draws, kept beside each first-draw gold cache (so runs sharing one share both). */
const secondGolds = new WeakMap<Map<number, ExecResult>, Map<number, ExecResult>>();

/** The item's gold SQL on its second row draw, cached beside `cache`; undefined without a second draw. */
async function secondGoldOf(item: EvalItem, opts: EvalExecOptions, cache: Map<number, ExecResult>): Promise<ExecResult | undefined> {
  if (!item.dbPath2 || item.answerable === false) return undefined;
  let golds = secondGolds.get(cache);
  if (!golds) secondGolds.set(cache, (golds = new Map()));
  const known = golds.get(item.index);
  if (known) return known;
  const result = await execute(item, item.goldSql, opts, item.dbPath2);
  golds.set(item.index, result);
  return result;
}

/** Gold and final SQL on the item's second row draw, for {@link scoreItem}; nothing without one. */
async function secondDrawOf(
  item: EvalItem,
  sql: string | null,
  opts: EvalExecOptions,
  cache: Map<number, ExecResult>,
): Promise<Pick<ScoreInput, "secondDraw">> {
  const gold = await secondGoldOf(item, opts, cache);
  if (!gold) return {};
  const final = sql === null || sql.trim() === "" ? undefined : await execute(item, sql, opts, item.dbPath2);
  return { secondDraw: { gold, ...(final ? { final } : {}) } };
}

/** Executes SQL once per distinct text within one item. */
function executorFor(item: EvalItem, opts: EvalExecOptions): (sql: string | null) => Promise<ExecResult | undefined> {
  const seen = new Map<string, Promise<ExecResult>>();
  return (sql) => {
    if (sql === null || sql.trim() === "") return Promise.resolve(undefined);
    let p = seen.get(sql);
    if (!p) {
      p = execute(item, sql, opts);
      seen.set(sql, p);
    }
    return p;
  };
}

function checkAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new ReexError("CANCELLED", "evaluation cancelled");
}

/** Runs `work` over the items with at most `concurrency` at once, keeping item order in the output. */
async function mapItems<T>(
  items: readonly EvalItem[],
  opts: Pick<EvalExecOptions, "concurrency" | "signal">,
  work: (item: EvalItem, position: number) => Promise<T>,
  after?: (result: T, done: number) => void,
): Promise<T[]> {
  const concurrency = Math.max(1, Math.floor(opts.concurrency ?? 1));
  const out: T[] = new Array<T>(items.length);
  let next = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      checkAborted(opts.signal);
      const position = next++;
      const result = await work(items[position]!, position);
      out[position] = result;
      done += 1;
      after?.(result, done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}

/** Progress reporting for scored items. */
function reporter(total: number, onProgress: EvalExecOptions["onProgress"]): (item: ItemScore, done: number) => void {
  let correct = 0;
  return (item, done) => {
    if (item.ex.bird) correct += 1;
    onProgress?.({ done, total, correct, item });
  };
}

function limited(items: readonly EvalItem[], limit: number | undefined): readonly EvalItem[] {
  if (limit === undefined) return items;
  if (!Number.isInteger(limit) || limit < 1) throw new ReexError("BAD_REQUEST", `limit must be a positive integer, got ${limit}`);
  return items.slice(0, limit);
}

/**
 * Decodes every item with the injected decoder, executes and scores its answer and candidates,
 * and returns the run record. A decoder error on one item scores it wrong (category "decode");
 * errors that doom every item (model missing, executor gone, cancelled) end the run.
 */
export async function runEval(options: RunEvalOptions): Promise<EvalRun> {
  const startedAt = new Date();
  const t0 = performance.now();
  const strategy = options.strategy ?? "greedy";
  const items = limited(options.items, options.limit);
  const golds = options.goldResults ?? new Map<number, ExecResult>();
  const scored = await mapItems(
    items,
    options,
    async (item) => {
      const gold = await goldOf(item, options, golds);
      const request: AnswerRequest = {
        ...options.request,
        ...(options.profile !== undefined ? { profile: options.profile } : {}),
        dbPath: item.dbPath,
        question: item.question,
        ...(item.evidence ? { evidence: item.evidence } : {}),
        strategy,
        ...(options.candidates !== undefined ? { candidates: options.candidates } : {}),
        ...(options.examples ? { examples: options.examples.of(item) } : {}),
      };
      const started = performance.now();
      let answer: Answer;
      try {
        answer = await options.decode(request, options.signal ? { signal: options.signal } : {});
      } catch (err) {
        const e = toReexError(err);
        if (FATAL_CODES.includes(e.code) || options.signal?.aborted) throw e;
        return scoreItem({
          ...base(item),
          gold,
          final: { sql: null },
          ...(await secondDrawOf(item, null, options, golds)),
          candidates: [],
          winner: null,
          interactions: null,
          latencyMs: performance.now() - started,
          tokens: null,
          decodeError: { code: e.code, message: e.message },
        });
      }
      const latencyMs = performance.now() - started;
      const run = executorFor(item, options);
      const candidates = [...answer.candidates].sort((a, b) => a.index - b.index);
      const results = await Promise.all(candidates.map((c) => run(c.sql)));
      const finalResult = await run(answer.sql);
      const winner = answer.winner === null ? undefined : candidates.find((c) => c.index === answer.winner);
      const confidence = answer.confidence;
      return scoreItem({
        ...base(item),
        gold,
        final: { sql: answer.sql, ...(finalResult ? { result: finalResult } : {}) },
        ...(await secondDrawOf(item, answer.sql, options, golds)),
        candidates: candidates.map((c, i) => ({
          index: c.index,
          path: c.path,
          sql: c.sql,
          ...(results[i] ? { result: results[i] } : {}),
          votes: c.votes,
          group: c.group,
          interactions: c.interactions,
          ...copyRewriteFields(c),
          ...(c.binding ? { binding: c.binding } : {}),
        })),
        winner: answer.winner,
        interactions: (winner ?? candidates[0])?.interactions ?? 0,
        latencyMs,
        tokens: {
          generated: answer.usage.generatedTokens,
          evaluated: answer.usage.evaluatedTokens,
          ...(answer.shown?.examples.length ? { examples: answer.shown.exampleTokens } : {}),
        },
        ...(confidence
          ? {
              trust: {
                confidence: confidence.value,
                answered: answerStatus(answer).answerable,
                doubts: confidence.doubts,
                ...(confidence.signals ? { signals: confidence.signals } : {}),
              },
            }
          : {}),
      });
    },
    reporter(items.length, options.onProgress),
  );
  return {
    config: {
      label: options.label ?? strategy,
      source: "decode",
      strategy,
      ...(options.candidates !== undefined ? { candidates: options.candidates } : {}),
      ...(options.profile !== undefined ? { profile: options.profile } : {}),
      ...(options.lora?.length ? { lora: options.lora } : {}),
      ...(options.limit !== undefined ? { limit: options.limit } : {}),
      concurrency: Math.max(1, Math.floor(options.concurrency ?? 1)),
      ...execOptions({ ...options, signal: undefined }),
      ...(options.request ? { request: options.request } : {}),
      ...(options.examples ? { examples: { k: options.examples.k, source: options.examples.source } } : {}),
      startedAt: startedAt.toISOString(),
      wallMs: performance.now() - t0,
    },
    items: scored,
    summary: summarize(scored),
  };
}

const namesCache = new Map<string, SchemaNames | null>();

/** A database's table and column names for the copy rate; undefined when the file cannot be read. */
function schemaNamesOf(dbPath: string): SchemaNames | undefined {
  let names = namesCache.get(dbPath);
  if (names === undefined) {
    try {
      const schema = loadSchema(dbPath, { examples: 0 });
      names = { tables: schema.tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) };
    } catch {
      names = null;
    }
    if (namesCache.size > 4096) namesCache.clear();
    namesCache.set(dbPath, names);
  }
  return names ?? undefined;
}

function base(
  item: EvalItem,
): Pick<Parameters<typeof scoreItem>[0], "index" | "questionId" | "dbId" | "question" | "evidence" | "difficulty" | "goldSql" | "schema" | "unanswerable"> {
  const schema = schemaNamesOf(item.dbPath);
  return {
    ...(schema ? { schema } : {}),
    index: item.index,
    questionId: item.questionId,
    dbId: item.dbId,
    question: item.question,
    evidence: item.evidence,
    ...(item.difficulty !== undefined ? { difficulty: item.difficulty } : {}),
    goldSql: item.goldSql,
    ...(item.answerable === false ? { unanswerable: true } : {}),
  };
}

/** Scores ready-made predictions (one SQL or null per item, in item order) without any model. */
export async function scorePredictions(options: ScorePredictionsOptions): Promise<EvalRun> {
  if (options.predictions.length !== options.items.length) {
    throw new ReexError("BAD_REQUEST", `${options.predictions.length} predictions for ${options.items.length} questions`);
  }
  const startedAt = new Date();
  const t0 = performance.now();
  const golds = options.goldResults ?? new Map<number, ExecResult>();
  const position = new Map(options.items.map((item, i) => [item, i]));
  const scored = await mapItems(
    options.items,
    options,
    async (item) => {
      const sql = options.predictions[position.get(item)!] ?? null;
      const gold = await goldOf(item, options, golds);
      const result = await executorFor(item, options)(sql);
      return scoreItem({
        ...base(item),
        gold,
        final: { sql, ...(result ? { result } : {}) },
        ...(await secondDrawOf(item, sql, options, golds)),
        candidates: [],
        interactions: null,
        latencyMs: null,
        tokens: null,
      });
    },
    reporter(options.items.length, options.onProgress),
  );
  return {
    config: {
      label: options.label ?? "predictions",
      source: "predictions",
      concurrency: Math.max(1, Math.floor(options.concurrency ?? 1)),
      ...execOptions({ ...options, signal: undefined }),
      startedAt: startedAt.toISOString(),
      wallMs: performance.now() - t0,
    },
    items: scored,
    summary: summarize(scored),
  };
}

/** One reason the self-check failed. */
export interface SelfCheckFailure {
  /** Item index, or null for a built-in canary. */
  index: number | null;
  dbId?: string;
  rule?: ExRule;
  reason: string;
}

/** The self-check's verdict; `goldResults` can be handed to later runs so gold SQL runs once. */
export interface SelfCheckResult {
  ok: boolean;
  checked: number;
  failures: SelfCheckFailure[];
  goldResults: Map<number, ExecResult>;
}

function success(columns: string[], rows: SqlValue[][]): ExecSuccess {
  return { ok: true, columns, rows, rowCount: rows.length, truncated: false, empty: rows.length === 0, elapsedMs: 0 };
}

/** Comparisons whose verdict is known by construction: [name, gold, pred, goldSql, expected per rule]. */
const CANARIES: [string, ExecSuccess, ExecSuccess, string, Record<ExRule, boolean>][] = [
  ["same rows", success(["a"], [[1], [2]]), success(["a"], [[1], [2]]), "SELECT a FROM t", { bird: true, spider: true, refined: true }],
  ["different value", success(["a"], [[1]]), success(["a"], [[2]]), "SELECT a FROM t", { bird: false, spider: false, refined: false }],
  ["extra row", success(["a"], [[1]]), success(["a"], [[1], [3]]), "SELECT a FROM t", { bird: false, spider: false, refined: false }],
  ["empty vs rows", success(["a"], [[1]]), success(["a"], []), "SELECT a FROM t", { bird: false, spider: false, refined: false }],
  ["row order, no ORDER BY", success(["a"], [[1], [2]]), success(["a"], [[2], [1]]), "SELECT a FROM t", { bird: true, spider: true, refined: true }],
  ["row order, ORDER BY", success(["a"], [[1], [2]]), success(["a"], [[2], [1]]), "SELECT a FROM t ORDER BY a", { bird: true, spider: false, refined: true }],
  ["columns permuted", success(["a", "b"], [[1, 2]]), success(["b", "a"], [[2, 1]]), "SELECT a, b FROM t", { bird: false, spider: true, refined: true }],
  ["duplicate rows", success(["a"], [[1], [1]]), success(["a"], [[1]]), "SELECT a FROM t", { bird: true, spider: false, refined: false }],
];

/**
 * Proves the comparison sane on this dataset before any number is reported: built-in canaries
 * must score as constructed, every gold result must score correct against itself under every
 * rule, and gold plus one foreign row must score wrong under every rule. Gold SQL that fails to
 * run is a failure too.
 */
export async function selfCheck(items: readonly EvalItem[], options: EvalExecOptions): Promise<SelfCheckResult> {
  const failures: SelfCheckFailure[] = [];
  for (const [name, gold, pred, goldSql, expected] of CANARIES) {
    const got = compareResults(gold, pred, goldSql);
    for (const rule of EX_RULES) {
      if (got[rule] !== expected[rule]) failures.push({ index: null, rule, reason: `canary "${name}": expected ${expected[rule]}, got ${got[rule]}` });
    }
  }
  const golds = options.goldResults ?? new Map<number, ExecResult>();
  await mapItems(
    items,
    options,
    async (item) => {
      if (item.answerable === false) return;
      const gold = await goldOf(item, options, golds);
      if (!gold.ok) {
        failures.push({ index: item.index, dbId: item.dbId, reason: `gold SQL failed (${gold.error.category}): ${gold.error.message}` });
        return;
      }
      const gold2 = await secondGoldOf(item, options, golds);
      if (gold2 && !gold2.ok)
        failures.push({
          index: item.index,
          dbId: item.dbId,
          reason: `gold SQL failed on the second row draw (${gold2.error.category}): ${gold2.error.message}`,
        });
      const copy = success(
        [...gold.columns],
        gold.rows.map((r) => [...r]),
      );
      const same = compareResults(gold, copy, item.goldSql);
      const foreign = success([...gold.columns], [...copy.rows, gold.columns.map((_, i) => `\u0000reex-self-check-${i}`)]);
      const differs = compareResults(gold, foreign, item.goldSql);
      for (const rule of EX_RULES) {
        if (!same[rule]) failures.push({ index: item.index, dbId: item.dbId, rule, reason: "gold does not match itself" });
        if (differs[rule]) failures.push({ index: item.index, dbId: item.dbId, rule, reason: "gold matches gold plus a foreign row" });
      }
    },
    (_, done) => options.onProgress?.({ done, total: items.length }),
  );
  failures.sort((a, b) => (a.index ?? -1) - (b.index ?? -1));
  return { ok: failures.length === 0, checked: items.length, failures, goldResults: golds };
}

/** Human-readable lines for a failed self-check (first `max`, then a count). Default max 10. */
export function describeSelfCheck(result: SelfCheckResult, max = 10): string[] {
  const lines = result.failures.slice(0, max).map((f) => {
    const where = f.index === null ? "comparison" : `question ${f.index} (${f.dbId})`;
    return `${where}${f.rule ? ` [${f.rule}]` : ""}: ${f.reason}`;
  });
  if (result.failures.length > max) lines.push(`… and ${result.failures.length - max} more`);
  return lines;
}

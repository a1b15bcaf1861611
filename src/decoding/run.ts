/**
 * What every strategy shares within one decode: the policy and prompt, the request control, the
 * rollout settings, and the collector that executes each finished leaf's final SQL and numbers it
 * as a candidate.
 */
import { copyRewriteFields, normalizeSql, type RolloutOptions, type RolloutResult } from "../agent/index.js";
import type { EventSink } from "../events/index.js";
import type { Policy, PromptSpec } from "../policy/index.js";
import type { ExecResult, Executor } from "../sql/index.js";
import { fnv1a32 } from "../util/index.js";
import type { RequestControl } from "./control.js";
import type { Candidate } from "./types.js";
import type { VoteOutcome } from "./vote.js";

/** One finished leaf: its rollout, the execution of its final SQL, and its tree path. */
export interface Leaf {
  path: string;
  rollout: RolloutResult;
  exec: ExecResult | undefined;
}

/** How final SQL is executed for the vote. */
export interface FinalExecOptions {
  timeoutMs: number;
  maxRows?: number;
}

/** Executes final SQL (once per distinct normalised query) and keeps the candidates in finishing order. */
export class LeafCollector {
  readonly leaves: Leaf[] = [];
  private readonly cache = new Map<string, Promise<ExecResult>>();

  constructor(
    private readonly executor: Executor,
    private readonly dbPath: string,
    private readonly options: FinalExecOptions,
    private readonly signal: AbortSignal,
    private readonly emit: EventSink,
  ) {}

  get count(): number {
    return this.leaves.length;
  }

  /** The execution of a rollout's final SQL; undefined when it has none. */
  async execute(rollout: RolloutResult): Promise<ExecResult | undefined> {
    const sql = rollout.finalSql;
    if (sql === null) return undefined;
    const key = normalizeSql(sql);
    let pending = this.cache.get(key);
    if (!pending) {
      pending = this.executor
        .execute(this.dbPath, sql, {
          timeoutMs: this.options.timeoutMs,
          ...(this.options.maxRows !== undefined ? { maxRows: this.options.maxRows } : {}),
          signal: this.signal,
        })
        .catch(
          (err: unknown): ExecResult => ({
            ok: false,
            error: { code: "EXECUTOR_UNAVAILABLE", category: "runtime", message: err instanceof Error ? err.message : String(err) },
            elapsedMs: 0,
          }),
        );
      this.cache.set(key, pending);
    }
    return pending;
  }

  /** Adds a leaf as the next candidate and emits its `candidate` event; returns its index. */
  add(path: string, rollout: RolloutResult, exec: ExecResult | undefined): number {
    const index = this.leaves.length;
    this.leaves.push({ path, rollout, exec });
    const error = leafError(rollout, exec);
    const errorCode = rollout.finalSql !== null ? (exec && !exec.ok ? exec.error.code : undefined) : rollout.error?.code;
    this.emit({
      type: "candidate",
      path,
      index,
      sql: rollout.finalSql,
      ok: error === undefined,
      ...(error !== undefined ? { error } : {}),
      ...(error !== undefined && errorCode !== undefined ? { errorCode } : {}),
      answerable: rollout.answerable,
    });
    return index;
  }
}

/** Why a leaf cannot vote, if it cannot: its SQL failed, it has no SQL, or its rollout failed. */
export function leafError(rollout: RolloutResult, exec: ExecResult | undefined): string | undefined {
  if (rollout.finalSql !== null) return exec && !exec.ok ? `${exec.error.code}: ${exec.error.message}` : undefined;
  if (!rollout.answerable) return undefined;
  if (rollout.error) return `${rollout.error.code}: ${rollout.error.message}`;
  if (rollout.truncated) return "ran out of tokens before a final SQL";
  if (rollout.stopReason === "aborted") return "stopped before a final SQL";
  return "no final SQL";
}

/** A leaf as the answer lists it: its SQL, how the vote grouped it, and what its rollout did. */
export function leafCandidate(l: Leaf, index: number, outcome: VoteOutcome): Candidate {
  const group = outcome.groupOf[index] ?? null;
  const error = leafError(l.rollout, l.exec);
  return {
    index,
    path: l.path,
    sql: l.rollout.finalSql,
    answerable: l.rollout.answerable,
    ...(l.exec ? { result: l.exec } : {}),
    group,
    votes: group === null ? 0 : outcome.groups[group]!.votes,
    ...(error !== undefined ? { error } : {}),
    interactions: l.rollout.interactions,
    ...copyRewriteFields(l.rollout),
    ...(l.rollout.binding ? { binding: l.rollout.binding } : {}),
    meanLogprob: l.rollout.meanLogprob,
    text: l.rollout.text,
  };
}

/** Everything a strategy runs with. */
export interface Run {
  policy: Policy;
  spec: PromptSpec;
  control: RequestControl;
  emit: EventSink;
  /** The rollout settings every trajectory of the decode shares, resolved (path, seed, temperature, topP, signal and sink are set per branch). */
  base: RolloutOptions;
  leaves: LeafCollector;
  /** Sampling temperature of this strategy's trajectories. */
  temperature: number;
  /** Nucleus (top-p) threshold of this strategy's trajectories. */
  topP: number;
  /** The request's seed; each branch samples with a seed derived from it and its path. */
  seed?: number;
}

/** What a strategy reports besides its leaves. */
export interface StrategyOutcome {
  /** Why fewer leaves than requested finished, when the strategy knows better than the generic reason. */
  shortfall?: string;
}

/** Rollout options of one branch: its path, a seed derived from the request's, and the decode's signal and sink. */
export function branchOptions(run: Run, path: string): RolloutOptions {
  return {
    ...run.base,
    path,
    temperature: run.temperature,
    topP: run.topP,
    signal: run.control.signal,
    sink: run.emit,
    ...(run.seed !== undefined ? { seed: pathSeed(run.seed, path) } : {}),
  };
}

/** A 32-bit seed for a branch: FNV-1a over the request seed and the path, so siblings never share a seed. */
export function pathSeed(seed: number, path: string): number {
  return fnv1a32(`${seed}:${path}`);
}

/** The prune reason for a branch that a stop cut off: "budget" for the token budget and the deadline, else "cancelled". */
export function stopPruneReason(run: Run): "cancelled" | "budget" {
  const cause = run.control.cause;
  return cause === "budget" || cause === "deadline" ? "budget" : "cancelled";
}

/** Waits for every promise; rethrows the first rejection after all settled. */
export async function settleAll(tasks: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(tasks);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) throw failed.reason;
}

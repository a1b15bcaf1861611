/**
 * The executor: guarded read-only SQL run off the event loop in a pool of child processes.
 * Child processes, not worker threads, because a thread inside a better-sqlite3 call cannot be
 * stopped (FACTS.md) while a process can always be SIGKILLed. A runaway query is answered
 * SQL_TIMEOUT from the pool's own timer, its child is killed and a fresh one takes its place;
 * the other children keep answering.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { resolve as resolvePath } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { ReexError, type ErrorCode } from "../errors/index.js";
import { ConnectionCache, type RunOutcome } from "./connections.js";
import { sourceFor } from "./source.js";
import type { ExecResult, ExecuteOptions, Executor, SqlErrorCategory, SqlValue } from "./types.js";

/** A failed query's result. */
type ExecFailure = Extract<ExecResult, { ok: false }>;

/** Settings of an {@link ExecutorPool}; the names match the `sql` config section. */
export interface ExecutorPoolOptions {
  /** Child processes running queries in parallel. Default 2. */
  workers?: number;
  /** Per-query time limit when a call gives none, ms. Default 5000. */
  timeoutMs?: number;
  /** Rows returned per query when a call gives no limit. Default 1000. */
  maxRows?: number;
  /** Read-only connections each child keeps open (LRU). Default 8. */
  maxOpenDatabases?: number;
  /** Largest result a child sends back (text + BLOB bytes); bigger ones fail SQL_RUNTIME. Default 32 MiB. */
  maxResultBytes?: number;
  /** How long a child may take to start before it counts as failed, ms. Default 30000. */
  startTimeoutMs?: number;
  /**
   * Memory bound of a child running a query, MiB: a child whose resident set passes it is killed
   * and its query fails SQL_MEMORY_LIMIT (checked every 10 ms while a query runs; Linux only). A
   * quarter of it is SQLite's length limit in the child (the largest string or BLOB). Default 512.
   */
  maxQueryMemoryMB?: number;
}

/** Counters of an {@link ExecutorPool}, for health checks and metrics. */
export interface ExecutorPoolStats {
  workers: number;
  idle: number;
  busy: number;
  queued: number;
  /** Children started since the pool was created (replacements included). */
  spawned: number;
  /** Children killed to stop a query that timed out or was aborted. */
  killed: number;
  /** Children that died on their own (crash, out of memory, …). */
  crashed: number;
  /** Children killed because their query passed the memory bound (also counted in `killed`). */
  memoryKilled: number;
  /** Process ids of the live children. */
  pids: number[];
}

interface Job {
  id: number;
  dbPath: string;
  sql: string;
  maxRows: number;
  timeoutMs: number;
  resolve: (result: ExecResult) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  worker: Worker | null;
  startedAt: number;
  timer: NodeJS.Timeout | undefined;
  watch: NodeJS.Timeout | undefined;
  done: boolean;
}

interface Worker {
  child: ChildProcess;
  ready: boolean;
  dead: boolean;
  job: Job | null;
  startTimer: NodeJS.Timeout | undefined;
  exited: Promise<void>;
  readyWaiters: ((ok: boolean) => void)[];
}

type QueryReply =
  | [id: number, ok: 1, columns: string[], rows: SqlValue[][], truncated: boolean, elapsedMs: number]
  | [id: number, ok: 0, code: ErrorCode, category: SqlErrorCategory, message: string, elapsedMs: number];
type Reply = [ready: 0] | QueryReply;

const MAX_TIMER_MS = 2_147_483_647;
/** Linux's page size on the platforms reex runs on (x86-64, arm64 with 4 KiB pages). */
const PAGE_BYTES = 4096;

let childEntry: { modulePath: string; execArgv: string[] } | undefined;

/** The child script: compiled .js next to this module (dist/), else the .ts source run through tsx. */
function resolveChildEntry(): { modulePath: string; execArgv: string[] } {
  if (childEntry) return childEntry;
  const js = fileURLToPath(new URL("./executor-child.js", import.meta.url));
  if (existsSync(js)) {
    childEntry = { modulePath: js, execArgv: [] };
  } else {
    const tsx = createRequire(import.meta.url).resolve("tsx");
    childEntry = {
      modulePath: fileURLToPath(new URL("./executor-child.ts", import.meta.url)),
      execArgv: ["--import", pathToFileURL(tsx).href],
    };
  }
  return childEntry;
}

function failure(code: ErrorCode, category: SqlErrorCategory, message: string, elapsedMs: number): ExecFailure {
  return { ok: false, error: { code, category, message }, elapsedMs: Math.round(elapsedMs * 1000) / 1000 };
}

/**
 * A pool of executor child processes implementing {@link Executor}. Children start on first use
 * (or {@link ExecutorPool.ready}); requests queue until a child is idle. `execute` never rejects
 * for bad SQL: every outcome is an {@link ExecResult}.
 */
export class ExecutorPool implements Executor {
  private readonly size: number;
  private readonly timeoutMs: number;
  private readonly maxRows: number;
  private readonly maxOpenDatabases: number;
  private readonly maxResultBytes: number;
  private readonly maxChildRssBytes: number;
  private readonly startTimeoutMs: number;
  private readonly workers: Worker[] = [];
  private readonly idle: Worker[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private startFailures = 0;
  private gaveUp = false;
  private counters = { spawned: 0, killed: 0, crashed: 0, memoryKilled: 0 };

  constructor(options: ExecutorPoolOptions = {}) {
    this.size = options.workers ?? 2;
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.maxRows = options.maxRows ?? 1000;
    this.maxOpenDatabases = options.maxOpenDatabases ?? 8;
    this.maxResultBytes = options.maxResultBytes ?? 32 * 1024 * 1024;
    this.maxChildRssBytes = (options.maxQueryMemoryMB ?? 512) * 1024 * 1024;
    this.startTimeoutMs = options.startTimeoutMs ?? 30_000;
    if (!Number.isInteger(this.size) || this.size < 1) throw new ReexError("BAD_REQUEST", "executor workers must be a positive integer");
    checkLimits(this.timeoutMs, this.maxRows);
  }

  /**
   * Runs one guarded query on the first idle child; see {@link ExecuteOptions} for limits and abort.
   * The time limit counts from dispatch to a child, not from the call. Rejects only for invalid limits (BAD_REQUEST).
   */
  execute(dbPath: string, sql: string, options: ExecuteOptions = {}): Promise<ExecResult> {
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const maxRows = options.maxRows ?? this.maxRows;
    try {
      checkLimits(timeoutMs, maxRows);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.closed) return Promise.resolve(closedFailure());
    const source = sourceFor(dbPath);
    if (source) return source.execute(sql, { ...options, timeoutMs, maxRows });
    if (options.signal?.aborted) return Promise.resolve(failure("SQL_TIMEOUT", "timeout", "the query was cancelled before it started", 0));
    return new Promise<ExecResult>((resolve) => {
      const job: Job = {
        id: this.nextId++,
        dbPath: resolvePath(dbPath),
        sql,
        maxRows,
        timeoutMs: Math.min(timeoutMs, MAX_TIMER_MS),
        resolve,
        signal: options.signal,
        onAbort: undefined,
        worker: null,
        startedAt: 0,
        timer: undefined,
        watch: undefined,
        done: false,
      };
      if (job.signal) {
        job.onAbort = () => this.abort(job);
        job.signal.addEventListener("abort", job.onAbort, { once: true });
      }
      this.queue.push(job);
      if (this.gaveUp) {
        this.gaveUp = false;
        this.startFailures = 0;
      }
      this.fill();
      this.pump();
    });
  }

  /** Starts the children now and resolves once all are ready; rejects EXECUTOR_UNAVAILABLE if one cannot start. */
  async ready(): Promise<void> {
    if (this.closed) throw new ReexError("EXECUTOR_UNAVAILABLE", "the executor pool is closed");
    this.gaveUp = false;
    this.startFailures = 0;
    this.fill();
    const results = await Promise.all(this.workers.map((w) => (w.ready ? true : new Promise<boolean>((res) => w.readyWaiters.push(res)))));
    if (results.includes(false)) throw new ReexError("EXECUTOR_UNAVAILABLE", "an executor process failed to start (see the server log)");
  }

  /** Current counters (workers, idle, busy, queued, spawned, killed, crashed) and child pids. */
  stats(): ExecutorPoolStats {
    const busy = this.workers.filter((w) => w.job).length;
    const pids = this.workers.flatMap((w) => (w.child.pid === undefined ? [] : [w.child.pid]));
    return { workers: this.workers.length, idle: this.idle.length, busy, queued: this.queue.length, ...this.counters, pids };
  }

  /** Kills every child and answers all pending work with EXECUTOR_UNAVAILABLE; later calls get the same. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const job of this.queue.splice(0)) this.finish(job, closedFailure());
    const exits: Promise<void>[] = [];
    for (const w of [...this.workers]) {
      if (w.job) this.finish(w.job, closedFailure());
      exits.push(w.exited);
      this.retire(w);
    }
    await Promise.all(exits);
  }

  private fill(): void {
    while (!this.closed && !this.gaveUp && this.workers.length < this.size) this.spawn();
  }

  private spawn(): void {
    const entry = resolveChildEntry();
    const child = fork(entry.modulePath, [String(this.maxOpenDatabases), String(this.maxResultBytes), String(Math.floor(this.maxChildRssBytes / 4))], {
      execArgv: entry.execArgv,
      serialization: "advanced",
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.counters.spawned++;
    let onExit!: () => void;
    const w: Worker = {
      child,
      ready: false,
      dead: false,
      job: null,
      startTimer: undefined,
      exited: new Promise<void>((res) => (onExit = res)),
      readyWaiters: [],
    };
    w.startTimer = setTimeout(() => this.lost(w, "did not start in time"), this.startTimeoutMs);
    child.on("message", (m: Reply) => this.onReply(w, m));
    child.on("exit", (code, signal) => {
      onExit();
      this.lost(w, signal ? `signal ${signal}` : `exit code ${code}`);
    });
    child.on("error", (err) => {
      if (child.pid === undefined) onExit();
      this.lost(w, err.message);
    });
    this.workers.push(w);
  }

  private onReply(w: Worker, reply: Reply): void {
    if (w.dead) return;
    if (reply.length === 1) {
      w.ready = true;
      clearTimeout(w.startTimer);
      this.startFailures = 0;
      for (const waiter of w.readyWaiters.splice(0)) waiter(true);
      this.setIdle(w);
      return;
    }
    const m = reply;
    const job = w.job;
    if (!job || job.id !== m[0]) return;
    w.job = null;
    if (m[1] === 1) {
      const rows = m[3];
      this.finish(job, { ok: true, columns: m[2], rows, rowCount: rows.length, truncated: m[4], empty: rows.length === 0, elapsedMs: m[5] });
    } else {
      this.finish(job, { ok: false, error: { code: m[2], category: m[3], message: m[4] }, elapsedMs: m[5] });
    }
    this.setIdle(w);
  }

  private setIdle(w: Worker): void {
    this.idle.push(w);
    w.child.unref();
    w.child.channel?.unref();
    this.pump();
  }

  private pump(): void {
    while (this.queue.length > 0 && this.idle.length > 0) {
      const w = this.idle.pop()!;
      const job = this.queue.shift()!;
      w.job = job;
      job.worker = w;
      w.child.ref();
      w.child.channel?.ref();
      job.startedAt = performance.now();
      job.timer = setTimeout(() => this.timeout(job), job.timeoutMs);
      this.watchMemory(job, w);
      w.child.send([job.id, job.dbPath, job.sql, job.maxRows]);
    }
  }

  private finish(job: Job, result: ExecResult): void {
    if (job.done) return;
    job.done = true;
    clearTimeout(job.timer);
    clearInterval(job.watch);
    if (job.onAbort) job.signal?.removeEventListener("abort", job.onAbort);
    job.resolve(result);
  }

  private timeout(job: Job): void {
    const elapsed = performance.now() - job.startedAt;
    this.finish(job, failure("SQL_TIMEOUT", "timeout", `the query ran past its ${job.timeoutMs} ms time limit and was stopped`, elapsed));
    this.kill(job);
  }

  /** Polls the child's resident set while `job` runs and stops it past the memory bound. */
  private watchMemory(job: Job, w: Worker): void {
    const pid = w.child.pid;
    if (pid === undefined || process.platform !== "linux") return;
    const statm = `/proc/${pid}/statm`;
    job.watch = setInterval(() => {
      let rss: number;
      try {
        rss = Number(readFileSync(statm, "latin1").split(" ")[1]) * PAGE_BYTES;
      } catch {
        return;
      }
      if (rss <= this.maxChildRssBytes) return;
      const mib = Math.round(this.maxChildRssBytes / 1024 / 1024);
      this.finish(
        job,
        failure(
          "SQL_MEMORY_LIMIT",
          "runtime",
          `the query needed more than ${mib} MiB of memory and was stopped; select fewer or smaller values, or aggregate`,
          performance.now() - job.startedAt,
        ),
      );
      this.counters.memoryKilled++;
      this.kill(job);
    }, 10);
  }

  private abort(job: Job): void {
    if (job.done) return;
    const queued = this.queue.indexOf(job);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      this.finish(job, failure("SQL_TIMEOUT", "timeout", "the query was cancelled before it started", 0));
      return;
    }
    this.finish(job, failure("SQL_TIMEOUT", "timeout", "the query was cancelled and stopped", performance.now() - job.startedAt));
    this.kill(job);
  }

  /** Stops the child running `job` and starts a replacement. */
  private kill(job: Job): void {
    const w = job.worker;
    if (!w || w.dead || w.job !== job) return;
    this.counters.killed++;
    this.retire(w);
    this.fill();
  }

  /** Removes a child from the pool and SIGKILLs it; its exit is then ignored. */
  private retire(w: Worker): void {
    if (w.dead) return;
    w.dead = true;
    clearTimeout(w.startTimer);
    this.workers.splice(this.workers.indexOf(w), 1);
    const i = this.idle.indexOf(w);
    if (i >= 0) this.idle.splice(i, 1);
    for (const waiter of w.readyWaiters.splice(0)) waiter(false);
    w.child.ref();
    w.child.kill("SIGKILL");
  }

  /** A child died or failed to start without being asked to. */
  private lost(w: Worker, why: string): void {
    if (w.dead) return;
    const wasReady = w.ready;
    const job = w.job;
    this.retire(w);
    if (this.closed) return;
    if (job) {
      this.counters.crashed++;
      this.finish(job, failure("SQL_RUNTIME", "runtime", `the executor process crashed while running this query (${why})`, performance.now() - job.startedAt));
    } else if (wasReady) {
      this.counters.crashed++;
    } else if (++this.startFailures >= 3) {
      this.gaveUp = true;
      const message = `could not start an executor process (${why}); see the server log`;
      for (const queued of this.queue.splice(0)) this.finish(queued, failure("EXECUTOR_UNAVAILABLE", "runtime", message, 0));
      return;
    }
    this.fill();
  }
}

function checkLimits(timeoutMs: number, maxRows: number): void {
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new ReexError("BAD_REQUEST", `timeoutMs must be a positive number, got ${timeoutMs}`);
  if (!Number.isInteger(maxRows) || maxRows < 0) throw new ReexError("BAD_REQUEST", `maxRows must be a non-negative integer, got ${maxRows}`);
}

function closedFailure(): ExecFailure {
  return failure("EXECUTOR_UNAVAILABLE", "runtime", "the executor pool is closed", 0);
}

function toExecResult(out: RunOutcome): ExecResult {
  if (!out.ok) return { ok: false, error: out.error, elapsedMs: out.elapsedMs };
  return {
    ok: true,
    columns: out.columns,
    rows: out.rows,
    rowCount: out.rows.length,
    truncated: out.truncated,
    empty: out.rows.length === 0,
    elapsedMs: out.elapsedMs,
  };
}

const direct = new ConnectionCache();

/**
 * Runs one guarded query in this thread, synchronously: same guard, row cap and result shape as
 * the pool but no timeout, so only for trusted or cheap queries (and the bench baseline).
 * `maxRows` defaults to 1000.
 */
export function executeDirect(dbPath: string, sql: string, options: { maxRows?: number } = {}): ExecResult {
  const maxRows = options.maxRows ?? 1000;
  checkLimits(1, maxRows);
  return toExecResult(direct.run(resolvePath(dbPath), sql, maxRows));
}

/** Closes the connections {@link executeDirect} keeps open (they reopen on the next call). */
export function closeDirectConnections(): void {
  direct.close();
}

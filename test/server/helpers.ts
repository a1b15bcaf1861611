/** Shared fixtures of the server tests: a real registry in a temp folder, SQLite files, a scripted decoder. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import Database from "better-sqlite3";
import type { FastifyInstance } from "fastify";
import { parseConfig, type Config } from "../../src/config/index.js";
import { type ConfigInput } from "../../src/config/testing.js";
import type { Answer, AnswerRequest, DecodeContext } from "../../src/decoding/types.js";
import type { ReexEvent } from "../../src/events/index.js";
import type { Policy, PolicyInfo } from "../../src/policy/types.js";
import { buildApp, type ServerDeps } from "../../src/server/index.js";
import { DatabaseRegistry } from "../../src/sql/index.js";
import type { ExecSuccess } from "../../src/sql/types.js";

/** Writes a small "concert_singer"-style SQLite file and returns its path. */
export function makeSqlite(dir: string, name = "singers.sqlite"): string {
  const path = join(dir, name);
  const db = new Database(path);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, age INTEGER);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, singer_id INTEGER REFERENCES singer(singer_id), year INTEGER);
    INSERT INTO singer VALUES (1,'Joe Sharp','Netherlands',52),(2,'Timbaland','United States',32),(3,'Justin Brown','France',29),(4,'Rose White','France',41);
    INSERT INTO concert VALUES (1,'Auditions',1,2014),(2,'Super bootcamp',2,2014),(3,'Home Visits',4,2015);
  `);
  db.close();
  return path;
}

/** The bytes of a fresh SQLite file. */
export function sqliteBytes(dir: string, name = "upload.sqlite"): Buffer {
  return readFileSync(makeSqlite(dir, name));
}

/** A decode that the test controls: emits a small tree of events with pauses and honours the abort signal. */
export class ScriptedDecoder {
  calls: AnswerRequest[] = [];
  signals: AbortSignal[] = [];
  /** Trajectories the fake holds right now (a stand-in for policy.liveTrajectories()). */
  live = 0;
  started = 0;
  finished = 0;

  constructor(
    public stepMs = 5,
    public steps = 3,
  ) {}

  readonly decode = async (req: AnswerRequest, ctx: DecodeContext): Promise<Answer> => {
    this.calls.push(req);
    if (ctx.signal) this.signals.push(ctx.signal);
    this.started++;
    const emit = (e: ReexEvent): void => ctx.sink?.(e);
    const t0 = performance.now();
    this.live += 2;
    try {
      emit({ type: "branch", path: "0", parent: null, depth: 0 });
      for (let i = 0; i < this.steps; i++) {
        await sleep(this.stepMs, ctx.signal);
        emit({ type: "token", path: "0", text: `think ${i} ` });
      }
      emit({ type: "probe", path: "0", step: 1, sql: "SELECT count(*) FROM singer" });
      const probe: ExecSuccess = { ok: true, columns: ["count(*)"], rows: [[4n]], rowCount: 1, truncated: false, empty: false, elapsedMs: 0.4 };
      emit({ type: "result", path: "0", step: 1, result: probe, feedback: "count(*)\n4" });
      emit({ type: "branch", path: "0.0", parent: "0", depth: 1 });
      emit({ type: "branch", path: "0.1", parent: "0", depth: 1 });
      await sleep(this.stepMs, ctx.signal);
      emit({ type: "token", path: "0.0", text: "<answer>SELECT name FROM singer WHERE age > 30</answer>" });
      emit({ type: "token", path: "0.1", text: "<probe>SELECT nme FROM singer</probe>" });
      emit({ type: "prune", path: "0.1", reason: "probe_error" });
      emit({ type: "candidate", path: "0.0", index: 0, sql: "SELECT name FROM singer WHERE age > 30", ok: true, answerable: true });
      emit({ type: "vote", winner: 0, groups: [{ group: 0, votes: 1, members: [0] }], rule: "majority", decidedBy: "majority" });
      emit({ type: "final", sql: "SELECT name FROM singer WHERE age > 30", answerable: true });
      const result: ExecSuccess = {
        ok: true,
        columns: ["name", "blob", "big"],
        rows: [
          ["Joe Sharp", new Uint8Array([1, 2, 3]), 9007199254740993n],
          ["Timbaland", null, 7n],
        ],
        rowCount: 2,
        truncated: false,
        empty: false,
        elapsedMs: 0.3,
      };
      this.finished++;
      return {
        sql: "SELECT name FROM singer WHERE age > 30",
        answerable: true,
        result,
        candidates: [
          {
            index: 0,
            path: "0.0",
            sql: "SELECT name FROM singer WHERE age > 30",
            answerable: true,
            result,
            group: 0,
            votes: 1,
            interactions: 1,
            meanLogprob: -0.2,
            text: "",
          },
          {
            index: 1,
            path: "0.1",
            sql: null,
            answerable: true,
            group: null,
            votes: 0,
            error: "SQL_NO_SUCH_COLUMN: no such column: nme",
            interactions: 1,
            meanLogprob: -1.1,
            text: "",
          },
        ],
        winner: 0,
        decidedBy: "majority",
        usage: { promptTokens: 120, evaluatedTokens: 150, generatedTokens: 30 },
        timings: { totalMs: performance.now() - t0, firstTokenMs: 1 },
      };
    } finally {
      this.live -= 2;
    }
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A policy stand-in for /readyz and the live-sequences gauge; tests may replace its `info`. */
export function fakePolicy(live: () => number = () => 0): Omit<Policy, "info"> & { info: PolicyInfo; closed: boolean } {
  const info: PolicyInfo = { backend: "scripted", model: "scripted-test", device: "cpu", contextSize: 2048, maxSequences: 8 };
  const p = {
    info,
    closed: false,
    liveTrajectories: live,
    renderChat: () => ({ prefix: "", suffix: "" }),
    start: () => Promise.reject(new Error("not used")),
    tokenize: () => [],
    detokenize: () => "",
    close: async () => {
      p.closed = true;
    },
  };
  return p;
}

/** Lines a logger wrote, for assertions about what is (not) logged. */
export class LogCapture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    this.lines.push(...chunk.toString().split("\n").filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join("\n");
  }
}

/** A test app with a real registry in a temp folder and a scripted decoder. */
export interface TestApp {
  app: FastifyInstance;
  config: Config;
  registry: DatabaseRegistry;
  decoder: ScriptedDecoder;
  policy: ReturnType<typeof fakePolicy>;
  dir: string;
  logs: LogCapture;
  /** A registered path database (shared). */
  dbId: string;
  cleanup(): Promise<void>;
}

/** Builds a test app; `server` overrides config.server, `deps` overrides the dependencies. */
export async function makeApp(
  options: {
    server?: NonNullable<ConfigInput["server"]>;
    decoding?: NonNullable<ConfigInput["decoding"]>;
    agent?: NonNullable<ConfigInput["agent"]>;
    deps?: Partial<ServerDeps>;
    decoder?: ScriptedDecoder;
  } = {},
): Promise<TestApp> {
  const dir = mkdtempSync(join(tmpdir(), "reex-server-"));
  const config = parseConfig({
    server: { logLevel: "info", port: 0, ...options.server },
    sql: { dataDir: join(dir, "data") },
    ...(options.decoding ? { decoding: options.decoding } : {}),
    ...(options.agent ? { agent: options.agent } : {}),
  });
  const registry = new DatabaseRegistry({
    dataDir: config.sql.dataDir,
    uploadQuotaPerOwner: config.server.uploadQuotaBytesPerKey,
    uploadQuotaTotal: config.server.uploadQuotaBytes,
  });
  const entry = await registry.registerPath(makeSqlite(dir, "shared.sqlite"), { name: "shared" });
  const decoder = options.decoder ?? new ScriptedDecoder();
  const policy = fakePolicy(() => decoder.live);
  const logs = new LogCapture();
  const app = buildApp({
    config,
    registry,
    decode: decoder.decode,
    policy,
    logStream: logs,
    shutdownGraceMs: 2_000,
    ...options.deps,
  });
  return {
    app,
    config,
    registry,
    decoder,
    policy,
    dir,
    logs,
    dbId: entry.id,
    cleanup: async () => {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until `check` is true (polling every 10 ms) or throws after `timeoutMs`. */
export async function until(check: () => boolean, timeoutMs = 5_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Listens on 127.0.0.1 port 0 and returns the base URL. */
export async function listen(app: FastifyInstance): Promise<{ url: string; port: number }> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  if (!address || typeof address === "string") throw new Error("no address");
  return { url: `http://127.0.0.1:${address.port}`, port: address.port };
}

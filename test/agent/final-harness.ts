/** A fake-policy rollout over a real SQLite file, for the tests of what happens to a final SQL that fails (retries, repair). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll } from "vitest";
import { buildPrompt, runRollout, type RolloutOptions, OWN_ANSWERS, resolveRolloutOptions } from "../../src/agent/index.js";
import type { ReexEvent } from "../../src/events/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { CountingExecutor } from "../helpers/executor.js";
import { FakePolicy, type Responder } from "./fake-policy.js";

/** Singers and their concerts (two at the 'Arena', one at the 'Club'): the database and prompt the final-SQL repair tests share. */
export const CONCERTS = {
  setupSql:
    "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT);" +
    "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INTEGER, venue TEXT);" +
    "INSERT INTO singer VALUES (1, 'Ann', 'France'); INSERT INTO concert VALUES (1, 1, 'Arena'), (2, 1, 'Arena'), (3, 1, 'Club')",
  prompt: { schema: "singer(singer_id, name, country)\nconcert(concert_id, singer_id, venue)", question: "How many concerts were at the Arena?" },
};

/** Registers the suite's database (built by `setupSql`) and executor pool; `run` rolls one response out against them. */
export function finalSqlHarness(setupSql: string, prompt: { schema: string; question: string }) {
  let dir: string;
  let pool: ExecutorPool;
  const files = { dbPath: "" };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "reex-final-sql-"));
    files.dbPath = join(dir, "db.sqlite");
    const db = new Database(files.dbPath);
    db.exec(setupSql);
    db.close();
    pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  });
  afterAll(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });
  async function run(responder: Responder, options: Partial<RolloutOptions> = {}) {
    const policy = new FakePolicy(responder);
    const executor = new CountingExecutor(pool);
    const events: ReexEvent[] = [];
    const built = buildPrompt({ family: "execution-aware", ...prompt });
    const result = await runRollout(
      policy,
      built,
      resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath: files.dbPath, sink: (e) => events.push(e), ...options }),
    );
    return { result, events, executor, policy };
  }
  return { files, run };
}

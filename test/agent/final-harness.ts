/** A fake-policy rollout over a real SQLite file, for the tests of what happens to a final SQL that fails (retries, repair). */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll } from "vitest";
import { buildPrompt, runRollout, type RolloutOptions } from "../../src/agent/index.js";
import type { ReexEvent } from "../../src/events/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { CountingExecutor } from "../helpers/executor.js";
import { FakePolicy, type Responder } from "./fake-policy.js";

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
    const result = await runRollout(policy, built, { executor, dbPath: files.dbPath, sink: (e) => events.push(e), ...options });
    return { result, events, executor, policy };
  }
  return { files, run };
}

/** The trainer's held-out evaluation decodes as the rollouts do: no server rewrite mends the policy's final SQL. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDecoder } from "../../src/decoding/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { parseTrainConfig } from "../../src/training/index.js";
import { heldoutDecoder } from "../../src/training/testing.js";

// `tt` has no column `a`; `t` has: the table repair (on at the server's defaults) would rebind it
const BAD = "SELECT COUNT(*) FROM tt WHERE a = 1";

let dir: string;
let dbPath: string;
let executor: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-heldout-decoder-"));
  dbPath = join(dir, "db.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER); CREATE TABLE tt (id INTEGER PRIMARY KEY, b TEXT); INSERT INTO t (a) VALUES (1), (1)");
  db.close();
  executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await executor.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the trainer's held-out decoder", () => {
  const answerBad = (): ScriptedPolicy => new ScriptedPolicy(() => `<think>count</think><final_sql>${BAD}</final_sql>`);

  it("keeps the policy's failing final SQL where the server's defaults would rewrite it", async () => {
    const served = createDecoder({ policy: answerBad(), executor, indexDir: join(dir, "indexes") });
    const atDefaults = await served({ dbPath, question: "how many?", strategy: "greedy" });
    served.close();
    expect(atDefaults.sql).toBe("SELECT COUNT(*) FROM t WHERE a = 1");

    const config = parseTrainConfig({ model: dbPath, runDir: join(dir, "run"), data: { dataset: dbPath, dbRoot: dir } }, "grpo", dir);
    const heldout = heldoutDecoder(config, { policy: answerBad(), executor, indexDir: join(dir, "indexes"), profile: "reex", family: "execution-aware" });
    const answer = await heldout({ dbPath, question: "how many?", strategy: "greedy" });
    heldout.close();
    expect(answer.sql).toBe(BAD);
    expect(answer.result).toMatchObject({ ok: false });
    expect(answer.candidates[0]!.repairs).toBeUndefined();
  });
});

/** The decoder's `repairTables` (config `agent.repairTables`, default true): a final SQL that fails on a column its table lacks is rebound to the table that has it. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_DECODER_DEFAULTS } from "../../src/decoding/index.js";
import { byState, eventLog, final, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

// the executor is scripted (unknown SQL fails with "no such column"); the schema is read from a real file
const BAD = "SELECT COUNT(*) FROM tt WHERE a = 1";
const REPAIRED = "SELECT COUNT(*) FROM t WHERE a = 1";
const ANSWERS = { [REPAIRED]: rows([7]), "SELECT 2": rows([2]) };
const answersBad = byState((text) => (probesIn(text) === 0 ? final(BAD) : final("SELECT 2")));

let dir: string;
let dbPath: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-final-repair-"));
  dbPath = join(dir, "db.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER); CREATE TABLE tt (id INTEGER PRIMARY KEY, b TEXT)");
  db.close();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("decoder: a failing final SQL rebound to the table that holds its columns", () => {
  it("is on by default, before the retry: greedy answers with the repaired SQL and streams a repair event", async () => {
    expect(DEFAULT_DECODER_DEFAULTS.repairTables).toBe(true);
    const s = scripted(answersBad, ANSWERS);
    const log = eventLog();
    const answer = await s.decode({ dbPath, question: "how many?", strategy: "greedy" }, { sink: log.sink });
    expect(answer.sql).toBe(REPAIRED);
    expect(answer.result).toMatchObject({ ok: true, rows: [[7]] });
    expect(log.of("repair")).toEqual([{ type: "repair", path: expect.any(String), sql: BAD, repaired: REPAIRED, swaps: [{ from: "tt", to: "t" }] }]);
    expect(log.of("probe")).toEqual([]);
    expect(answer.candidates[0]!.repairs).toEqual([{ from: "tt", to: "t" }]);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("repairs under tree-prune, so the branch is kept instead of pruned", async () => {
    const s = scripted(answersBad, ANSWERS);
    const log = eventLog();
    const answer = await s.decode(
      { dbPath, question: "how many?", strategy: "tree-prune", candidates: 2, branching: 2, maxTotalTokens: 2000 },
      { sink: log.sink },
    );
    expect(answer.sql).toBe(REPAIRED);
    expect(log.of("prune").filter((e) => e.reason === "sql_error")).toEqual([]);
    expect(log.of("repair").length).toBeGreaterThan(0);
  });

  it("leaves the failing SQL to the retry with repairTables false", async () => {
    const s = scripted(answersBad, ANSWERS, { deps: { defaults: { repairTables: false } } });
    const log = eventLog();
    const answer = await s.decode({ dbPath, question: "how many?", strategy: "greedy" }, { sink: log.sink });
    expect(log.of("repair")).toEqual([]);
    expect(answer.candidates[0]!.repairs).toBeUndefined();
    expect(log.of("probe").map((e) => e.sql)).toEqual([BAD]);
    expect(answer.sql).toBe("SELECT 2");
  });
});

/**
 * The decoder's `repairLiterals` (config `agent.repairLiterals`, default true): a final SQL whose
 * string no row holds is rewritten to the value the question names for that column, read from the
 * prompt's matched values. Real SQLite file, real value index, real executor; scripted model.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_DECODER_DEFAULTS, createDecoder } from "../../src/decoding/index.js";
import { type DecoderDeps } from "../../src/decoding/testing.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { eventLog, final } from "./helpers.js";

const WRONG = "SELECT position FROM players WHERE player = 'the player'";
const NAMED = "SELECT position FROM players WHERE player = 'John Charles'";
const question = "What is the position of john charles?";

let dir: string;
let dbPath: string;
let pool: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-final-literals-"));
  dbPath = join(dir, "players.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE players (player TEXT, position TEXT, nationality TEXT)");
  const add = db.prepare("INSERT INTO players VALUES (?, ?, ?)");
  add.run("John Charles", "Guard", "Wales");
  for (let i = 0; i < 40; i++) add.run(`Player ${i}`, ["Guard", "Forward", "Center"][i % 3], "Wales");
  db.close();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

function decoder(deps: Partial<DecoderDeps> = {}) {
  const policy = new ScriptedPolicy(() => final(WRONG));
  return { policy, decode: createDecoder({ policy, executor: pool, promptOptions: { indexDir: join(dir, "indexes") }, ...deps }) };
}

describe("decoder: a final SQL's string fitted to the value the question names", () => {
  it("is on by default: greedy answers with the named value and says what it rewrote", async () => {
    expect(DEFAULT_DECODER_DEFAULTS.repairLiterals).toBe(true);
    const before = readFileSync(dbPath);
    const { decode, policy } = decoder();
    const log = eventLog();
    const answer = await decode({ dbPath, question, strategy: "greedy" }, { sink: log.sink });
    expect(answer.sql).toBe(NAMED);
    expect(answer.result).toMatchObject({ ok: true, rows: [["Guard"]] });
    const fix = { column: "players.player", from: "player = 'the player'", to: "player = 'John Charles'", rule: "named" };
    expect(answer.candidates[0]!.literals).toEqual([fix]);
    expect(log.of("repair")).toEqual([{ type: "repair", path: expect.any(String), sql: WRONG, repaired: NAMED, swaps: [], literals: [fix] }]);
    expect(policy.liveTrajectories()).toBe(0);
    expect(readFileSync(dbPath).equals(before)).toBe(true);
  });

  it("keeps the model's SQL with repairLiterals false, and when the question names no value of the column", async () => {
    const off = await decoder({ defaults: { repairLiterals: false } }).decode({ dbPath, question, strategy: "greedy" });
    expect(off.sql).toBe(WRONG);
    expect(off.candidates[0]!.literals).toBeUndefined();
    const unnamed = await decoder().decode({ dbPath, question: "What is the position of the player?", strategy: "greedy" });
    expect(unnamed.sql).toBe(WRONG);
  });
});

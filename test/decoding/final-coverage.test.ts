/**
 * The decoder's `repairCoverage` (config `agent.repairCoverage`, default true): a final SQL that
 * leaves out what the question names gets it: the value the prompt's matched values name exactly
 * ("Australia" for `'AU'`), the year the question names. Real SQLite file, real value index, real
 * executor; scripted model.
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

const DROPPED = "SELECT COUNT(*) FROM customers WHERE tier = 'G'";
const COVERED = "SELECT COUNT(*) FROM customers WHERE tier = 'G' AND country = 'AU'";
const question = "How many gold-tier customers are there in Australia?";

let dir: string;
let dbPath: string;
let pool: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-final-coverage-"));
  dbPath = join(dir, "shop.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, country TEXT, tier TEXT, signup_date TEXT)");
  const add = db.prepare("INSERT INTO customers (country, tier, signup_date) VALUES (?, ?, ?)");
  const countries = ["AU", "GB", "DE", "CA"];
  for (let i = 0; i < 40; i++) add.run(countries[i % 4], ["G", "S", "B"][i % 3], `${2021 + (i % 3)}-0${1 + (i % 9)}-1${i % 10}`);
  db.close();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

function decoder(sql: string, deps: Partial<DecoderDeps> = {}) {
  const policy = new ScriptedPolicy(() => final(sql));
  return { policy, decode: createDecoder({ policy, executor: pool, promptOptions: { indexDir: join(dir, "indexes") }, ...deps }) };
}

const count = (sql: string): unknown => {
  const db = new Database(dbPath, { readonly: true });
  try {
    return db.prepare(sql).raw().get();
  } finally {
    db.close();
  }
};

describe("decoder: what the question names put into a final SQL that leaves it out", () => {
  it("is on by default: greedy adds the country the question names and says what it added", async () => {
    expect(DEFAULT_DECODER_DEFAULTS.repairCoverage).toBe(true);
    const before = readFileSync(dbPath);
    const { decode, policy } = decoder(DROPPED);
    const log = eventLog();
    const answer = await decode({ dbPath, question, strategy: "greedy" }, { sink: log.sink });
    expect(answer.sql).toBe(COVERED);
    expect(answer.result).toMatchObject({ ok: true, rows: [count(COVERED)] });
    const fix = { rule: "condition", from: "", to: "country = 'AU'" };
    expect(answer.candidates[0]!.coverage).toEqual([fix]);
    expect(log.of("repair")).toEqual([{ type: "repair", path: expect.any(String), sql: DROPPED, repaired: COVERED, swaps: [], coverage: [fix] }]);
    expect(policy.liveTrajectories()).toBe(0);
    expect(readFileSync(dbPath).equals(before)).toBe(true);
  });

  it("reads the year off the request's question", async () => {
    const answer = await decoder("SELECT COUNT(*) FROM customers WHERE tier = 'S'").decode({
      dbPath,
      question: "How many silver customers signed up in 2022?",
      strategy: "greedy",
    });
    expect(answer.sql).toBe("SELECT COUNT(*) FROM customers WHERE tier = 'S' AND signup_date LIKE '2022%'");
  });

  it("keeps the model's SQL with repairCoverage false", async () => {
    const off = await decoder(DROPPED, { defaults: { repairCoverage: false } }).decode({ dbPath, question, strategy: "greedy" });
    expect(off.sql).toBe(DROPPED);
    expect(off.candidates[0]!.coverage).toBeUndefined();
  });
});

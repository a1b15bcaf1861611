/**
 * `repairCoverage`: a final SQL that runs but leaves out a value the question names is given the
 * condition, written back into the response and kept; together with a literal repair in one event.
 * Fake policy (one token per character) on a real SQLite file.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatCheck } from "../../src/agent/index.js";
import { type NamedValue } from "../../src/agent/testing.js";
import type { Responder } from "./fake-policy.js";
import { CONCERTS, finalSqlHarness } from "./final-harness.js";

const DROPPED = "SELECT COUNT(*) FROM concert WHERE singer_id = 1";
const COVERED = "SELECT COUNT(*) FROM concert WHERE singer_id = 1 AND venue = 'Arena'";
const arena: NamedValue = { table: "concert", column: "venue", value: "Arena", score: 1 };
const france: NamedValue = { table: "singer", column: "country", value: "France", score: 1 };

const { files, run } = finalSqlHarness(CONCERTS.setupSql, CONCERTS.prompt);

const answers =
  (sql: string): Responder =>
  () =>
    `<think>Count them.</think>\n<final_sql>${sql}</final_sql>`;

describe("rollout: a final SQL that leaves out a value the question names (repairCoverage)", () => {
  it("adds the condition as injected text, reports it in a repair event and keeps the file as it was", async () => {
    const bytesBefore = readFileSync(files.dbPath);
    const { result, events, policy } = await run(answers(DROPPED), { repairCoverage: true, namedValues: [arena], question: CONCERTS.prompt.question });
    expect(result.finalSql).toBe(COVERED);
    expect(result.text).toBe(`<think>Count them.</think>\n<final_sql>${COVERED}</final_sql>`);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
    expect(result.coverage).toEqual([{ rule: "condition", from: "", to: "venue = 'Arena'" }]);
    expect(result.literals).toBeUndefined();
    expect(events.filter((e) => e.type === "repair")).toEqual([
      { type: "repair", path: expect.any(String), sql: DROPPED, repaired: COVERED, swaps: [], coverage: result.coverage },
    ]);
    expect(policy.liveTrajectories()).toBe(0);
    expect(readFileSync(files.dbPath).equals(bytesBefore)).toBe(true);
  });

  it("mends a literal and adds a condition in one repair", async () => {
    const sql = "SELECT COUNT(*) FROM singer AS T1 INNER JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.venue = 'ARENA'";
    const fixed =
      "SELECT COUNT(*) FROM singer AS T1 INNER JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.venue = 'Arena' AND T1.country = 'France'";
    const { result, events } = await run(answers(sql), { repairLiterals: true, repairCoverage: true, namedValues: [france] });
    expect(result.finalSql).toBe(fixed);
    const repair = events.filter((e) => e.type === "repair");
    expect(repair).toHaveLength(1);
    expect(repair[0]).toMatchObject({ literals: [{ to: "T2.venue = 'Arena'", rule: "case" }], coverage: [{ rule: "condition", to: "T1.country = 'France'" }] });
  });

  it("does nothing when off (the rollout's default) or when the answer already compares the column", async () => {
    const off = await run(answers(DROPPED), { namedValues: [arena] });
    expect(off.result.finalSql).toBe(DROPPED);
    expect(off.executor.calls).toEqual([]);
    const whole = await run(answers(COVERED), { repairCoverage: true, namedValues: [arena] });
    expect(whole.result.finalSql).toBe(COVERED);
    expect(whole.events.some((e) => e.type === "repair")).toBe(false);
  });
});

/**
 * `repairLiterals`: a final SQL that runs but compares a column with a string no row holds is
 * rewritten to the column's spelling, written back into the response and kept; after a table
 * repair too. Fake policy (one token per character) on a real SQLite file.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatCheck } from "../../src/agent/index.js";
import type { Responder } from "./fake-policy.js";
import { CONCERTS, finalSqlHarness } from "./final-harness.js";

const WRONG_CASE = "SELECT COUNT(*) FROM concert WHERE venue = 'ARENA'";
const MENDED = "SELECT COUNT(*) FROM concert WHERE venue = 'Arena'";
const WRONG_TABLE_AND_CASE = "SELECT COUNT(*) FROM singer WHERE venue = 'arena'";

const { files, run } = finalSqlHarness(CONCERTS.setupSql, CONCERTS.prompt);

const answers =
  (sql: string): Responder =>
  () =>
    `<think>Count them.</think>\n<final_sql>${sql}</final_sql>`;

describe("rollout: a final SQL whose string no row holds, rewritten to the column's spelling (repairLiterals)", () => {
  it("rewrites the answer as injected text, reports the rewrite in a repair event and keeps the file as it was", async () => {
    const bytesBefore = readFileSync(files.dbPath);
    const { result, events, policy } = await run(answers(WRONG_CASE), { repairLiterals: true, finalRetries: 1 });
    expect(result.finalSql).toBe(MENDED);
    expect(result.stopReason).toBe("final");
    expect(result.text).toBe(`<think>Count them.</think>\n<final_sql>${MENDED}</final_sql>`);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
    expect(result.record.sampled.every((s) => s === 0)).toBe(true);
    expect(result.literals).toEqual([{ column: "concert.venue", from: "venue = 'ARENA'", to: "venue = 'Arena'", rule: "case" }]);
    expect(result.repairs).toBeUndefined();
    expect(events.filter((e) => e.type === "repair")).toEqual([
      { type: "repair", path: expect.any(String), sql: WRONG_CASE, repaired: MENDED, swaps: [], literals: result.literals },
    ]);
    expect(policy.liveTrajectories()).toBe(0);
    expect(readFileSync(files.dbPath).equals(bytesBefore)).toBe(true);
  });

  it("mends the literal of a query it first rebound to the right table, in one repair", async () => {
    const { result, events } = await run(answers(WRONG_TABLE_AND_CASE), { repairTables: true, repairLiterals: true, finalRetries: 1 });
    expect(result.finalSql).toBe(MENDED);
    expect(result.repairs).toEqual([{ from: "singer", to: "concert" }]);
    expect(result.probes).toEqual([]);
    const repair = events.filter((e) => e.type === "repair");
    expect(repair).toHaveLength(1);
    expect(repair[0]).toMatchObject({ sql: WRONG_TABLE_AND_CASE, repaired: MENDED, swaps: [{ from: "singer", to: "concert" }] });
  });

  it("leaves an answer whose strings the column holds, and does nothing when off (the rollout's default)", async () => {
    const right = await run(answers(MENDED), { repairLiterals: true });
    expect(right.result.finalSql).toBe(MENDED);
    expect(right.events.some((e) => e.type === "repair")).toBe(false);
    const off = await run(answers(WRONG_CASE));
    expect(off.result.finalSql).toBe(WRONG_CASE);
    expect(off.executor.calls).toEqual([]);
  });
});

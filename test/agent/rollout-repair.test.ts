/**
 * `repairTables`: a final SQL that fails on a column its table lacks is rebound to the table that
 * holds its columns, written back into the response and kept. Fake policy (one token per
 * character) on a real SQLite file; the llama.cpp path is in rollout-llama.test.ts.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { formatCheck } from "../../src/agent/index.js";
import type { Responder } from "./fake-policy.js";
import { CONCERTS, finalSqlHarness } from "./final-harness.js";

const WRONG_TABLE = "SELECT COUNT(*) FROM singer WHERE venue = 'Arena'";
const REPAIRED = "SELECT COUNT(*) FROM concert WHERE venue = 'Arena'";
const NO_TABLE_FITS = "SELECT COUNT(*) FROM singer WHERE shoe_size = 44";
const GOOD = "SELECT COUNT(*) FROM concert WHERE venue = 'Arena'";

const { files, run } = finalSqlHarness(CONCERTS.setupSql, CONCERTS.prompt);

/** Answers `first`, then GOOD after reading a result. */
const answers =
  (first: string): Responder =>
  (response) =>
    response.includes("<result>") ? `<final_sql>${GOOD}</final_sql>` : `<think>Count them.</think>\n<final_sql>${first}</final_sql>`;

describe("rollout: a failing final SQL rebound to the table that holds its columns (repairTables)", () => {
  it("rewrites the answer with the repaired SQL as injected text, reports the swap and ends there, before any retry", async () => {
    const bytesBefore = readFileSync(files.dbPath);
    const { result, events, executor, policy } = await run(answers(WRONG_TABLE), { repairTables: true, finalRetries: 1 });
    expect(result.finalSql).toBe(REPAIRED);
    expect(result.stopReason).toBe("final");
    expect(result.probes).toEqual([]);
    expect(result.text).toBe(`<think>Count them.</think>\n<final_sql>${REPAIRED}</final_sql>`);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
    expect(result.record.tokens).toEqual([...result.text].map((c) => c.codePointAt(0)));
    expect(result.record.sampled.every((s) => s === 0)).toBe(true);
    expect(executor.calls).toEqual([WRONG_TABLE, REPAIRED]);
    expect(events.filter((e) => e.type === "repair")).toEqual([
      { type: "repair", path: expect.any(String), sql: WRONG_TABLE, repaired: REPAIRED, swaps: [{ from: "singer", to: "concert" }] },
    ]);
    expect(events.some((e) => e.type === "probe")).toBe(false);
    expect(policy.liveTrajectories()).toBe(0);
    expect(readFileSync(files.dbPath).equals(bytesBefore)).toBe(true);
  });

  it("falls back to the retry when no table holds the columns", async () => {
    const { result, events } = await run(answers(NO_TABLE_FITS), { repairTables: true, finalRetries: 1 });
    expect(result.probes.map((p) => p.sql)).toEqual([NO_TABLE_FITS]);
    expect(result.finalSql).toBe(GOOD);
    expect(events.some((e) => e.type === "repair")).toBe(false);
  });

  it("repairs without retries and outside the execution-aware family, and not at all when off (the rollout's default)", async () => {
    const alone = await run(answers(WRONG_TABLE), { repairTables: true });
    expect(alone.result.finalSql).toBe(REPAIRED);
    const standard = await run(answers(WRONG_TABLE), { repairTables: true, family: "standard" });
    expect(standard.result.finalSql).toBe(REPAIRED);
    const off = await run(answers(WRONG_TABLE));
    expect(off.result.finalSql).toBe(WRONG_TABLE);
    expect(off.executor.calls).toEqual([]);
  });

  it("repairs the body of a final SQL the server opened at the interaction limit", async () => {
    const probe = "<intermediate_sql>SELECT 1</intermediate_sql>";
    const responder: Responder = (response) => (response.endsWith("<final_sql>") ? `${WRONG_TABLE}</final_sql>` : probe);
    const { result } = await run(responder, { repairTables: true, maxInteractions: 1 });
    expect(result.finalSql).toBe(REPAIRED);
    expect(result.text.endsWith(`<final_sql>${REPAIRED}</final_sql>`)).toBe(true);
  });
});

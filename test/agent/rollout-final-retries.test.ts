/**
 * `finalRetries`: a final SQL that fails to run is taken back, rewritten as a probe and answered
 * with its error, so the model answers again. Fake policy (one token per character) on a real
 * SQLite file; the llama.cpp path is in rollout-llama.test.ts.
 */
import { describe, expect, it } from "vitest";
import { formatCheck } from "../../src/agent/index.js";
import type { Responder } from "./fake-policy.js";
import { finalSqlHarness } from "./final-harness.js";

const BAD = "SELECT COUNT(*) FROM singers WHERE country = 'France'";
const GOOD = "SELECT COUNT(*) FROM singer WHERE country = 'France'";
const FIRST = `<think>Count the singers from France.</think>\n<final_sql>${BAD}</final_sql>`;

const { run } = finalSqlHarness(
  "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT); INSERT INTO singer VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain')",
  { schema: "singer.singer_id (integer)\nsinger.name (text)\nsinger.country (text)", question: "How many singers are from France?" },
);

/** Writes FIRST, then (after a result) the corrected final. */
const corrects: Responder = (response) => (response.includes("<result>") ? `<think>The table is singer.</think>\n<final_sql>${GOOD}</final_sql>` : FIRST);

describe("rollout: a failing final SQL answered as a probe (finalRetries)", () => {
  it("rewrites the failing final SQL as a probe, answers it with the error and lets the model answer again", async () => {
    const { result, events, executor, policy } = await run(corrects, { finalRetries: 1 });
    expect(result.finalSql).toBe(GOOD);
    expect(result.stopReason).toBe("final");
    expect(result.probes).toHaveLength(1);
    expect(result.probes[0]!.sql).toBe(BAD);
    expect(result.probes[0]!.result?.ok).toBe(false);
    expect(result.probes[0]!.feedback).toMatch(/no such table: singers/);
    expect(result.interactions).toBe(1);
    expect(result.text.startsWith(`<think>Count the singers from France.</think>\n<intermediate_sql>${BAD}</intermediate_sql><result>`)).toBe(true);
    expect(result.text).not.toContain(`<final_sql>${BAD}`);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
    // the record is the rewritten text; the taken-back segment is written back as injected text
    expect(result.record.tokens).toEqual([...result.text].map((c) => c.codePointAt(0)));
    const rewritten = result.text.indexOf("<result>");
    expect(result.record.sampled.slice(0, rewritten).every((s) => s === 0)).toBe(true);
    expect(result.record.sampled.at(-1)).toBe(1);
    // the failing final ran once (not again as its probe); with the one retry spent, the corrected final is left to the caller
    expect(executor.calls.filter((q) => q === BAD)).toHaveLength(1);
    expect(events.filter((e) => e.type === "probe")).toEqual([{ type: "probe", path: expect.any(String), step: 1, sql: BAD, retried: true }]);
    expect(events.some((e) => e.type === "result")).toBe(true);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("keeps a failing final SQL when retries are off (the rollout's default)", async () => {
    const { result, executor } = await run(corrects);
    expect(result.finalSql).toBe(BAD);
    expect(result.probes).toEqual([]);
    expect(executor.calls).toEqual([]);
  });

  it("does not take back a final SQL that runs, or one that declares the question unanswerable", async () => {
    const good = await run(() => `<final_sql>${GOOD}</final_sql>`, { finalRetries: 1 });
    expect(good.result.finalSql).toBe(GOOD);
    expect(good.result.probes).toEqual([]);
    expect(good.result.text).toBe(`<final_sql>${GOOD}</final_sql>`);
    expect(good.executor.calls).toEqual([GOOD]);

    const none = await run(() => "<final_sql>UNANSWERABLE: no ages are stored</final_sql>", { finalRetries: 1 });
    expect(none.result.answerable).toBe(false);
    expect(none.executor.calls).toEqual([]);
  });

  it("takes back at most finalRetries failing answers, and none past the interaction limit", async () => {
    const stubborn: Responder = (response) => (response.includes("<result>") ? `<final_sql>${BAD}</final_sql>` : FIRST);
    const twice = await run(stubborn, { finalRetries: 2 });
    expect(twice.result.probes.map((p) => p.sql)).toEqual([BAD, BAD]);
    expect(twice.result.probes[1]!.repeated).toBe(true);
    expect(twice.result.finalSql).toBe(BAD);
    expect(twice.result.stopReason).toBe("final");

    const limited = await run(corrects, { finalRetries: 1, maxInteractions: 0 });
    expect(limited.result.finalSql).toBe(BAD);
    expect(limited.result.probes).toEqual([]);
  });

  it("does not retry in a family without probes", async () => {
    const { result } = await run(corrects, { finalRetries: 1, family: "standard" });
    expect(result.finalSql).toBe(BAD);
    expect(result.probes).toEqual([]);
  });
});

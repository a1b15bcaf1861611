import { describe, expect, it } from "vitest";
import type { ExecResult } from "../../src/sql/index.js";
import { byState, eventLog, final, probe, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

const ANSWERS = {
  "SELECT 1": rows([1]),
  "SELECT COUNT(*) FROM t": rows([7]),
  "SELECT COUNT(a) FROM t": rows([7]),
  "SELECT MAX(a) FROM t": rows([9]),
};

describe("greedy decoding", () => {
  it("runs one rollout at temperature 0, executes its final SQL and answers with it", async () => {
    const s = scripted(
      byState((text) => (probesIn(text) === 0 ? probe("SELECT 1") : final("SELECT COUNT(*) FROM t"))),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "how many?", strategy: "greedy", temperature: 0.9 }, { sink: log.sink });
    expect(answer.sql).toBe("SELECT COUNT(*) FROM t");
    expect(answer.result).toMatchObject({ ok: true, rows: [[7]] });
    expect(answer.candidates).toHaveLength(1);
    expect(answer.candidates[0]).toMatchObject({ index: 0, path: "0", group: 0, votes: 1, interactions: 1, answerable: true });
    expect(answer.winner).toBe(0);
    expect(answer.shortfall).toBeUndefined();
    expect(s.policy.calls.every((c) => (c.options.temperature ?? 0) === 0 && (c.options.topP ?? 1) === 1)).toBe(true);
    expect(log.events.map((e) => e.type).filter((t) => t !== "token")).toEqual(["branch", "probe", "result", "candidate", "vote", "final"]);
    expect(log.of("final")[0]).toEqual({ type: "final", sql: "SELECT COUNT(*) FROM t", answerable: true, confidence: answer.confidence!.value });
    expect(answer.timings.totalMs).toBeGreaterThanOrEqual(0);
    expect(answer.timings.firstTokenMs).toBeGreaterThanOrEqual(0);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("names a failed final SQL's error code on its candidate event", async () => {
    const timeout: ExecResult = { ok: false, error: { code: "SQL_TIMEOUT", category: "timeout", message: "interrupted after 5000 ms" }, elapsedMs: 5000 };
    // retries off: the failing final is the answer (final-retries.test.ts covers the retry)
    const s = scripted([final("SELECT MAX(a) FROM t JOIN t")], { "SELECT MAX(a) FROM t JOIN t": timeout }, { deps: { defaults: { finalRetries: 0 } } });
    const log = eventLog();
    await s.decode({ dbPath: "/db", question: "max?", strategy: "greedy" }, { sink: log.sink });
    expect(log.of("candidate")[0]).toMatchObject({ ok: false, errorCode: "SQL_TIMEOUT", error: "SQL_TIMEOUT: interrupted after 5000 ms" });
  });

  it("answers unanswerable when the model declares it", async () => {
    const s = scripted(["<think>no table for that</think><final_sql>UNANSWERABLE: there is no salary column</final_sql>"], ANSWERS);
    const answer = await s.decode({ dbPath: "/db", question: "salary?", strategy: "greedy" });
    expect(answer).toMatchObject({ sql: null, answerable: false, reason: "there is no salary column", winner: 0 });
    expect(answer.candidates[0]!.error).toBeUndefined();
  });
});

describe("linear decoding", () => {
  it("starts k independent rollouts from the prompt at the request temperature and top-p and returns k candidates", async () => {
    const finals = ["SELECT COUNT(*) FROM t", "SELECT COUNT(a) FROM t", "SELECT MAX(a) FROM t"];
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? probe("SELECT 1") : final(finals[n % 3]!))),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode(
      { dbPath: "/db", question: "q", strategy: "linear", candidates: 6, temperature: 0.7, topP: 0.8, seed: 3 },
      { sink: log.sink },
    );
    expect(answer.candidates).toHaveLength(6);
    expect(answer.candidates.map((c) => c.path)).toEqual(expect.arrayContaining(["0", "1", "2", "3", "4", "5"]));
    const firstCalls = s.policy.calls.filter((c) => c.text === "");
    expect(new Set(firstCalls.map((c) => c.trajectoryId)).size).toBe(6);
    expect(s.policy.calls.every((c) => c.options.temperature === 0.7 && c.options.topP === 0.8)).toBe(true);
    expect(new Set(firstCalls.map((c) => c.options.seed)).size).toBe(6);
    expect(log.of("branch").every((b) => b.parent === null && b.depth === 0)).toBe(true);
    // COUNT(*) and COUNT(a) return the same rows: 4 votes against 2
    expect(answer.result).toMatchObject({ rows: [[7]] });
    expect(answer.candidates[answer.winner!]!.votes).toBe(4);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("asks the policy for log-probs only when several candidates may tie in the vote", async () => {
    const s = scripted(
      byState(() => final("SELECT COUNT(*) FROM t")),
      ANSWERS,
    );
    await s.decode({ dbPath: "/db", question: "q", strategy: "greedy" });
    const greedyCalls = s.policy.calls.length;
    expect(greedyCalls).toBeGreaterThan(0);
    expect(s.policy.calls.every((c) => c.options.logprobs === false)).toBe(true);
    await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 3, temperature: 0.7 });
    expect(s.policy.calls.slice(greedyCalls).every((c) => c.options.logprobs === true)).toBe(true);
  });

  it("sums usage over rollouts: each prompt counted once, the shared prefix evaluated once", async () => {
    const s = scripted(
      byState(() => final("SELECT 1")),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 4 });
    const generated = "<think>done</think><final_sql>SELECT 1</final_sql>".length;
    expect(answer.usage.generatedTokens).toBe(4 * generated);
    const first = s.policy.calls[0]!;
    const promptLength = [...first.prompt].length;
    expect(answer.usage.promptTokens).toBe(4 * promptLength);
    expect(answer.usage.evaluatedTokens).toBeLessThan(4 * (promptLength + generated));
  });

  it("holds at most the policy's sequences less one (kept for the cached prompt prefix); the rest queue", async () => {
    const s = scripted(
      byState((text) => (probesIn(text) === 0 ? probe("SELECT 1") : final("SELECT 1"))),
      ANSWERS,
      { policy: { maxSequences: 4, tokenDelayMs: 1 } },
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 8 });
    expect(answer.candidates).toHaveLength(8);
    expect(s.peakLive()).toBe(3);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("passes the constrained grammars of the database to every segment", async () => {
    const grammars = { first: 'root ::= "first"\n', segment: 'root ::= "segment"\n', finalBody: 'root ::= "body"\n' };
    const s = scripted(
      byState((text) => (probesIn(text) === 0 ? probe("SELECT 1") : final("SELECT 1"))),
      ANSWERS,
      { deps: { grammarFor: () => grammars } },
    );
    await s.decode({ dbPath: "/db", question: "q", strategy: "greedy", constrained: true });
    expect(s.policy.calls.map((c) => c.options.grammar)).toEqual([grammars.first, grammars.segment]);
    const plain = scripted(
      byState(() => final("SELECT 1")),
      ANSWERS,
      { deps: { grammarFor: () => grammars } },
    );
    await plain.decode({ dbPath: "/db", question: "q", strategy: "greedy" });
    expect(plain.policy.calls[0]!.options.grammar).toBeUndefined();
  });
});

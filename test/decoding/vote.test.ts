import { describe, expect, it } from "vitest";
import { saysNothingMatched, vote } from "../../src/decoding/index.js";
import { VOTE_RULE } from "../../src/decoding/testing.js";
import { byState, eventLog, final, rows, sqlError } from "./helpers.js";
import { scripted } from "./setup.js";

describe("vote", () => {
  it("groups candidates by result as a set of rows and lets the largest group win", () => {
    const outcome = vote([
      { sql: "a", result: rows([1], [2]), meanLogprob: -1 },
      { sql: "b", result: rows([3]), meanLogprob: -0.1 },
      { sql: "c", result: rows([2], [1], [1]), meanLogprob: -2 },
    ]);
    expect(outcome).toMatchObject({ winner: 0, groupOf: [0, 1, 0], decidedBy: "majority" });
    expect(outcome.groups.map((g) => g.votes)).toEqual([2, 1]);
  });

  it("breaks ties by the higher mean log-probability, then by the group seen first", () => {
    const byLogprob = vote([
      { sql: "a", result: rows([1]), meanLogprob: -1 },
      { sql: "b", result: rows([2]), meanLogprob: -0.5 },
    ]);
    expect(byLogprob).toMatchObject({ winner: 1, decidedBy: "tie-logprob" });
    const byOrder = vote([
      { sql: "a", result: rows([1]), meanLogprob: -0.5 },
      { sql: "b", result: rows([2]), meanLogprob: -0.5 },
    ]);
    expect(byOrder).toMatchObject({ winner: 0, decidedBy: "tie-first" });
    expect(VOTE_RULE).toMatch(/ties go to the higher mean log-probability, then to the group seen first/);
  });

  it("leaves failed candidates out and falls back to the most likely SQL when all fail", () => {
    const outcome = vote([
      { sql: null, meanLogprob: -0.01 },
      { sql: "a", result: sqlError(), meanLogprob: -1 },
      { sql: "b", result: sqlError(), meanLogprob: -0.2 },
      { sql: "c", result: sqlError(), meanLogprob: -0.2 },
    ]);
    expect(outcome).toMatchObject({ winner: 2, groupOf: [null, null, null, null], groups: [], decidedBy: "fallback-logprob" });
    expect(vote([{ sql: null, meanLogprob: 0 }])).toMatchObject({ winner: null, decidedBy: "none" });
  });

  it('does not let results that say only "nothing matched" outvote a candidate with real rows', () => {
    // the clinic dermatology question under tree-prune-4: three misspelt specialties count 0, one counts 11
    const ballots = [
      { sql: "… = 'R'", result: rows([0n]), meanLogprob: -0.3 },
      { sql: "… = 'DER'", result: rows([0n]), meanLogprob: -0.2 },
      { sql: "… = 'Dermatology'", result: rows([11n]), meanLogprob: -0.9 },
      { sql: "… = 'Cmergenermatology'", result: rows([0n]), meanLogprob: -0.4 },
    ];
    const outcome = vote(ballots);
    expect(outcome).toMatchObject({ winner: 2, decidedBy: "majority" });
    expect(outcome.groups[0]).toMatchObject({ votes: 3, empty: true });
    expect(outcome.groups[1]).toMatchObject({ votes: 1 });
    expect(outcome.groups[1]!.empty).toBeUndefined();
    // the rule before #30, kept for bench/decoding's side-by-side
    expect(vote(ballots, { emptyVotes: "equal" })).toMatchObject({ winner: 0, decidedBy: "majority" });
    // no rows at all, and a lone NULL aggregate, say nothing matched too
    expect(
      vote([
        { sql: "a", result: rows(), meanLogprob: 0 },
        { sql: "b", result: rows(), meanLogprob: 0 },
        { sql: "c", result: rows([null]), meanLogprob: 0 },
        { sql: "d", result: rows(["x"]), meanLogprob: -5 },
      ]).winner,
    ).toBe(3);
    expect(VOTE_RULE).toMatch(/nothing matched/);
  });

  it('lets "nothing matched" win when no other result ran, and keeps real zeros among several rows', () => {
    expect(
      vote([
        { sql: "a", result: sqlError(), meanLogprob: 0 },
        { sql: "b", result: rows([0n]), meanLogprob: -1 },
        { sql: "c", result: rows(), meanLogprob: -0.5 },
      ]),
    ).toMatchObject({ winner: 2, decidedBy: "tie-logprob" });
    expect(saysNothingMatched([[0, null]])).toBe(true);
    expect(saysNothingMatched([[0], [0]])).toBe(false);
    expect(saysNothingMatched([[0, "a"]])).toBe(false);
    expect(saysNothingMatched([[0.5]])).toBe(false);
  });

  it("counts declarations that the question is unanswerable as one group", () => {
    const outcome = vote([
      { sql: "a", result: rows([1]), meanLogprob: -1 },
      { sql: null, answerable: false, meanLogprob: -1 },
      { sql: null, answerable: false, meanLogprob: -1 },
    ]);
    expect(outcome).toMatchObject({ winner: 1, groupOf: [0, 1, 1], decidedBy: "majority" });
    expect(outcome.groups[1]).toMatchObject({ unanswerable: true, votes: 2 });
  });
});

describe("voting in a decode", () => {
  const ANSWERS = { "SELECT 1": rows([1]), "SELECT 2": rows([2]), "SELECT 1 UNION SELECT 1": rows([1]) };

  it("picks the majority result and reports every candidate's group and votes", async () => {
    const finals = ["SELECT 2", "SELECT 1", "SELECT 1 UNION SELECT 1", "SELECT 2", "SELECT 1"];
    const s = scripted(
      byState((_t, n) => final(finals[n]!)),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 5 }, { sink: log.sink });
    expect(answer.result).toMatchObject({ rows: [[1]] });
    expect(answer.candidates[answer.winner!]!.votes).toBe(3);
    const byGroup = answer.candidates.map((c) => [c.sql, c.votes]);
    expect(byGroup).toEqual(
      expect.arrayContaining([
        ["SELECT 2", 2],
        ["SELECT 1", 3],
        ["SELECT 1 UNION SELECT 1", 3],
      ]),
    );
    const voteEvent = log.of("vote")[0]!;
    expect(voteEvent.rule).toBe(VOTE_RULE);
    expect(voteEvent.winner).toBe(answer.winner);
    expect(voteEvent.groups.map((g) => g.votes).sort()).toEqual([2, 3]);
  });

  it("breaks a tie between results by mean log-probability", async () => {
    const finals = ["SELECT 1", "SELECT 2"];
    const s = scripted(
      byState((_t, n) => final(finals[n]!)),
      ANSWERS,
      {
        policy: { logprob: (_token, _i, ctx) => (ctx.text === "" && ctx.call === 1 ? -0.01 : -1) },
      },
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 2 });
    expect(answer.candidates.map((c) => c.votes)).toEqual([1, 1]);
    const winner = answer.candidates[answer.winner!]!;
    expect(winner.sql).toBe("SELECT 2");
    expect(winner.meanLogprob).toBeCloseTo(-0.01, 5);
  });

  it("falls back deterministically when every candidate's SQL fails", async () => {
    const s = scripted(
      byState((_t, n) => final(`SELECT broken${n} FROM t`)),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 3 });
    expect(answer.winner).toBe(0);
    expect(answer.sql).toBe(answer.candidates[0]!.sql);
    expect(answer.result?.ok).toBe(false);
    expect(answer.candidates.every((c) => c.group === null && c.votes === 0 && c.error?.startsWith("SQL_NO_SUCH_COLUMN"))).toBe(true);
  });

  it("answers with no SQL when no candidate produced any", async () => {
    const s = scripted(
      byState(() => "<think>hmm</think>"),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 2 });
    expect(answer).toMatchObject({ sql: null, answerable: true, winner: null });
    expect(answer.candidates.map((c) => c.error)).toEqual(["no final SQL", "no final SQL"]);
  });
});

import { describe, expect, it } from "vitest";
import { answerStatus } from "../../src/decoding/index.js";
import { byState, eventLog, final, probe, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

const ANSWERS = {
  ...Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`SELECT ${i + 1}`, rows([i + 1])])),
  "SELECT COUNT(*) FROM t": rows([7]),
  "SELECT COUNT(a) FROM t": rows([7]),
  "SELECT MAX(a) FROM t": rows([9]),
};

describe("tree decoding with pruning", () => {
  it("drops a branch at its second failed probe and spends its budget elsewhere", async () => {
    // the first root child probes a missing column twice; the others probe fine
    const s = scripted(
      byState((text, n) => {
        const done = probesIn(text);
        if (done === 0) return probe(n === 0 ? "SELECT nope FROM t" : `SELECT ${n}`);
        if (done === 1 && text.includes("nope")) return probe("SELECT nope FROM t WHERE 1");
        return final("SELECT COUNT(*) FROM t");
      }),
      ANSWERS,
      { deps: { defaults: { greedyBranch: false } } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(log.of("prune")).toEqual([{ type: "prune", path: "R.0", reason: "probe_error" }]);
    expect(log.of("probe").filter((p) => p.path === "R.0")).toHaveLength(2);
    expect(answer.candidates).toHaveLength(6);
    expect(answer.shortfall).toBeUndefined();
    expect(answer.candidates.every((c) => !c.path.startsWith("R.0.") && c.path !== "R.0")).toBe(true);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("lets a branch whose first probe fails read the error and go on to a candidate", async () => {
    // every root child's first probe names a missing column; with the error back, each probes again and answers
    const s = scripted(
      byState((text, n) => {
        const done = probesIn(text);
        if (done === 0) return probe("SELECT nope FROM t");
        if (done === 1) return probe(`SELECT ${n + 1}`);
        return final("SELECT COUNT(*) FROM t");
      }),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 4, branching: 2 }, { sink: log.sink });
    expect(log.of("prune")).toEqual([]);
    expect(answer.candidates).toHaveLength(4);
    expect(answer.sql).toBe("SELECT COUNT(*) FROM t");
    expect(answer.confidence?.value).toBeGreaterThan(0);
  });

  it("still answers, marked, when every branch's first probe fails and every final SQL fails", async () => {
    const s = scripted(
      byState((text) => (probesIn(text) === 0 ? probe("SELECT nope FROM t") : final("SELECT broken FROM t"))),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 4, branching: 2 });
    expect(answer.sql).toBe("SELECT broken FROM t");
    expect(answer.candidates.length).toBeGreaterThan(0);
    expect(answer.confidence).toMatchObject({ value: 0, doubts: ["the final SQL failed"] });
    expect(answerStatus(answer)).toMatchObject({ answerable: false, reason: expect.stringMatching(/the final SQL failed/) });
  });

  it("keeps the same branches in plain tree decoding", async () => {
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? probe(n === 0 ? "SELECT nope FROM t" : `SELECT ${n}`) : final("SELECT COUNT(*) FROM t"))),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(log.of("prune")).toEqual([]);
    // R.0 does not branch at its failed probe: it goes on alone with its whole quota
    expect(answer.candidates.filter((c) => c.path === "R.0" || c.path.startsWith("R.0."))).toHaveLength(1);
  });

  it("collapses siblings whose probes returned identical results and gives the kept one's subtree their budget", async () => {
    // root children: R.0 and R.1 both probe SELECT 1 (same rows), R.2 probes SELECT 3; every branch then probes once more and answers
    const s = scripted(
      byState((text, n) => {
        const done = probesIn(text);
        if (done === 0) return probe(n < 2 ? "SELECT 1" : "SELECT 3", `idea ${n}`);
        if (done === 1) return probe(`SELECT ${10 + n}`, `next ${n}`);
        return final(n % 2 ? "SELECT MAX(a) FROM t" : "SELECT COUNT(*) FROM t");
      }),
      ANSWERS,
      { execDelayMs: 2, policy: { tokenDelayMs: 1 } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 9, branching: 3 }, { sink: log.sink });
    const prunes = log.of("prune");
    expect(prunes).toHaveLength(1);
    expect(prunes[0]!.reason).toBe("duplicate_result");
    const dropped = prunes[0]!.path;
    const kept = dropped === "R.0" ? "R.1" : "R.0";
    expect(answer.candidates).toHaveLength(9);
    expect(answer.shortfall).toBeUndefined();
    expect(answer.candidates.every((c) => !c.path.startsWith(`${dropped}.`))).toBe(true);
    // the kept sibling's subtree spent more than its own three leaves
    expect(answer.candidates.filter((c) => c.path.startsWith(`${kept}.`)).length).toBeGreaterThan(3);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("drops leaves whose final SQL fails and replaces them, keeping the candidate count", async () => {
    let finals = 0;
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? probe(`SELECT ${n + 1}`) : final(finals++ === 0 ? "SELECT broken FROM t" : "SELECT COUNT(*) FROM t"))),
      ANSWERS,
      { deps: { defaults: { greedyBranch: false } } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(log.of("prune").map((p) => p.reason)).toEqual(["sql_error"]);
    expect(answer.candidates).toHaveLength(6);
    expect(answer.candidates.every((c) => c.error === undefined)).toBe(true);
    expect(answer.sql).toBe("SELECT COUNT(*) FROM t");
  });

  it("gives up after its spawn limit when everything fails, adds the failed leaves back and falls back deterministically", async () => {
    const s = scripted(
      byState((text) => (probesIn(text) === 0 ? probe("SELECT 1") : final("SELECT broken FROM t"))),
      ANSWERS,
      {
        policy: { logprob: (_t, i) => (i % 7 === 0 ? -2 : -0.1) },
      },
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 3, branching: 3 });
    expect(answer.candidates).toHaveLength(3);
    expect(answer.shortfall).toMatch(/limit of 12 branches/);
    expect(answer.shortfall).toMatch(/added back/);
    expect(answer.candidates.every((c) => c.group === null && c.error?.startsWith("SQL_NO_SUCH_COLUMN"))).toBe(true);
    expect(answer.sql).toBe("SELECT broken FROM t");
    expect(answer.winner).not.toBeNull();
    const best = Math.max(...answer.candidates.map((c) => c.meanLogprob));
    expect(answer.candidates[answer.winner!]!.meanLogprob).toBe(best);
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

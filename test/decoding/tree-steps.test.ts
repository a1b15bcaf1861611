/**
 * The tree decoder's steps one at a time (pump, expand, prune, finish a leaf, vote input), each
 * observed through `createDecoder`'s events and the scripted policy's generate calls.
 */
import { describe, expect, it } from "vitest";
import { byState, eventLog, final, probe, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

const ANSWERS = {
  "SELECT 1": rows([1]),
  "SELECT 2": rows([2]),
  "SELECT 3": rows([3]),
  "SELECT COUNT(*) FROM t": rows([7]),
  "SELECT MAX(a) FROM t": rows([9]),
};

/** Sibling n probes SELECT n+1 (distinct rows, so no sibling is a duplicate), then answers. */
const probeOnceThenAnswer = byState((text, n) => (probesIn(text) === 0 ? probe(`SELECT ${1 + (n % 3)}`) : final("SELECT COUNT(*) FROM t")));

/** Each branch's parent path, from the `branch` events. */
function parents(log: ReturnType<typeof eventLog>): Map<string, string | null> {
  return new Map(log.of("branch").map((b) => [b.path, b.parent]));
}

describe("tree decoder: pump", () => {
  it("splits the whole budget over at most `branching` first children of the root, largest shares first", async () => {
    // 5 leaves over 3 children: quotas 2, 2, 1; the two owing 2 fork after their probe, the one owing 1 does not
    const s = scripted(probeOnceThenAnswer, ANSWERS);
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 5, branching: 3 }, { sink: log.sink });
    const tree = parents(log);
    expect([...tree.entries()].filter(([, p]) => p === "R").map(([path]) => path)).toEqual(["R.0", "R.1", "R.2"]);
    expect(["R.0", "R.1", "R.2"].map((n) => [...tree.values()].filter((p) => p === n).length)).toEqual([2, 2, 0]);
    expect(answer.candidates.map((c) => c.path).sort()).toEqual(["R.0.0", "R.0.1", "R.1.0", "R.1.1", "R.2"]);
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

describe("tree decoder: expand", () => {
  it("forks every child when sequences allow, and the branch's own trajectory stops there as the held node", async () => {
    const s = scripted(probeOnceThenAnswer, ANSWERS);
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 4, branching: 2 });
    expect(answer.candidates).toHaveLength(4);
    const beforeProbe = new Set(s.policy.calls.filter((c) => probesIn(c.text) === 0).map((c) => c.trajectoryId));
    const afterProbe = s.policy.calls.filter((c) => probesIn(c.text) === 1).map((c) => c.trajectoryId);
    expect(afterProbe).toHaveLength(4);
    expect(afterProbe.filter((id) => beforeProbe.has(id))).toEqual([]);
  });

  it("with too few free sequences forks fewer children and goes on itself as its node's last child, owing the rest", async () => {
    // 4 live trajectories at most: the root and two children hold three, so each probing child can fork only one more
    const s = scripted(probeOnceThenAnswer, ANSWERS, { policy: { maxSequences: 5 } });
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(answer.candidates).toHaveLength(6);
    expect(s.peakLive()).toBeLessThanOrEqual(5);
    const beforeProbe = new Set(s.policy.calls.filter((c) => probesIn(c.text) === 0).map((c) => c.trajectoryId));
    const continued = s.policy.calls.filter((c) => probesIn(c.text) === 1 && beforeProbe.has(c.trajectoryId));
    expect(continued.length, "a branch that probed kept generating on its own trajectory").toBeGreaterThan(0);
    // the branch that goes on is announced again under its new path, as a child of the node it became: no leaf is also a node
    const tree = parents(log);
    const nodes = new Set(tree.values());
    expect(answer.candidates.filter((c) => nodes.has(c.path))).toEqual([]);
    for (const path of answer.candidates.map((c) => c.path)) expect(tree.get(path)).toBe(path.split(".").slice(0, -1).join("."));
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

describe("tree decoder: prune", () => {
  it("drops a branch whose probes fail twice and re-samples its leaf from its own node, not from the root", async () => {
    // R.0 and R.1 probe (distinct rows) and fork two children each; the first child of each then probes a missing column, twice
    const s = scripted(
      byState((text, n) => {
        if (probesIn(text) === 0) return probe(`SELECT ${1 + n}`);
        if (probesIn(text) === 1 && n === 0) return probe("SELECT nope FROM t");
        if (probesIn(text) === 2 && text.includes("nope")) return probe("SELECT nope FROM t WHERE 1");
        return final("SELECT COUNT(*) FROM t");
      }),
      ANSWERS,
      { deps: { defaults: { greedyBranch: false } } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 4, branching: 2 }, { sink: log.sink });
    expect(log.of("prune").map((p) => [p.path, p.reason])).toEqual([
      ["R.0.0", "probe_error"],
      ["R.1.0", "probe_error"],
    ]);
    const tree = parents(log);
    expect(tree.get("R.0.2")).toBe("R.0");
    expect(tree.get("R.1.2")).toBe("R.1");
    expect([...tree.values()].filter((p) => p === "R")).toHaveLength(2);
    expect(answer.candidates.map((c) => c.path).sort()).toEqual(["R.0.1", "R.0.2", "R.1.1", "R.1.2"]);
    expect(answer.shortfall).toBeUndefined();
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

describe("tree decoder: finish a leaf", () => {
  it("without pruning, a leaf whose final SQL fails is still a candidate, with its error", async () => {
    let finals = 0;
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? probe(`SELECT ${1 + n}`) : final(finals++ === 0 ? "SELECT broken FROM t" : "SELECT COUNT(*) FROM t"))),
      ANSWERS,
      { deps: { defaults: { finalRetries: 0 } } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(log.of("prune")).toEqual([]);
    expect(answer.candidates).toHaveLength(6);
    expect(answer.candidates.filter((c) => c.error?.startsWith("SQL_NO_SUCH_COLUMN"))).toHaveLength(1);
    expect(answer.sql).toBe("SELECT COUNT(*) FROM t");
  });
});

describe("tree decoder: vote input", () => {
  it("adds leaves set aside for a failing final SQL back as candidates when a stop leaves the tree short", async () => {
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? probe(`SELECT ${1 + (n % 3)}`) : final("SELECT broken FROM t"))),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode(
      { dbPath: "/db", question: "q", strategy: "tree-prune", candidates: 8, branching: 3, maxTotalTokens: 400 },
      { sink: log.sink },
    );
    const setAside = log
      .of("prune")
      .filter((p) => p.reason === "sql_error")
      .map((p) => p.path);
    expect(setAside.length).toBeGreaterThan(0);
    // nothing else finished, so every set-aside leaf (up to the 8 asked for) comes back, in the order it was set aside
    expect(answer.candidates.map((c) => c.path)).toEqual(setAside.slice(0, 8));
    expect(answer.candidates.length).toBeLessThan(8);
    expect(answer.candidates.every((c) => c.error?.startsWith("SQL_NO_SUCH_COLUMN"))).toBe(true);
    expect(answer.shortfall).toMatch(/budget of 400 generated tokens/);
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

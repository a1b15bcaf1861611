import { describe, expect, it } from "vitest";
import { splitQuota } from "../../src/decoding/testing.js";
import { byState, eventLog, final, probe, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

const ANSWERS = {
  "SELECT 1": rows([1]),
  "SELECT 2": rows([2]),
  "SELECT COUNT(*) FROM t": rows([7]),
  "SELECT COUNT(a) FROM t": rows([7]),
  "SELECT MAX(a) FROM t": rows([9]),
};
const FINALS = ["SELECT COUNT(*) FROM t", "SELECT COUNT(a) FROM t", "SELECT MAX(a) FROM t"];

/** Probe once (sibling n probes SELECT 1 or 2 alternately), then answer. */
const probeThenAnswer = byState((text, n) => (probesIn(text) === 0 ? probe(n % 2 === 0 ? "SELECT 1" : "SELECT 2") : final(FINALS[n % 3]!)));

describe("tree decoding", () => {
  it("splits the budget evenly, largest shares first", () => {
    expect(splitQuota(16, 3)).toEqual([6, 5, 5]);
    expect(splitQuota(2, 3)).toEqual([1, 1, 0]);
    expect(splitQuota(4, 2)).toEqual([2, 2]);
  });

  it("forks children after the prompt and after each probe's result, up to `branching` per node", async () => {
    const s = scripted(probeThenAnswer, ANSWERS, { deps: { defaults: { greedyBranch: false } } });
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 4, branching: 2, seed: 1 }, { sink: log.sink });
    const branches = log.of("branch").map((b) => [b.path, b.parent, b.depth]);
    expect(branches).toEqual(
      expect.arrayContaining([
        ["R", null, 0],
        ["R.0", "R", 1],
        ["R.1", "R", 1],
        ["R.0.0", "R.0", 2],
        ["R.0.1", "R.0", 2],
        ["R.1.0", "R.1", 2],
        ["R.1.1", "R.1", 2],
      ]),
    );
    expect(branches).toHaveLength(7);
    expect(answer.candidates.map((c) => c.path).sort()).toEqual(["R.0.0", "R.0.1", "R.1.0", "R.1.1"]);
    expect(answer.shortfall).toBeUndefined();
    // two first segments (one per root child) and four answers: the probes were sampled once per node
    const firstSegments = s.policy.calls.filter((c) => c.text === "");
    expect(firstSegments).toHaveLength(2);
    expect(s.executor.executed.filter((q) => q === "SELECT 1" || q === "SELECT 2")).toHaveLength(2);
    // every child after a probe continued from its parent's text, result included
    const afterProbe = s.policy.calls.filter((c) => probesIn(c.text) === 1);
    expect(afterProbe).toHaveLength(4);
    expect(new Set(afterProbe.map((c) => c.trajectoryId)).size).toBe(4);
    expect(afterProbe.every((c) => /<\/result>\s*$/.test(c.text))).toBe(true);
    // the decoder's default sampling: temperature 0.7, top-p 0.95
    expect(s.policy.calls.every((c) => c.options.temperature === 0.7 && c.options.topP === 0.95)).toBe(true);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("decodes one branch greedily by default: one root child and one child of each of its nodes at temperature 0, the rest sampled", async () => {
    const s = scripted(probeThenAnswer, ANSWERS);
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 4, branching: 2, seed: 1 });
    const greedyCalls = s.policy.calls.filter((c) => c.options.temperature === 0);
    // the greedy root child's first segment, then its first child's answer after the probe
    expect(greedyCalls.map((c) => probesIn(c.text))).toEqual([0, 1]);
    expect(new Set(greedyCalls.map((c) => c.trajectoryId)).size).toBe(2);
    expect(s.policy.calls.filter((c) => c.options.temperature === 0.7)).toHaveLength(s.policy.calls.length - 2);
    expect(answer.candidates).toHaveLength(4);
  });

  it("shares the prefix: a tree evaluates fewer tokens than linear decoding for the same candidates", async () => {
    const tree = scripted(probeThenAnswer, ANSWERS);
    const linear = scripted(probeThenAnswer, ANSWERS);
    const a = await tree.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 8, branching: 2 });
    const b = await linear.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 8 });
    expect(a.candidates).toHaveLength(8);
    expect(b.candidates).toHaveLength(8);
    expect(a.usage.evaluatedTokens).toBeLessThan(b.usage.evaluatedTokens);
    expect(a.usage.generatedTokens).toBeLessThan(b.usage.generatedTokens);
    const promptLength = [...tree.policy.calls[0]!.prompt].length;
    expect(a.usage.promptTokens).toBe(promptLength);
  });

  it("keeps spawning from the root when children finish without probing, so exactly `candidates` leaves finish", async () => {
    const s = scripted(
      byState((_text, n) => final(FINALS[n % 3]!)),
      ANSWERS,
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 5, branching: 2 }, { sink: log.sink });
    expect(answer.candidates).toHaveLength(5);
    expect(answer.shortfall).toBeUndefined();
    expect(log.of("branch").filter((b) => b.parent === "R")).toHaveLength(5);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("spends budget given back on the shallowest node that still has room for a child", async () => {
    // root children get quotas 2,2,2; R.0 answers at once (giving one back), R.1 and R.2 probe and keep a free child slot
    const s = scripted(
      byState((text, n) => (probesIn(text) === 0 ? (n === 0 ? final("SELECT COUNT(*) FROM t", "x".repeat(60)) : probe(`SELECT ${n}`)) : final(FINALS[n % 3]!))),
      ANSWERS,
      { policy: { tokenDelayMs: 1 } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 6, branching: 3 }, { sink: log.sink });
    expect(answer.candidates).toHaveLength(6);
    const childrenOf = (p: string): number => log.of("branch").filter((b) => b.parent === p).length;
    expect(childrenOf("R")).toBe(3);
    expect([childrenOf("R.1"), childrenOf("R.2")].sort()).toEqual([2, 3]);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("respawns a leaf's spare budget below its nearest held node, not from the root", async () => {
    // root children get quotas 4,4,4; each probes and forks 2,1,1; the quota-2 child answers at once, and its spare leaf
    // must re-sample only what follows that probe's result: a fourth child of the node, not a new child of the root
    const s = scripted(probeThenAnswer, ANSWERS);
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 12, branching: 3 }, { sink: log.sink });
    expect(answer.candidates).toHaveLength(12);
    const childrenOf = (p: string): number => log.of("branch").filter((b) => b.parent === p).length;
    expect(childrenOf("R")).toBe(3);
    expect(["R.0", "R.1", "R.2"].map(childrenOf)).toEqual([4, 4, 4]);
    expect(answer.candidates.every((c) => c.path.split(".").length === 3)).toBe(true);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("spends budget that comes back to the root on as many children as there are free sequences", async () => {
    // nobody probes: the root's first two children (quotas 8, 8) end as single leaves, and their 14 spare leaves
    // run side by side instead of `branching` at a time
    const s = scripted(
      byState((_text, n) => final(FINALS[n % 3]!, n < 2 ? "x".repeat(200 * (n + 1)) : "done")),
      ANSWERS,
      { policy: { tokenDelayMs: 1 } },
    );
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 16, branching: 2 }, { sink: log.sink });
    expect(answer.candidates).toHaveLength(16);
    const order = log.events.filter((e) => e.type === "branch" || e.type === "candidate").map((e) => e.type);
    const first = order.indexOf("candidate");
    const second = order.indexOf("candidate", first + 1);
    expect(second - first - 1, "children started between the first leaf and the next").toBe(7);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("allocates the budget through deeper probes without overshooting", async () => {
    // every segment probes until the third probe, then answers: quota must still land on exactly 16 leaves
    const s = scripted(
      byState((text, n) => (probesIn(text) < 3 ? probe(`SELECT ${1 + (n % 2)}`) : final(FINALS[n % 3]!))),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 16, branching: 3 });
    expect(answer.candidates).toHaveLength(16);
    expect(new Set(answer.candidates.map((c) => c.path)).size).toBe(16);
    expect(Math.max(...answer.candidates.map((c) => c.path.split(".").length - 1))).toBeGreaterThanOrEqual(3);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("never holds more live trajectories than the policy's sequences, forking fewer children when none is free", async () => {
    const s = scripted(
      byState((text, n) => (probesIn(text) < 2 ? probe(`SELECT ${1 + (n % 2)}`) : final(FINALS[n % 3]!))),
      ANSWERS,
      {
        policy: { maxSequences: 3, tokenDelayMs: 1 },
      },
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 9, branching: 3 });
    expect(answer.candidates).toHaveLength(9);
    expect(s.peakLive()).toBeLessThanOrEqual(3);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it.each([1, 2, 3, 4, 6])("finishes exactly `candidates` leaves under random shapes with %i sequences, never holding more", async (maxSequences) => {
    for (let trial = 0; trial < 10; trial++) {
      let state = 1234567 + trial * 7919 + maxSequences;
      const random = (): number => {
        state = (Math.imul(state, 1103515245) + 12345) >>> 0;
        return state / 2 ** 32;
      };
      const candidates = 1 + Math.floor(random() * 12);
      const branching = 2 + Math.floor(random() * 3);
      const prune = random() < 0.5;
      const s = scripted(
        byState((text) => {
          const r = random();
          if (probesIn(text) < 4 && r < 0.55) return probe(`SELECT ${1 + Math.floor(random() * 3)}`, "t".repeat(1 + Math.floor(random() * 8)));
          return final(FINALS[Math.floor(random() * 3)]!, "u".repeat(1 + Math.floor(random() * 8)));
        }),
        ANSWERS,
        { policy: { maxSequences, tokenDelayMs: trial % 5 === 0 ? 1 : 0 }, execDelayMs: trial % 2 },
      );
      const answer = await s.decode({ dbPath: "/db", question: "q", strategy: prune ? "tree-prune" : "tree", candidates, branching });
      if (answer.candidates.length !== candidates) expect(answer.shortfall).toBeTruthy();
      if (!prune) expect(answer.candidates).toHaveLength(candidates);
      expect(new Set(answer.candidates.map((c) => c.path)).size).toBe(answer.candidates.length);
      expect(s.peakLive()).toBeLessThanOrEqual(maxSequences);
      expect(s.policy.liveTrajectories()).toBe(0);
    }
  });

  it("still finishes every candidate with a single sequence (the root's trajectory is taken over)", async () => {
    const s = scripted(probeThenAnswer, ANSWERS, { policy: { maxSequences: 1 } });
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 3, branching: 3 });
    expect(answer.candidates).toHaveLength(3);
    expect(s.peakLive()).toBe(1);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("votes over the tree's leaves by executed result", async () => {
    const s = scripted(probeThenAnswer, ANSWERS);
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", candidates: 6, branching: 3 });
    const winner = answer.candidates[answer.winner!]!;
    const sizes = new Map<number, number>();
    for (const c of answer.candidates) if (c.group !== null) sizes.set(c.group, (sizes.get(c.group) ?? 0) + 1);
    expect(winner.votes).toBe(Math.max(...sizes.values()));
    expect(answer.result).toEqual(winner.result);
  });
});

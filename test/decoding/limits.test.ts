import { describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { byState, eventLog, final, probe, probesIn, rows } from "./helpers.js";
import { scripted } from "./setup.js";

const ANSWERS = { "SELECT 1": rows([1]), "SELECT 2": rows([2]), "SELECT COUNT(*) FROM t": rows([7]) };
const slowThinker = byState((text, n) =>
  probesIn(text) === 0 ? probe(`SELECT ${1 + (n % 2)}`, "x".repeat(200)) : final("SELECT COUNT(*) FROM t", "y".repeat(200)),
);

describe.each(["linear", "tree", "tree-prune"] as const)("%s decoding under limits", (strategy) => {
  it("stops every live sequence within 100 ms of cancellation and frees them all", async () => {
    const s = scripted(slowThinker, ANSWERS, { policy: { tokenDelayMs: 2 } });
    const controller = new AbortController();
    const log = eventLog();
    const pending = s.decode({ dbPath: "/db", question: "q", strategy, candidates: 8 }, { signal: controller.signal, sink: log.sink });
    await new Promise((r) => setTimeout(r, 60));
    expect(s.policy.liveTrajectories()).toBeGreaterThan(1);
    const at = performance.now();
    controller.abort();
    const err = await pending.catch((e: unknown) => e);
    expect(performance.now() - at).toBeLessThan(100);
    expect(isReexError(err) && err.code).toBe("CANCELLED");
    expect(s.policy.liveTrajectories()).toBe(0);
    expect(log.of("prune").every((p) => p.reason === "cancelled")).toBe(true);
    expect(log.of("final")).toEqual([]);
  });

  it("honours the deadline: returns what finished, says why fewer, frees every sequence", async () => {
    const s = scripted(slowThinker, ANSWERS, { policy: { tokenDelayMs: 2 } });
    const at = performance.now();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy, candidates: 8, deadlineMs: 80 });
    expect(performance.now() - at).toBeLessThan(80 + 100);
    expect(answer.candidates.length).toBeLessThan(8);
    expect(answer.shortfall).toMatch(/deadline of 80 ms/);
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("stops spawning and stops live branches once the request's token budget is spent", async () => {
    const s = scripted(slowThinker, ANSWERS);
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy, candidates: 8, maxTotalTokens: 1000 }, { sink: log.sink });
    expect(answer.usage.generatedTokens).toBeLessThanOrEqual(1000 + 8);
    expect(answer.usage.generatedTokens).toBeGreaterThan(900);
    expect(answer.candidates.length).toBeLessThan(8);
    expect(answer.shortfall).toMatch(/budget of 1000 generated tokens/);
    const stops = log.of("prune").filter((p) => p.reason === "budget" || p.reason === "cancelled");
    expect(stops.length).toBeGreaterThan(0);
    expect(stops.every((p) => p.reason === "budget")).toBe(true);
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

describe("decoding failures", () => {
  it("releases every trajectory and rejects when the prompt does not fit the context", async () => {
    const s = scripted(slowThinker, ANSWERS, { policy: { contextSize: 20 } });
    for (const strategy of ["greedy", "linear", "tree", "tree-prune"] as const) {
      const err = await s.decode({ dbPath: "/db", question: "q", strategy, candidates: 4 }).catch((e: unknown) => e);
      expect(isReexError(err) && err.code).toBe("CONTEXT_EXHAUSTED");
      expect(s.policy.liveTrajectories()).toBe(0);
    }
  });

  it("turns a trajectory that fails mid-way into a candidate with its error", async () => {
    let calls = 0;
    const s = scripted(
      byState((text) => {
        if (calls++ === 1) throw new Error("backend fell over");
        return probesIn(text) === 0 ? probe("SELECT 1") : final("SELECT COUNT(*) FROM t");
      }),
      ANSWERS,
    );
    const answer = await s.decode({ dbPath: "/db", question: "q", strategy: "linear", candidates: 3 });
    expect(answer.candidates).toHaveLength(3);
    expect(answer.candidates.filter((c) => c.error !== undefined)).toHaveLength(1);
    expect(answer.sql).toBe("SELECT COUNT(*) FROM t");
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("rejects invalid requests with BAD_REQUEST", async () => {
    const s = scripted(slowThinker, ANSWERS);
    for (const req of [{ candidates: 0 }, { candidates: 1.5 }, { candidates: 33 }, { branching: 0 }, { temperature: -1 }, { topP: 0 }, { topP: 1.5 }]) {
      const err = await s.decode({ dbPath: "/db", question: "q", strategy: "tree", ...req }).catch((e: unknown) => e);
      expect(isReexError(err) && err.code).toBe("BAD_REQUEST");
    }
  });

  it("rejects with CANCELLED at once when the signal is already aborted", async () => {
    const s = scripted(slowThinker, ANSWERS);
    const err = await s.decode({ dbPath: "/db", question: "q", strategy: "tree" }, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect(isReexError(err) && err.code).toBe("CANCELLED");
    expect(s.policy.calls).toHaveLength(0);
    expect(s.policy.liveTrajectories()).toBe(0);
  });
});

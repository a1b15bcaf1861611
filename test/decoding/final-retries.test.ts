/** The decoder's `finalRetries` (config `agent.finalRetries`, default 1): a failing final SQL goes back to the model as a probe, except under tree-prune. */
import { describe, expect, it } from "vitest";
import { DEFAULT_DECODER_DEFAULTS } from "../../src/decoding/index.js";
import { byState, eventLog, final, probesIn, rows, sqlError } from "./helpers.js";
import { scripted } from "./setup.js";

const BAD = "SELECT COUNT(*) FROM tt";
const GOOD = "SELECT COUNT(*) FROM t";
const ANSWERS = { [BAD]: sqlError("no such table: tt"), [GOOD]: rows([7]) };
/** Answers BAD until it has read a result, then GOOD. */
const corrects = byState((text) => (probesIn(text) === 0 ? final(BAD) : final(GOOD)));

describe("decoder: a failing final SQL answered as a probe", () => {
  it("is on by default: greedy decoding answers with the SQL the model wrote after reading its error", async () => {
    expect(DEFAULT_DECODER_DEFAULTS.finalRetries).toBe(1);
    const s = scripted(corrects, ANSWERS);
    const log = eventLog();
    const answer = await s.decode({ dbPath: "/db", question: "how many?", strategy: "greedy" }, { sink: log.sink });
    expect(answer.sql).toBe(GOOD);
    expect(answer.result).toMatchObject({ ok: true, rows: [[7]] });
    expect(answer.candidates[0]).toMatchObject({ interactions: 1 });
    expect(log.of("probe").map((e) => e.sql)).toEqual([BAD]);
    expect(log.of("result")[0]).toMatchObject({ result: { ok: false } });
    expect(s.policy.liveTrajectories()).toBe(0);
  });

  it("keeps the failing answer with finalRetries 0", async () => {
    const s = scripted(corrects, ANSWERS, { deps: { defaults: { finalRetries: 0 } } });
    const answer = await s.decode({ dbPath: "/db", question: "how many?", strategy: "greedy" });
    expect(answer.sql).toBe(BAD);
    expect(answer.candidates[0]!.error).toMatch(/no such table: tt/);
  });

  it("leaves tree-prune to prune a branch whose final SQL fails", async () => {
    const s = scripted(corrects, ANSWERS, { deps: { defaults: { greedyBranch: false } } });
    const log = eventLog();
    const answer = await s.decode(
      { dbPath: "/db", question: "how many?", strategy: "tree-prune", candidates: 2, branching: 2, maxTotalTokens: 2000 },
      { sink: log.sink },
    );
    expect(log.of("probe")).toEqual([]);
    expect(log.of("prune").every((e) => e.reason === "sql_error")).toBe(true);
    expect(answer.sql).toBe(BAD);
  });

  it("retries the tree's greedy branch as greedy decoding would", async () => {
    const s = scripted(corrects, ANSWERS);
    const log = eventLog();
    await s.decode({ dbPath: "/db", question: "how many?", strategy: "tree-prune", candidates: 2, branching: 2, maxTotalTokens: 2000 }, { sink: log.sink });
    const retried = log.of("probe").filter((p) => p.retried);
    expect(retried.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retried.map((p) => p.path.split(".")[1]))).toEqual(new Set(["0"]));
  });
});

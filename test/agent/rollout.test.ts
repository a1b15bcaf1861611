import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildPrompt,
  continueRollout,
  createRolloutState,
  formatCheck,
  forkRollout,
  rollout,
  rolloutStep,
  runRollout,
  type RolloutOptions,
  type RolloutResult,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../src/agent/index.js";
import { LIMIT_FEEDBACK, REPEAT_LIMIT_FEEDBACK, REPEATED_PROBE_FEEDBACK } from "../../src/agent/testing.js";
import type { ReexEvent } from "../../src/events/index.js";
import { ExecutorPool, type Executor } from "../../src/sql/index.js";
import { FakePolicy, SAMPLED_LOGPROB, byTurn, type Responder } from "./fake-policy.js";
import { CountingExecutor } from "../helpers/executor.js";

let dir: string;
let dbPath: string;
let pool: ExecutorPool;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-agent-"));
  dbPath = join(dir, "concerts.sqlite");
  const db = new Database(dbPath);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, year INTEGER, singer_id INTEGER REFERENCES singer(singer_id));
    INSERT INTO singer VALUES (1, 'Ann', 'France', 31), (2, 'Bob', 'France', 42), (3, 'Cid', 'Spain', 19), (4, 'Dee', 'France', 55), (5, 'Eve', 'Italy', 23);
    INSERT INTO concert VALUES (1, 'Summer', 2014, 1), (2, 'Winter', 2015, 2), (3, 'Spring', 2015, 1);
  `);
  db.close();
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

function prompt() {
  return buildPrompt({
    family: "execution-aware",
    schema: "singer.singer_id (integer)\nsinger.name (text)\nsinger.country (text)\nsinger.age (integer)",
    question: "How many singers are from France?",
  });
}

async function run(responder: Responder, options: Partial<RolloutOptions> = {}, policyOptions: { delayMs?: number; runOn?: string } = {}) {
  const policy = new FakePolicy(responder, policyOptions);
  const executor = options.executor instanceof CountingExecutor ? options.executor : new CountingExecutor(pool);
  const events: ReexEvent[] = [];
  const result = await runRollout(policy, prompt(), resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, sink: (e) => events.push(e), ...options }));
  return { result, events, executor, policy };
}

/** Checks the record against the text (characters are tokens): injected blocks marked 0, the rest 1. */
function injectedMarked(result: RolloutResult): boolean {
  const text = result.text;
  expect(result.record.tokens).toEqual([...text].map((c) => c.codePointAt(0)));
  const expected = [...text].map(() => 1);
  const mark = (re: RegExp): void => {
    for (const m of text.matchAll(re)) {
      const start = [...text.slice(0, m.index)].length;
      for (let i = 0; i < [...m[0]].length; i++) expected[start + i] = 0;
    }
  };
  mark(/<result>\n[\s\S]*?\n<\/result>\n/g);
  mark(new RegExp(`(?<=${LIMIT_FEEDBACK.replace(/[.;]/g, "\\$&")}\\n</result>\\n)<final_sql>`, "g"));
  expect(result.record.sampled).toEqual(expected);
  return true;
}

const probeThenFinal = byTurn([
  "<think>Find the French singers first.</think>\n<intermediate_sql>SELECT name FROM singer WHERE country = 'France'</intermediate_sql>",
  "<think>Three rows, so count them.</think>\n<final_sql>SELECT COUNT(*) FROM singer WHERE country = 'France';</final_sql>",
]);

describe("rollout with a scripted policy and a real SQLite file", () => {
  it("executes a probe, injects its result as unsampled text and reads the final SQL", async () => {
    const { result, executor, policy } = await run(probeThenFinal);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
    expect(result.answerable).toBe(true);
    expect(result.stopReason).toBe("final");
    expect(result.truncated).toBe(false);
    expect(result.interactions).toBe(1);
    expect(executor.calls).toEqual(["SELECT name FROM singer WHERE country = 'France'"]);
    expect(result.probes).toHaveLength(1);
    expect(result.probes[0]).toMatchObject({ step: 1, repeated: false, overLimit: false, feedback: "name\nAnn\nBob\nDee" });
    expect(result.probes[0]!.result).toMatchObject({ ok: true, columns: ["name"] });
    expect(result.text).toContain("</intermediate_sql><result>\nname\nAnn\nBob\nDee\n</result>\n<think>Three rows");
    expect(injectedMarked(result)).toBe(true);
    expect(result.meanLogprob).toBeCloseTo(SAMPLED_LOGPROB);
    expect(result.promptTokens.length).toBeGreaterThan(0);
    expect(formatCheck(result.text, "execution-aware")).toEqual({ ok: true, problems: [] });
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("still answers a probe when the stop token ran on past the closing tag", async () => {
    const { result, executor } = await run(probeThenFinal, {}, { runOn: " <" });
    expect(executor.calls).toHaveLength(1);
    expect(result.text).toContain("</intermediate_sql> <<result>\n");
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
  });

  it("feeds SQL errors back with their category and lets the model revise", async () => {
    const { result } = await run(
      byTurn([
        "<think>t</think><intermediate_sql>SELECT nme FROM singer</intermediate_sql>",
        "<think>typo</think><final_sql>SELECT name FROM singer</final_sql>",
      ]),
    );
    expect(result.probes[0]!.result).toMatchObject({ ok: false, error: { category: "missing_column" } });
    expect(result.probes[0]!.feedback).toBe("Error (missing_column): no such column: nme\nsinger columns: singer_id, name, country, age");
    expect(result.finalSql).toBe("SELECT name FROM singer");
  });

  it("lists the database's tables after a missing-table error, and leaves name hints out when schemaHints is false", async () => {
    const script = byTurn([
      "<think>t</think><intermediate_sql>SELECT COUNT(*) FROM singers</intermediate_sql>",
      "<think>t</think><intermediate_sql>SELECT nme FROM singer</intermediate_sql>",
      "<think>t</think><final_sql>SELECT name FROM singer</final_sql>",
    ]);
    const hinted = await run(script);
    expect(hinted.result.probes.map((p) => p.feedback)).toEqual([
      "Error (missing_table): no such table: singers\nTables: singer, concert",
      "Error (missing_column): no such column: nme\nsinger columns: singer_id, name, country, age",
    ]);
    const plain = await run(script, { schemaHints: false });
    expect(plain.result.probes.map((p) => p.feedback)).toEqual([
      "Error (missing_table): no such table: singers",
      "Error (missing_column): no such column: nme",
    ]);
  });

  it("shows what the feedback mode allows", async () => {
    const { result } = await run(probeThenFinal, { feedback: "row-count" });
    expect(result.probes[0]!.feedback).toBe("3 rows");
    expect(result.text).toContain("<result>\n3 rows\n</result>\n");
  });

  it("respects the interaction limit: later probes are not executed and the final SQL is forced", async () => {
    let n = 0;
    const responder: Responder = (response) => {
      if (response.endsWith("<final_sql>")) return "SELECT COUNT(*) FROM singer</final_sql>";
      n++;
      return `<think>try ${n}</think><intermediate_sql>SELECT ${n} FROM singer</intermediate_sql>`;
    };
    const { result, executor, events } = await run(responder, { maxInteractions: 2 });
    expect(executor.calls).toEqual(["SELECT 1 FROM singer", "SELECT 2 FROM singer"]);
    expect(result.interactions).toBe(2);
    expect(result.probes.map((p) => [p.step, p.overLimit])).toEqual([
      [1, false],
      [2, false],
      [3, true],
    ]);
    expect(result.probes[2]).toMatchObject({ sql: "SELECT 3 FROM singer", result: null, feedback: LIMIT_FEEDBACK });
    expect(result.text).toContain(`<result>\n${LIMIT_FEEDBACK}\n</result>\n<final_sql>SELECT COUNT(*) FROM singer</final_sql>`);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer");
    expect(result.stopReason).toBe("final");
    expect(injectedMarked(result)).toBe(true);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
    expect(events.filter((e) => e.type === "probe")).toHaveLength(2);
  });

  it("with maxInteractions 0 executes nothing and forces the final after the first probe", async () => {
    const { result, executor } = await run(
      (response) => (response.endsWith("<final_sql>") ? "SELECT 1</final_sql>" : "<think>a</think><intermediate_sql>SELECT 2</intermediate_sql>"),
      { maxInteractions: 0 },
    );
    expect(executor.calls).toEqual([]);
    expect(result.finalSql).toBe("SELECT 1");
  });

  it("detects a repeated probe, does not execute it again and counts the interaction", async () => {
    const { result, executor, events } = await run(
      byTurn([
        "<think>a</think><intermediate_sql>SELECT name FROM singer WHERE age > 30</intermediate_sql>",
        "<think>again</think><intermediate_sql>select name  from singer where age>30;</intermediate_sql>",
        "<think>ok</think><final_sql>SELECT COUNT(*) FROM singer WHERE age > 30</final_sql>",
      ]),
    );
    expect(executor.calls).toHaveLength(1);
    expect(result.interactions).toBe(2);
    expect(result.probes[1]).toMatchObject({ repeated: true, feedback: REPEATED_PROBE_FEEDBACK, step: 2 });
    expect(result.probes[1]!.result).toBe(result.probes[0]!.result);
    expect(result.text).toContain(`<result>\n${REPEATED_PROBE_FEEDBACK}\n</result>\n`);
    const resultEvents = events.filter((e) => e.type === "result");
    expect(resultEvents.map((e) => (e.type === "result" ? e.feedback : ""))).toEqual([result.probes[0]!.feedback, REPEATED_PROBE_FEEDBACK]);
  });

  it("with repeatLimit 2, answers the second repeated probe by opening the final SQL for the model", async () => {
    const probe = "<think>a</think><intermediate_sql>SELECT name FROM singer WHERE age > 30</intermediate_sql>";
    const { result, executor } = await run((response) => (response.endsWith("<final_sql>") ? "SELECT name FROM singer</final_sql>" : probe), {
      repeatLimit: 2,
    });
    expect(executor.calls).toHaveLength(1);
    expect(result.probes.map((p) => [p.repeated, p.feedback === REPEATED_PROBE_FEEDBACK])).toEqual([
      [false, false],
      [true, true],
      [true, false],
    ]);
    expect(result.probes[2]!.feedback).toBe(REPEAT_LIMIT_FEEDBACK);
    expect(result.text).toContain(`<result>\n${REPEAT_LIMIT_FEEDBACK}\n</result>\n<final_sql>SELECT name FROM singer</final_sql>`);
    expect(result.finalSql).toBe("SELECT name FROM singer");
    // off by default: repeats are answered until the interaction limit
    const off = await run((response) => (response.endsWith("<final_sql>") ? "SELECT name FROM singer</final_sql>" : probe), { maxInteractions: 3 });
    expect(off.result.probes.map((p) => p.feedback === REPEATED_PROBE_FEEDBACK)).toEqual([false, true, true, false]);
    expect(off.result.probes[3]!.overLimit).toBe(true);
  });

  it("stops at the token budget, counted across generate calls, and reports truncation", async () => {
    const { result, policy } = await run(probeThenFinal, { maxTokens: 150 });
    const firstLen = [...probeThenFinal("", "")].length;
    expect(policy.generateCalls.map((c) => c.maxTokens)).toEqual([150, 150 - firstLen]);
    expect(result.record.sampled.filter((s) => s === 1)).toHaveLength(150);
    expect(result.stopReason).toBe("maxTokens");
    expect(result.truncated).toBe(true);
    expect(result.finalSql).toBeNull();
    expect(result.interactions).toBe(1);
  });

  it("with a token reserve closes an endless think and makes the model answer inside the reserve", async () => {
    const responder: Responder = (response) => (response.endsWith("<final_sql>") ? "SELECT COUNT(*) FROM singer</final_sql>" : `<think>${"x".repeat(500)}`);
    const { result, policy } = await run(responder, { maxTokens: 120, finalReserve: 40 });
    expect(policy.generateCalls.map((c) => c.maxTokens)).toEqual([80, 40]);
    expect(result.text).toContain(`${"x".repeat(73)}</think>\n<final_sql>SELECT COUNT(*) FROM singer</final_sql>`);
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer");
    expect(result.stopReason).toBe("final");
    expect(result.truncated).toBe(false);
    // the closing tag and the opened final are injected: unsampled
    const sampled = result.record.sampled.filter((x) => x === 1).length;
    expect(sampled).toBe(80 + "SELECT COUNT(*) FROM singer</final_sql>".length);
    expect(formatCheck(result.text, "execution-aware").ok).toBe(true);
  });

  it("with a token reserve lets a final SQL the model already opened go on", async () => {
    const script = `<think>${"y".repeat(40)}</think><final_sql>SELECT name FROM singer WHERE country = 'France'</final_sql>`;
    const responder: Responder = (response) => (script.startsWith(response) ? script.slice(response.length) : "");
    const { result, policy } = await run(responder, { maxTokens: 160, finalReserve: 80 });
    expect(policy.generateCalls.map((c) => c.maxTokens)).toEqual([80, 80]);
    expect(result.text).toBe(script);
    expect(result.finalSql).toBe("SELECT name FROM singer WHERE country = 'France'");
  });

  it("with a token reserve still reports truncation when the answer outruns it", async () => {
    const responder: Responder = (response) => (response.endsWith("<final_sql>") ? "SELECT " + "1 + ".repeat(50) : `<think>${"x".repeat(500)}`);
    const { result } = await run(responder, { maxTokens: 100, finalReserve: 20 });
    expect(result.stopReason).toBe("maxTokens");
    expect(result.truncated).toBe(true);
    expect(result.finalSql).toBeNull();
  });

  it("does not execute a probe cut off by the budget", async () => {
    const { result, executor } = await run(probeThenFinal, { maxTokens: 60 });
    expect(executor.calls).toEqual([]);
    expect(result.truncated).toBe(true);
    expect(result.probes).toEqual([]);
  });

  it("stops promptly when aborted during generation", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    const long: Responder = () => `<think>${"x".repeat(5000)}</think><final_sql>SELECT 1</final_sql>`;
    const { result } = await run(long, { signal: controller.signal }, { delayMs: 1 });
    expect(result.stopReason).toBe("aborted");
    expect(result.finalSql).toBeNull();
    expect(result.text.length).toBeLessThan(5000);
  });

  it("does not inject a result once aborted at a probe", async () => {
    const controller = new AbortController();
    const seen: ReexEvent[] = [];
    const { result } = await run(probeThenFinal, {
      signal: controller.signal,
      sink: (e) => {
        if (e.type === "probe") controller.abort();
        seen.push(e);
      },
    });
    expect(result.stopReason).toBe("aborted");
    expect(result.text).not.toContain("<result>");
    expect(result.probes).toEqual([]);
    expect(seen.some((e) => e.type === "probe")).toBe(true);
    expect(seen.some((e) => e.type === "result")).toBe(false);
  });

  it("keeps going when an event consumer throws", async () => {
    const { result } = await run(probeThenFinal, {
      sink: () => {
        throw new Error("socket closed");
      },
    });
    expect(result.finalSql).toBe("SELECT COUNT(*) FROM singer WHERE country = 'France'");
  });

  it("reports an unanswerable question and executes nothing written after it", async () => {
    const { result, executor } = await run(
      byTurn([
        "<think>There is no salary column.</think>\n<final_sql>UNANSWERABLE: the database has no salary data</final_sql>\n<intermediate_sql>SELECT salary FROM singer</intermediate_sql>",
      ]),
    );
    expect(result).toMatchObject({ finalSql: null, answerable: false, reason: "the database has no salary data", stopReason: "final" });
    expect(result.probes).toEqual([]);
    expect(executor.calls).toEqual([]);
    expect(result.text.trimEnd().endsWith("</final_sql>")).toBe(true);
  });

  it("emits token, probe, result (and final on request) events in order", async () => {
    const { result, events } = await run(probeThenFinal, { path: "root", emitFinal: true });
    const kinds = events.map((e) => e.type).filter((t, i, all) => t !== "token" || all[i - 1] !== "token");
    expect(kinds).toEqual(["token", "probe", "result", "token", "final"]);
    const tokens = events.flatMap((e) => (e.type === "token" ? [e.text] : [])).join("");
    expect(tokens).toBe(result.text.replace(/<result>\n[\s\S]*?\n<\/result>\n/g, ""));
    expect(events.every((e) => e.type === "final" || ("path" in e && e.path === "root"))).toBe(true);
    expect(events.find((e) => e.type === "probe")).toEqual({ type: "probe", path: "root", step: 1, sql: "SELECT name FROM singer WHERE country = 'France'" });
    expect(events.at(-1)).toEqual({ type: "final", sql: result.finalSql, answerable: true });
  });

  it("for the standard family writes through probes without executing them", async () => {
    const { result, executor } = await run(byTurn(["<think>a</think><intermediate_sql>SELECT 1</intermediate_sql><final_sql>SELECT 2</final_sql>"]), {
      family: "standard",
    });
    expect(executor.calls).toEqual([]);
    expect(result.finalSql).toBe("SELECT 2");
    expect(result.interactions).toBe(0);
  });

  it("ends cleanly when the model stops without a probe or a final tag", async () => {
    const { result } = await run(byTurn(["<think>a</think>\nSELECT name FROM singer;"]));
    expect(result).toMatchObject({ stopReason: "end", finalSql: "SELECT name FROM singer", truncated: false });
  });

  it("accepts an answer whose closing tag never came when the model ended its turn", async () => {
    const { result } = await run(byTurn(["<think>a</think><final_sql>SELECT name FROM singer"]));
    expect(result).toMatchObject({ stopReason: "end", finalSql: "SELECT name FROM singer" });
  });

  it("passes the segment grammars: first, then later segments, then the forced final body", async () => {
    const responder: Responder = (response) =>
      response.endsWith("<final_sql>") ? "SELECT 1</final_sql>" : "<think>a</think><intermediate_sql>SELECT 1</intermediate_sql>";
    const { policy } = await run(responder, { maxInteractions: 1, grammar: { first: "G1", segment: "G2", finalBody: "G3" } });
    expect(policy.generateCalls.map((c) => c.grammar)).toEqual(["G1", "G2", "G3"]);
    expect(policy.generateCalls.map((c) => c.stop)).toEqual([
      ["</intermediate_sql>", "</final_sql>"],
      ["</intermediate_sql>", "</final_sql>"],
      ["</final_sql>"],
    ]);
  });

  it("turns an executor failure into an error stop and an error event", async () => {
    const broken: Executor = {
      execute: async () => {
        throw new Error("pool closed");
      },
      close: async () => {},
    };
    const policy = new FakePolicy(probeThenFinal);
    const events: ReexEvent[] = [];
    const result = await runRollout(policy, prompt(), resolveRolloutOptions({ ...OWN_ANSWERS, executor: broken, dbPath, sink: (e) => events.push(e) }));
    expect(result.stopReason).toBe("error");
    expect(result.error).toEqual({ code: "INTERNAL", message: "pool closed" });
    expect(events.at(-1)).toMatchObject({ type: "error", code: "INTERNAL" });
    expect(policy.liveTrajectories()).toBe(0);
  });
});

describe("resuming a rollout from a fork", () => {
  it("forks after a probe result and continues parent and child independently", async () => {
    const responder: Responder = (response, id) => {
      if (!response.includes("</result>")) return "<think>a</think><intermediate_sql>SELECT name FROM singer WHERE age > 40</intermediate_sql>";
      return `<think>branch ${id}</think><final_sql>SELECT '${id}'</final_sql>`;
    };
    const policy = new FakePolicy(responder);
    const executor = new CountingExecutor(pool);
    const options: RolloutOptions = resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath });
    const parent = await policy.start(policy.renderChat(prompt().messages, { sharedPrefix: prompt().sharedPrefix }));
    const state = createRolloutState();
    const step = await rolloutStep(parent, state, options);
    expect(step.kind).toBe("probe");
    expect(state.interactions).toBe(1);

    const child = await forkRollout(parent, state);
    const [a, b] = await Promise.all([continueRollout(parent, state, options), continueRollout(child.trajectory, child.state, { ...options, path: "child" })]);
    expect(a.finalSql).toBe(`SELECT '${parent.id}'`);
    expect(b.finalSql).toBe(`SELECT '${child.trajectory.id}'`);
    expect(b.path).toBe("child");
    expect(executor.calls).toHaveLength(1);
    expect(a.probes).toEqual(b.probes);
    const shared = a.text.indexOf("</result>\n") + "</result>\n".length;
    expect(b.text.slice(0, shared)).toBe(a.text.slice(0, shared));
    expect(b.record.tokens.slice(0, shared)).toEqual(a.record.tokens.slice(0, shared));
    expect(a.text).not.toBe(b.text);
    await parent.release();
    await child.trajectory.release();
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("rollout() on a started trajectory equals runRollout", async () => {
    const policy = new FakePolicy(probeThenFinal);
    const trajectory = await policy.start(policy.renderChat(prompt().messages));
    const result = await rollout(trajectory, resolveRolloutOptions({ ...OWN_ANSWERS, executor: new CountingExecutor(pool), dbPath }));
    await trajectory.release();
    const { result: other } = await run(probeThenFinal);
    expect(result.text).toBe(other.text);
    expect(result.finalSql).toBe(other.finalSql);
  });
});

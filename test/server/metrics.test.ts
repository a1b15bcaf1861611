import { afterEach, describe, expect, it } from "vitest";
import { Counter, Gauge, Histogram, MetricsRegistry } from "../../src/server/testing.js";
import { makeApp, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("metrics", () => {
  it("renders counters, gauges and histograms in the Prometheus text format", () => {
    const r = new MetricsRegistry();
    const c = r.register(new Counter("a_total", "A."));
    const g = r.register(new Gauge("g", "G."));
    const h = r.register(new Histogram("h_seconds", "H.", [0.1, 1]));
    c.inc({ route: '/x"y', status: "200" }, 2);
    g.set(3);
    h.observe(0.5, { route: "/x" });
    h.observe(2, { route: "/x" });
    expect(r.render()).toBe(
      [
        "# HELP a_total A.",
        "# TYPE a_total counter",
        'a_total{route="/x\\"y",status="200"} 2',
        "# HELP g G.",
        "# TYPE g gauge",
        "g 3",
        "# HELP h_seconds H.",
        "# TYPE h_seconds histogram",
        'h_seconds_bucket{route="/x",le="0.1"} 0',
        'h_seconds_bucket{route="/x",le="1"} 1',
        'h_seconds_bucket{route="/x",le="+Inf"} 2',
        'h_seconds_sum{route="/x"} 2.5',
        'h_seconds_count{route="/x"} 2',
        "",
      ].join("\n"),
    );
  });

  it("GET /metrics counts requests by route template and status, tokens, probes and live sequences", async () => {
    t = await makeApp();
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    await t.app.inject({ method: "GET", url: `/v1/databases/${t.dbId}` });
    await t.app.inject({ method: "GET", url: "/v1/databases/missing" });
    const res = await t.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toContain("text/plain");
    const text = res.body;
    expect(text).toContain('reex_requests_total{route="/v1/sql",status="200"} 1');
    expect(text).toContain('reex_requests_total{route="/v1/databases/:id",status="200"} 1');
    expect(text).toContain('reex_requests_total{route="/v1/databases/:id",status="404"} 1');
    expect(text).toContain('reex_request_duration_seconds_count{route="/v1/sql"} 1');
    expect(text).toContain('reex_tokens_total{kind="generated"} 30');
    expect(text).toContain('reex_tokens_total{kind="prompt"} 120');
    expect(text).toContain("reex_probes_total 1");
    expect(text).toContain("# TYPE reex_sql_timeouts_total counter");
    expect(text).toContain("reex_queue_depth 0");
    expect(text).toContain("reex_live_sequences 0");
  });

  it("counts drafted and accepted tokens and forward passes saved by speculative decoding, and the answer's usage carries them", async () => {
    t = await makeApp({
      deps: {
        decode: async () => ({
          sql: null,
          answerable: false,
          candidates: [],
          winner: null,
          decidedBy: "none",
          usage: { promptTokens: 5, evaluatedTokens: 9, generatedTokens: 20, draftedTokens: 12, acceptedTokens: 9, forwardPassesSaved: 8 },
          timings: { totalMs: 1 },
        }),
      },
    });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.json().usage).toEqual({ promptTokens: 5, evaluatedTokens: 9, generatedTokens: 20, draftedTokens: 12, acceptedTokens: 9, forwardPassesSaved: 8 });
    const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toContain('reex_tokens_total{kind="drafted"} 12');
    expect(text).toContain('reex_tokens_total{kind="accepted"} 9');
    expect(text).toContain("reex_forward_passes_saved_total 8");
  });

  it("counts final SQL that failed and went back to the model as probes, apart from the other probes", async () => {
    t = await makeApp({
      deps: {
        decode: async (_req, ctx) => {
          ctx.sink?.({ type: "probe", path: "0", step: 1, sql: "SELECT 1" });
          ctx.sink?.({ type: "probe", path: "0", step: 2, sql: "SELECT nope FROM t", retried: true });
          return {
            sql: null,
            answerable: false,
            candidates: [],
            winner: null,
            decidedBy: "none",
            usage: { promptTokens: 1, evaluatedTokens: 1, generatedTokens: 1 },
            timings: { totalMs: 1 },
          };
        },
      },
    });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toContain("reex_probes_total 2");
    expect(text).toContain("reex_final_retries_total 1");
  });

  it("counts final SQL rebound to the tables that hold its columns, and shows each candidate's swaps in the answer", async () => {
    const swaps = [{ from: "singers", to: "concert" }];
    t = await makeApp({
      deps: {
        decode: async (_req, ctx) => {
          ctx.sink?.({ type: "repair", path: "0", sql: "SELECT venue FROM singers", repaired: "SELECT venue FROM concert", swaps });
          return {
            sql: "SELECT venue FROM concert",
            answerable: true,
            result: { ok: true, columns: ["venue"], rows: [["Arena"]], rowCount: 1, truncated: false, empty: false, elapsedMs: 1 },
            candidates: [
              {
                index: 0,
                path: "0",
                sql: "SELECT venue FROM concert",
                answerable: true,
                group: 0,
                votes: 1,
                interactions: 0,
                repairs: swaps,
                meanLogprob: Number.NaN,
                text: "",
              },
            ],
            winner: 0,
            decidedBy: "majority",
            usage: { promptTokens: 1, evaluatedTokens: 1, generatedTokens: 1 },
            timings: { totalMs: 1 },
          };
        },
      },
    });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.json().candidates[0].repairs).toEqual(swaps);
    const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toContain("reex_final_repairs_total 1");
    expect(text).not.toMatch(/reex_final_retries_total [1-9]/);
  });

  it("counts final SQL given what the question names and left out, apart from literal repairs, and shows each candidate's additions", async () => {
    const coverage = [{ rule: "condition" as const, from: "", to: "country = 'AU'" }];
    const sql = "SELECT COUNT(*) FROM customers WHERE tier = 'G' AND country = 'AU'";
    t = await makeApp({
      deps: {
        decode: async (_req, ctx) => {
          ctx.sink?.({ type: "repair", path: "0", sql: "SELECT COUNT(*) FROM customers WHERE tier = 'G'", repaired: sql, swaps: [], coverage });
          return {
            sql,
            answerable: true,
            result: { ok: true, columns: ["COUNT(*)"], rows: [[2]], rowCount: 1, truncated: false, empty: false, elapsedMs: 1 },
            candidates: [{ index: 0, path: "0", sql, answerable: true, group: 0, votes: 1, interactions: 0, coverage, meanLogprob: Number.NaN, text: "" }],
            winner: 0,
            decidedBy: "majority",
            usage: { promptTokens: 1, evaluatedTokens: 1, generatedTokens: 1 },
            timings: { totalMs: 1 },
          };
        },
      },
    });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.json().candidates[0].coverage).toEqual(coverage);
    const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
    expect(text).toContain("reex_final_coverage_repairs_total 1");
    expect(text).not.toMatch(/reex_final_literal_repairs_total [1-9]/);
    expect(text).not.toMatch(/reex_final_repairs_total [1-9]/);
  });

  it("counts SQL timeouts seen in probe results", async () => {
    t = await makeApp({
      deps: {
        decode: async (_req, ctx) => {
          ctx.sink?.({ type: "probe", path: "0", step: 1, sql: "WITH RECURSIVE ..." });
          ctx.sink?.({
            type: "result",
            path: "0",
            step: 1,
            result: { ok: false, error: { code: "SQL_TIMEOUT", category: "timeout", message: "stopped" }, elapsedMs: 5000 },
            feedback: "timeout",
          });
          return {
            sql: null,
            answerable: false,
            candidates: [],
            winner: null,
            decidedBy: "none",
            usage: { promptTokens: 1, evaluatedTokens: 1, generatedTokens: 1 },
            timings: { totalMs: 1 },
          };
        },
      },
    });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.json()).toMatchObject({ sql: null, answerable: false, result: null, candidates: [] });
    expect((await t.app.inject({ method: "GET", url: "/metrics" })).body).toContain("reex_sql_timeouts_total 1");
  });

  it("counts a candidate's final-SQL timeout by its code, not by words in its message", async () => {
    t = await makeApp({
      deps: {
        decode: async (_req, ctx) => {
          ctx.sink?.({
            type: "candidate",
            path: "0",
            index: 0,
            sql: "SELECT 1",
            ok: false,
            error: "SQL_TIMEOUT: stopped after 5000 ms",
            errorCode: "SQL_TIMEOUT",
            answerable: true,
          });
          ctx.sink?.({
            type: "candidate",
            path: "1",
            index: 1,
            sql: "SELECT 2",
            ok: false,
            error: "SQL_ERROR: no such column: SQL_TIMEOUT",
            errorCode: "SQL_ERROR",
            answerable: true,
          });
          return {
            sql: null,
            answerable: false,
            candidates: [],
            winner: null,
            decidedBy: "none",
            usage: { promptTokens: 1, evaluatedTokens: 1, generatedTokens: 1 },
            timings: { totalMs: 1 },
          };
        },
      },
    });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect((await t.app.inject({ method: "GET", url: "/metrics" })).body).toContain("reex_sql_timeouts_total 1");
  });
});

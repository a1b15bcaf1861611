import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseConfig } from "../../src/config/index.js";
import { createDecoder } from "../../src/decoding/index.js";
import { ReexError } from "../../src/errors/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { ScriptedDecoder, listen, makeApp, until, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

describe("POST /v1/sql", () => {
  it("answers with the SQL, its result, candidates with votes, usage and timings", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "Who is older than 30?" } });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      sql: "SELECT name FROM singer WHERE age > 30",
      answerable: true,
      winner: 0,
      result: { columns: ["name", "blob", "big"], rowCount: 2, truncated: false },
      candidates: [
        { index: 0, sql: "SELECT name FROM singer WHERE age > 30", votes: 1, group: 0 },
        { index: 1, sql: null, votes: 0, group: null, error: "SQL_NO_SUCH_COLUMN: no such column: nme" },
      ],
      usage: { promptTokens: 120, evaluatedTokens: 150, generatedTokens: 30 },
    });
    expect(body.result.rows[0]).toEqual(["Joe Sharp", { base64: "AQID" }, "9007199254740993"]);
    expect(body.result.rows[1]).toEqual(["Timbaland", null, 7]);
    expect(body.trace).toBeUndefined();
    expect(body.timings.totalMs).toBeGreaterThan(0);
    expect(typeof body.timings.queueMs).toBe("number");
  });

  it("passes the body's fields to the decoder as they are, and the registered file's path", async () => {
    t = await makeApp({ decoding: { strategy: "tree-prune", candidates: 8 } });
    await t.app.inject({
      method: "POST",
      url: "/v1/sql",
      payload: { database: t.dbId, question: "q", evidence: "hint", seed: 7, maxInteractions: 3, topP: 1, schemaHints: false },
    });
    const req = t.decoder.calls[0]!;
    expect(req).toMatchObject({ question: "q", evidence: "hint", seed: 7, maxInteractions: 3, topP: 1, schemaHints: false });
    expect(req.dbPath).toBe(t.registry.get(t.dbId).path);
    expect(req.deadlineMs).toBeGreaterThan(t.config.server.requestTimeoutMs - 1_000);
    expect(req.deadlineMs).toBeLessThanOrEqual(t.config.server.requestTimeoutMs);
  });

  it("leaves what the body does not say to the decoder's defaults instead of filling it from config", async () => {
    t = await makeApp({ decoding: { strategy: "tree-prune", candidates: 8 } });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    const req = t.decoder.calls[0]!;
    for (const key of ["strategy", "candidates", "branching", "maxTokens", "feedback", "schemaHints", "temperature", "topP", "constrained", "profile"] as const)
      expect(req[key], key).toBeUndefined();
  });

  it("answers with the config's defaults through a real decoder built from the same config, and the body's values over them", async () => {
    const config = parseConfig({ decoding: { strategy: "linear", candidates: 3 } });
    const policy = new ScriptedPolicy(() => "<think>one</think><final_sql>SELECT 1</final_sql>");
    const executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
    const decode = createDecoder({ policy, executor, config, indexDir: join(tmpdir(), `reex-ask-sql-${process.pid}`) });
    try {
      t = await makeApp({ decoding: { strategy: "linear", candidates: 3 }, deps: { decode } });
      const byDefault = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
      expect(byDefault.statusCode).toBe(200);
      expect(byDefault.json().candidates).toHaveLength(3);
      const asked = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q", candidates: 2 } });
      expect(asked.json().candidates).toHaveLength(2);
      const greedy = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q", strategy: "greedy" } });
      expect(greedy.json().candidates).toHaveLength(1);
    } finally {
      decode.close();
      await executor.close();
    }
  });

  it("returns the event list as trace when includeTrace is set", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q", includeTrace: true } });
    const trace = res.json().trace as { type: string }[];
    expect(trace.map((e) => e.type)).toEqual([
      "branch",
      "token",
      "token",
      "token",
      "probe",
      "result",
      "branch",
      "branch",
      "token",
      "token",
      "prune",
      "candidate",
      "vote",
      "final",
    ]);
    expect(trace[5]).toMatchObject({ type: "result", result: { rows: [[4]] } });
  });

  it("rejects invalid bodies with BAD_REQUEST and zod-style issues (path + message)", async () => {
    t = await makeApp({ decoding: { maxCandidates: 8 } });
    const res = await t.app.inject({
      method: "POST",
      url: "/v1/sql",
      payload: { database: t.dbId, question: "", candidates: 9, maxInteractions: 51, strategy: "beam", topP: 0, extra: 1 },
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.code).toBe("BAD_REQUEST");
    const paths = (body.issues as { path: string[]; message: string }[]).map((i) => i.path.join("."));
    expect(paths).toEqual(expect.arrayContaining(["body.question", "body.candidates", "body.maxInteractions", "body.strategy", "body.topP", "body"]));
    for (const issue of body.issues) expect(typeof issue.message).toBe("string");
    expect(t.decoder.calls).toHaveLength(0);
  });

  it("rejects a missing or non-JSON body with BAD_REQUEST", async () => {
    t = await makeApp();
    const none = await t.app.inject({ method: "POST", url: "/v1/sql" });
    expect(none.statusCode).toBe(400);
    expect(none.json().code).toBe("BAD_REQUEST");
    const broken = await t.app.inject({ method: "POST", url: "/v1/sql", headers: { "content-type": "application/json" }, payload: "{oops" });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().code).toBe("BAD_REQUEST");
  });

  it("answers DB_NOT_FOUND for an unknown database", async () => {
    t = await makeApp();
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: "nope", question: "q" } });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe("DB_NOT_FOUND");
  });

  it("maps decoder failures to their catalog codes and hides unexpected ones as INTERNAL", async () => {
    let fail: unknown = new ReexError("POLICY_ERROR", "remote endpoint answered 500");
    t = await makeApp({ deps: { decode: async () => Promise.reject(fail) } });
    const policyError = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(policyError.statusCode).toBe(502);
    expect(policyError.json()).toEqual({ code: "POLICY_ERROR", message: "remote endpoint answered 500" });
    fail = new Error("secret internals SELECT * FROM users");
    const internal = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(internal.statusCode).toBe(500);
    expect(internal.json().code).toBe("INTERNAL");
    expect(internal.body).not.toContain("secret internals");
    fail = new ReexError("CONTEXT_EXHAUSTED", "no free sequence");
    expect((await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } })).statusCode).toBe(503);
  });

  it("answers DEADLINE_EXCEEDED past server.requestTimeoutMs and aborts the decode", async () => {
    const decoder = new ScriptedDecoder(200, 50);
    t = await makeApp({ server: { requestTimeoutMs: 150 }, decoder });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: "q" } });
    expect(res.statusCode).toBe(504);
    expect(res.json().code).toBe("DEADLINE_EXCEEDED");
    expect(decoder.signals[0]!.aborted).toBe(true);
    expect((decoder.signals[0]!.reason as ReexError).code).toBe("DEADLINE_EXCEEDED");
    await until(() => decoder.live === 0, 2_000, "sequences freed");
  });

  it("aborts the decode when the client disconnects, freeing its sequences", async () => {
    const decoder = new ScriptedDecoder(100, 100);
    t = await makeApp({ decoder });
    const { port } = await listen(t.app);
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/sql", headers: { "content-type": "application/json" } });
    req.on("error", () => undefined);
    req.end(JSON.stringify({ database: t.dbId, question: "q" }));
    await until(() => decoder.started === 1 && decoder.live > 0, 5_000, "decode started");
    req.destroy();
    await until(() => decoder.signals[0]!.aborted, 5_000, "abort signal");
    expect((decoder.signals[0]!.reason as ReexError).code).toBe("CANCELLED");
    await until(() => decoder.live === 0 && t!.policy.liveTrajectories() === 0, 2_000, "sequences freed");
    expect(decoder.finished).toBe(0);
  });
});

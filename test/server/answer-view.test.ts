/**
 * One answer view (#88): the REST/WebSocket answer (`shape`) and MCP's `ask` answer (`answerOf`)
 * are built by the decoder's `answerView`, so for the same decoder answer they are equal field by
 * field wherever both have the field (REST's `timings.totalMs` counts the queue; with no queue
 * time it is the decode's, MCP's `totalMs`). Cells have one encoding: src/sql's `jsonCell`.
 */
import { describe, expect, it } from "vitest";
import type { Answer } from "../../src/decoding/index.js";
import { answerOf } from "../../src/mcp/format.js";
import { shape } from "../../src/server/answer.js";
import { jsonCell } from "../../src/sql/index.js";

const rows = {
  ok: true as const,
  columns: ["name", "big", "blob", "ratio"],
  rows: [
    ["Joe", 9_007_199_254_740_993n, new Uint8Array([1, 2, 255]), 0.5],
    [null, 3n, null, Number.POSITIVE_INFINITY],
  ],
  rowCount: 2,
  truncated: false,
  elapsedMs: 1.23456,
};

function candidate(index: number, sql: string | null, extra: Record<string, unknown> = {}) {
  return { index, path: String(index), sql, answerable: true, group: 0, votes: 2, interactions: 1, meanLogprob: -0.1, text: "…", result: rows, ...extra };
}

const answers: Record<string, Answer> = {
  answered: {
    sql: "SELECT name FROM singer",
    answerable: true,
    result: rows,
    candidates: [candidate(0, "SELECT name FROM singer", { repairs: [{ from: "a", to: "b" }] }), candidate(1, "SELECT name FROM singer")],
    winner: 0,
    decidedBy: "majority",
    confidence: { value: 0.81234, threshold: 0.5, doubts: ["the result is empty"] },
    shortfall: "the budget ran out",
    notice: "a placeholder model",
    usage: { promptTokens: 10, evaluatedTokens: 12, generatedTokens: 30 },
    timings: { totalMs: 123.4567, firstTokenMs: 7.891 },
  } as unknown as Answer,
  failed: {
    sql: "SELECT nope FROM singer",
    answerable: true,
    result: { ok: false, error: { code: "SQL_ERROR", category: "missing_column", message: "no such column: nope" }, elapsedMs: 0.5 },
    candidates: [candidate(0, "SELECT nope FROM singer", { error: "no such column: nope" })],
    winner: 0,
    decidedBy: "only",
    usage: { promptTokens: 10, evaluatedTokens: 12, generatedTokens: 30 },
    timings: { totalMs: 50 },
  } as unknown as Answer,
  unanswerable: {
    sql: null,
    answerable: false,
    reason: "the question asks for the weather",
    candidates: [],
    winner: null,
    decidedBy: "none",
    confidence: { value: 0.2, threshold: 0.5, doubts: [] },
    usage: { promptTokens: 10, evaluatedTokens: 12, generatedTokens: 3 },
    timings: { totalMs: 5 },
  } as unknown as Answer,
};

/** The paths where `a` and `b` both have a field and differ. */
function differences(a: unknown, b: unknown, path = ""): string[] {
  if (a !== null && b !== null && typeof a === "object" && typeof b === "object") {
    if (Array.isArray(a) !== Array.isArray(b)) return [path];
    const keys = Object.keys(a).filter((k) => k in b);
    return keys.flatMap((k) => differences((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${path}.${k}`));
  }
  return Object.is(a, b) ? [] : [path];
}

describe("one answer view", () => {
  for (const [name, answer] of Object.entries(answers)) {
    it(`REST and MCP answers agree wherever both have the field: ${name}`, () => {
      const rest = shape(answer, undefined, { totalMs: answer.timings.totalMs, queueMs: 0 });
      const mcp = answerOf(answer, []);
      expect(differences(rest, mcp)).toEqual([]);
      const shared = Object.keys(rest).filter((k) => k in mcp);
      expect(shared).toEqual(expect.arrayContaining(["sql", "answerable", "confidence", "result", "candidates", "winner", "decidedBy", "usage", "timings"]));
      for (const key of ["reason", "error", "doubts", "notice", "shortfall"]) expect(key in rest, key).toBe(key in mcp);
      expect(rest.timings.decodeMs).toBe(mcp.timings.totalMs);
    });
  }

  it("cells have one encoding: safe integers as numbers, larger ones as strings, BLOBs as {base64}", () => {
    const mcp = answerOf(answers.answered!, []);
    expect(mcp.result?.rows[0]).toEqual(["Joe", "9007199254740993", { base64: "AQL/" }, 0.5]);
    expect(mcp.result?.rows[1]).toEqual([null, 3, null, "Infinity"]);
    expect(rows.rows.flat().map(jsonCell)).toEqual(mcp.result?.rows.flat());
  });
});

describe("the response schema is enforced on serialisation", () => {
  it("a body its schema takes is sent as built; one it refuses is an INTERNAL error, not sent", async () => {
    const { z } = await import("zod");
    const { jsonSerializerCompiler } = await import("../../src/server/provider.js");
    const schema = z.object({ n: z.number() });
    const serialize = jsonSerializerCompiler({ schema, method: "GET", url: "/x", httpStatus: "200" });
    expect(serialize({ n: 1, extra: "kept" })).toBe('{"n":1,"extra":"kept"}');
    expect(() => serialize({ n: "one" })).toThrow(/does not match its schema/);
  });
});

import { afterEach, describe, expect, it } from "vitest";
import { makeApp, ScriptedDecoder, type TestApp } from "./helpers.js";

let t: TestApp | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

const QUESTION = "Which singers are older than thirty-seven and a half?";
const SQL = "SELECT name FROM singer WHERE age > 30";

describe("structured logs", () => {
  it("log request ids, codes and lengths, but no questions, SQL or cell values by default", async () => {
    t = await makeApp();
    await t.app.inject({
      method: "POST",
      url: "/v1/sql",
      headers: { "x-request-id": "req-42" },
      payload: { database: t.dbId, question: QUESTION, evidence: "hint-text-xyz" },
    });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: "missing", question: QUESTION } });
    const lines = t.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const answered = lines.find((l) => l.msg === "answered");
    expect(answered).toMatchObject({ reqId: "req-42", database: t.dbId, questionChars: QUESTION.length, sqlChars: SQL.length });
    expect(lines.some((l) => l.msg === "request refused" && l.code === "DB_NOT_FOUND")).toBe(true);
    for (const secret of [QUESTION, SQL, "hint-text-xyz", "Joe Sharp", "Timbaland"]) expect(t.logs.text).not.toContain(secret);
  });

  it("log the question and SQL when server.logSql is on", async () => {
    t = await makeApp({ server: { logSql: true } });
    await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: QUESTION } });
    expect(t.logs.text).toContain(QUESTION);
    expect(t.logs.text).toContain(SQL);
  });

  it("log in the answered line what the client got: answerable false when the confidence is under the threshold", async () => {
    const decoder = new ScriptedDecoder();
    const decode = async (...args: Parameters<typeof decoder.decode>) => ({
      ...(await decoder.decode(...args)),
      confidence: { value: 0.21, threshold: 0.5, doubts: ["the candidates disagree"] },
    });
    t = await makeApp({ decoder, deps: { decode } });
    const res = await t.app.inject({ method: "POST", url: "/v1/sql", payload: { database: t.dbId, question: QUESTION } });
    expect(res.json()).toMatchObject({ answerable: false, confidence: 0.21 });
    const answered = t.logs.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "answered");
    expect(answered).toMatchObject({ answerable: false, confidence: 0.21 });
  });
});

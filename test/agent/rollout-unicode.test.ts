/**
 * A database whose stored text changes length under case mapping (Turkish city names: `İ` lower-cases
 * to two code units) must not break the reading of a response: the probe's `<result>` block brings
 * those names into the text, and the final SQL after it is still found, run and returned.
 * Fake policy (one token per character) on a real SQLite file.
 */
import { describe, expect, it } from "vitest";
import { byTurn } from "./fake-policy.js";
import { finalSqlHarness } from "./final-harness.js";

const CITIES = ["İstanbul", "İzmir", "Iğdır", "Şanlıurfa", "Çanakkale", "Diyarbakır", "Kırşehir", "İnegöl"];

const { files, run } = finalSqlHarness(
  "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT);" +
    `INSERT INTO customers (name, city) VALUES ${Array.from({ length: 64 }, (_, i) => `('c${i}', '${CITIES[i % CITIES.length]}')`).join(", ")}`,
  { schema: "customers(id, name, city)", question: "How many customers live in İstanbul?" },
);

describe("rollout: stored text whose case mapping changes its length", () => {
  it("the İstanbul database answers its question after a probe that returns every city", async () => {
    const final = "SELECT COUNT(*) FROM customers WHERE city = 'İstanbul'";
    const { result, executor } = await run(
      byTurn([
        "<think>İ and ı are different letters.</think>\n<intermediate_sql>SELECT DISTINCT city FROM customers</intermediate_sql>",
        `\n<think>İstanbul is stored as İstanbul.</think>\n<final_sql>${final}</final_sql>`,
      ]),
    );
    expect(result.finalSql).toBe(final);
    expect(result.probes).toHaveLength(1);
    expect(result.text).toMatch(/<result>[^]*İstanbul[^]*İzmir[^]*<\/result>/);
    expect(executor.calls).toEqual(["SELECT DISTINCT city FROM customers"]);
    expect(await executor.execute(files.dbPath, final)).toMatchObject({ ok: true, rows: [[8]] });
  });
});

/** `repairTables`: a query whose FROM table lacks the columns it reads is rebound to the one table that has them. */
import { describe, expect, it } from "vitest";
import { type SchemaNames } from "../../src/agent/index.js";
import { repairTables } from "../../src/agent/testing.js";

const schema: SchemaNames = {
  tables: [
    { name: "city", columns: ["city_id", "city", "hispanic", "population"] },
    { name: "hosting_city", columns: ["year", "match_id", "host_city"] },
    { name: "people", columns: ["people_id", "name", "age"] },
    { name: "candidate", columns: ["candidate_id", "people_id", "support_rate", "poll_source"] },
    { name: "Match Log", columns: ["match_id", "venue", "score"] },
    { name: "game", columns: ["match_id", "venue", "competition"] },
  ],
};

describe("repairTables", () => {
  it("rebinds a single table to the one table that has every column the query reads", () => {
    const r = repairTables("SELECT COUNT(*) FROM hosting_city WHERE city = 'Vienna' AND hispanic > 5", schema);
    expect(r).toEqual({ sql: "SELECT COUNT(*) FROM city WHERE city = 'Vienna' AND hispanic > 5", swaps: [{ from: "hosting_city", to: "city" }] });
  });

  it("turns a table joined to itself into a join with the table that holds the alias's columns", () => {
    const sql = "SELECT DISTINCT T1.name FROM people AS T1 INNER JOIN people AS T2 ON T1.people_id = T2.people_id WHERE T2.support_rate < 650";
    expect(repairTables(sql, schema)?.sql).toBe(
      "SELECT DISTINCT T1.name FROM people AS T1 INNER JOIN candidate AS T2 ON T1.people_id = T2.people_id WHERE T2.support_rate < 650",
    );
  });

  it("never rebinds to a table already in FROM: that would join a table to itself", () => {
    // T1 needs people_id and age: only people has both, and people is T2
    expect(repairTables("SELECT MIN(T1.age) FROM candidate AS T1 JOIN people AS T2 ON T1.people_id = T2.people_id", schema)).toBeUndefined();
  });

  it("settles misfits whatever their order: one that only one table fits takes it, the other gets what is left", () => {
    // the alias reading support_rate fits candidate only; the other (people_id) people or candidate
    const first = "SELECT T1.support_rate FROM hosting_city AS T1 JOIN hosting_city AS T2 ON T1.people_id = T2.people_id";
    const second = "SELECT T2.support_rate FROM hosting_city AS T1 JOIN hosting_city AS T2 ON T1.people_id = T2.people_id";
    expect(repairTables(first, schema)?.sql).toBe("SELECT T1.support_rate FROM candidate AS T1 JOIN people AS T2 ON T1.people_id = T2.people_id");
    expect(repairTables(second, schema)?.sql).toBe("SELECT T2.support_rate FROM people AS T1 JOIN candidate AS T2 ON T1.people_id = T2.people_id");
  });

  it("reads columns qualified by a table name and keeps every other character of the query", () => {
    const sql = "select people.support_rate , people.poll_source\nfrom   people  -- why\nwhere people.support_rate>1";
    expect(repairTables(sql, schema)?.sql).toBe("select people.support_rate , people.poll_source\nfrom   candidate  -- why\nwhere people.support_rate>1");
  });

  it("quotes a replacement whose name needs quotes, and matches names in any case", () => {
    expect(repairTables("SELECT SCORE FROM Game WHERE venue = 'x'", schema)?.sql).toBe(`SELECT SCORE FROM "Match Log" WHERE venue = 'x'`);
  });

  it("leaves a query alone when every table fits, or when no table or more than one fits", () => {
    expect(repairTables("SELECT name FROM people WHERE age > 3", schema)).toBeUndefined();
    expect(repairTables("SELECT shoe_size FROM people", schema)).toBeUndefined();
    // game and "Match Log" both have match_id and venue
    expect(repairTables("SELECT venue FROM hosting_city WHERE match_id = 1", schema)).toBeUndefined();
  });

  it("does not read an output alias, a function or a string as a column", () => {
    const sql = "SELECT COUNT(*) AS n, max(support_rate) FROM people WHERE poll_source = 'name' ORDER BY n";
    expect(repairTables(sql, schema)?.sql).toBe("SELECT COUNT(*) AS n, max(support_rate) FROM candidate WHERE poll_source = 'name' ORDER BY n");
  });

  it("reads a column named like a function, and not a collation or a cast's type", () => {
    const names: SchemaNames = {
      tables: [
        { name: "customers", columns: ["id", "city"] },
        { name: "orders", columns: ["id", "total"] },
      ],
    };
    expect(repairTables("SELECT count(*) FROM customers WHERE total > 10", names)?.sql).toBe("SELECT count(*) FROM orders WHERE total > 10");
    expect(repairTables("SELECT CAST(city AS TEXT) FROM customers WHERE city = 'x' COLLATE NOCASE", names)).toBeUndefined();
  });

  it("is out of scope for subqueries, compounds, derived tables and unknown tables", () => {
    expect(repairTables("SELECT name FROM people WHERE people_id IN (SELECT people_id FROM candidate WHERE hispanic > 1)", schema)).toBeUndefined();
    expect(repairTables("SELECT hispanic FROM people UNION SELECT hispanic FROM city", schema)).toBeUndefined();
    expect(repairTables("SELECT hispanic FROM (SELECT * FROM people)", schema)).toBeUndefined();
    expect(repairTables("SELECT hispanic FROM persons", schema)).toBeUndefined();
  });

  it("reads every table of a FROM list past an ON condition in parentheses or holding a list", () => {
    const parenthesised =
      "SELECT T3.support_rate FROM people AS T1 JOIN city AS T2 ON (T1.people_id = T2.city_id) JOIN people AS T3 ON T1.people_id = T3.people_id";
    expect(repairTables(parenthesised, schema)?.sql).toBe(
      "SELECT T3.support_rate FROM people AS T1 JOIN city AS T2 ON (T1.people_id = T2.city_id) JOIN candidate AS T3 ON T1.people_id = T3.people_id",
    );
    const listed = "SELECT T2.support_rate FROM people AS T1 JOIN people AS T2 ON T1.people_id IN (T2.people_id, 0)";
    expect(repairTables(listed, schema)?.sql).toBe("SELECT T2.support_rate FROM people AS T1 JOIN candidate AS T2 ON T1.people_id IN (T2.people_id, 0)");
  });

  it("rebinds a schema-qualified table, keeping its schema", () => {
    expect(repairTables("SELECT support_rate FROM main.people WHERE poll_source = 'x'", schema)).toEqual({
      sql: "SELECT support_rate FROM main.candidate WHERE poll_source = 'x'",
      swaps: [{ from: "people", to: "candidate" }],
    });
  });

  it("keeps the bare columns of a join readable after the swap", () => {
    // T2 must hold support_rate: candidate; the bare `age` is still people's
    const sql = "SELECT age FROM people AS T1 JOIN people AS T2 ON T1.people_id = T2.people_id WHERE T2.support_rate > 1";
    expect(repairTables(sql, schema)?.swaps).toEqual([{ from: "people", to: "candidate" }]);
    // a bare column no table of the repaired FROM has: no repair
    expect(
      repairTables("SELECT hispanic FROM people AS T1 JOIN people AS T2 ON T1.people_id = T2.people_id WHERE T2.support_rate > 1", schema),
    ).toBeUndefined();
  });
});

/** `sqlScopes`: the scope walker over the lexer's tokens (src/sql/scopes.ts), through src/sql's testing surface. */
import { describe, expect, it } from "vitest";
import { sqlScopes } from "../../src/sql/index.js";

/** Each SELECT as its first words, its FROM items and the index of its parent in the list. */
function outline(sql: string): { head: string; from: string[]; parent: number }[] {
  const { tokens, scopes } = sqlScopes(sql);
  return scopes.map((s) => ({
    head: tokens
      .slice(s.start, Math.min(s.end, s.start + 2))
      .map((t) => t.text)
      .join(" "),
    from: s.from.map((f) => `${f.kind}:${f.name}${f.qualified ? "(qualified)" : ""}${f.alias === undefined ? "" : ` as ${f.alias}`}`),
    parent: s.parent ? scopes.indexOf(s.parent) : -1,
  }));
}

describe("sqlScopes", () => {
  it("reads each FROM list's tables and aliases, with and without AS, across joins and commas", () => {
    expect(outline("SELECT T1.name FROM singer AS T1 JOIN concert c ON T1.id = c.sid LEFT JOIN [Stadium Info], main.audit a WHERE x = 1")).toEqual([
      { head: "SELECT T1", from: ["table:singer as t1", "table:concert as c", "table:stadium info", "table:audit(qualified) as a"], parent: -1 },
    ]);
  });

  it("gives subqueries, derived tables, CTE bodies and compound parts scopes of their own, each with the SELECT whose names it sees", () => {
    const sql =
      "WITH old AS (SELECT name FROM singer WHERE age > 40) " +
      "SELECT d.n FROM (SELECT name AS n FROM old) AS d, json_each(x) WHERE EXISTS (SELECT 1 FROM concert WHERE concert.sid = d.n) " +
      "UNION ALL SELECT city FROM città";
    expect(outline(sql)).toEqual([
      { head: "SELECT name", from: ["table:singer"], parent: -1 },
      { head: "SELECT d", from: ["derived: as d", "function:json_each"], parent: -1 },
      // a derived table sees the names around its SELECT, not its SELECT's own
      { head: "SELECT name", from: ["cte:old"], parent: -1 },
      { head: "SELECT 1", from: ["table:concert"], parent: 1 },
      { head: "SELECT city", from: ["table:città"], parent: -1 },
    ]);
  });

  it("marks the tokens that declare names and the ranges of nested queries, so a caller reads only a SELECT's own column references", () => {
    const sql = "SELECT s.name FROM singer s INDEXED BY idx WHERE s.age IN (SELECT age FROM singer)";
    const { tokens, scopes } = sqlScopes(sql);
    const [outer, inner] = scopes;
    expect([...outer!.declared].map((i) => tokens[i]!.text)).toEqual(["singer", "s", "idx"]);
    expect(outer!.nested.map(([open, close]) => [tokens[open]!.text, tokens[close]!.text, close - open])).toEqual([["(", ")", 5]]);
    expect(tokens[outer!.fromAt]!.upper).toBe("FROM");
    expect(inner!.parent).toBe(outer);
    // item offsets point into the text, for rewrites
    const item = outer!.from[0]!;
    expect(sql.slice(tokens[item.at]!.start, tokens[item.at]!.end)).toBe("singer");
    expect(tokens[item.aliasAt!]!.text).toBe("s");
  });

  it("splits statements at top-level semicolons and never throws on broken text", () => {
    expect(outline("SELECT a FROM t; SELECT b FROM u").map((s) => s.from)).toEqual([["table:t"], ["table:u"]]);
    for (const text of ["", "SELECT", "SELECT * FROM", "SELECT * FROM (", "SELECT * FROM (SELECT", "FROM FROM JOIN ON ,", "WITH x AS (", "SELECT 'a"]) {
      expect(() => sqlScopes(text)).not.toThrow();
    }
  });
});

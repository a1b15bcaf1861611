import { getLlama, type Llama, type LlamaGrammar } from "node-llama-cpp";
import { beforeAll, describe, expect, it } from "vitest";
import { buildGrammar, buildSegmentGrammars, checkIdentifiers, type SchemaNames } from "../../src/agent/index.js";

const schema: SchemaNames = {
  tables: [
    { name: "singer", columns: ["singer_id", "name", "country", "age", "Song Name"] },
    { name: "concert", columns: ["concert_id", "concert_name", "year", "singer_id", "order"] },
    { name: "Stadium Info", columns: ["capacity"] },
  ],
};

describe("buildGrammar structure", () => {
  it("defines every rule it references, with root first", () => {
    for (const family of ["execution-aware", "standard", "direct"] as const) {
      for (const start of ["first", "segment", "final-body"] as const) {
        const text = buildGrammar(schema, family, { start });
        const lines = text.trim().split("\n");
        expect(lines[0]!.startsWith("root ::= ")).toBe(true);
        const defined = new Set(lines.map((l) => l.split(" ::= ")[0]!));
        expect(defined.size).toBe(lines.length);
        const bodies = lines.map((l) => l.slice(l.indexOf(" ::= ") + 5).replace(/"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]/g, " "));
        const used = new Set(bodies.flatMap((b) => b.match(/[a-z][a-z0-9-]*/g) ?? []));
        for (const name of used) expect(defined, `rule ${name}`).toContain(name);
      }
    }
  });

  it("spells identifiers bare, quoted, backticked or bracketed, and keywords-as-names only quoted", () => {
    const text = buildGrammar(schema, "direct");
    const column = text.split("\n").find((l) => l.startsWith("column ::= "))!;
    expect(column).toContain('"singer_id"');
    expect(column).toContain('"\\"Song Name\\""');
    expect(column).toContain('"`Song Name`"');
    expect(column).toContain('"[Song Name]"');
    expect(column).not.toMatch(/\| "order" \|/);
    expect(column).toContain('"\\"order\\""');
    const table = text.split("\n").find((l) => l.startsWith("table ::= "))!;
    expect(table).not.toContain('| "Stadium Info"');
    expect(table).toContain('"\\"Stadium Info\\""');
  });

  it("shapes the segment per family and start", () => {
    expect(buildGrammar(schema, "execution-aware", { start: "first" })).toMatch(/^root ::= ows think ows \(probe \| final\)$/m);
    expect(buildGrammar(schema, "execution-aware")).toMatch(/^root ::= ows \(think ows\)\? \(probe \| final\)$/m);
    expect(buildGrammar(schema, "standard")).toMatch(/^root ::= ows think ows final$/m);
    expect(buildGrammar(schema, "direct")).toMatch(/^root ::= ows final$/m);
    expect(buildGrammar(schema, "direct", { start: "final-body" })).toMatch(/^root ::= final-body "<\/final_sql>"$/m);
    const grammars = buildSegmentGrammars(schema, "execution-aware");
    expect(Object.keys(grammars).sort()).toEqual(["finalBody", "first", "segment"]);
  });
});

/** llama.cpp's own GBNF parser and matcher, through node-llama-cpp (no model needed). */
describe("buildGrammar compiled by llama.cpp", () => {
  let llama: Llama;
  const compiled = new Map<string, LlamaGrammar>();
  const accepts = async (text: string, grammar: string): Promise<boolean> => {
    let g = compiled.get(grammar);
    if (!g) {
      g = await llama.createGrammar({ grammar });
      compiled.set(grammar, g);
    }
    return (g as unknown as { _testText(text: string): boolean })._testText(text);
  };

  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never", logLevel: "warn" as never });
  });

  it("compiles every family and start", async () => {
    for (const family of ["execution-aware", "standard", "direct"] as const) {
      for (const start of ["first", "segment", "final-body"] as const) {
        await expect(llama.createGrammar({ grammar: buildGrammar(schema, family, { start }) })).resolves.toBeDefined();
      }
    }
  });

  it("accepts well-formed segments over the schema's identifiers", async () => {
    const segment = buildGrammar(schema, "execution-aware");
    const good = [
      "<think>count singers</think>\n<intermediate_sql>SELECT COUNT(*) FROM singer</intermediate_sql>",
      "<intermediate_sql>SELECT T1.name, T2.concert_name FROM singer AS T1 INNER JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.age > 30 ORDER BY T1.age DESC LIMIT 3</intermediate_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'France' AND age BETWEEN 20 AND 30;</final_sql>",
      '<final_sql>SELECT "Song Name", [order] FROM singer, concert</final_sql>',
      '<final_sql>SELECT capacity FROM "Stadium Info" WHERE capacity IS NOT NULL</final_sql>',
      "<final_sql>select distinct country from singer where name like 'A%' and age not in (select age from singer where age < 20)</final_sql>",
      "<final_sql>SELECT country, COUNT(*) AS n FROM singer GROUP BY country HAVING COUNT(*) > 1 ORDER BY COUNT(*) DESC</final_sql>",
      "<final_sql>SELECT CAST(SUM(CASE WHEN T1.age > 30 THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(T1.singer_id) FROM singer T1</final_sql>",
      "<final_sql>SELECT name FROM singer UNION SELECT concert_name FROM concert</final_sql>",
      "<think>a < b is fine here</think><final_sql>SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM concert WHERE concert.singer_id = singer.singer_id)</final_sql>",
      "<final_sql>UNANSWERABLE: no salary column</final_sql>",
    ];
    for (const text of good) expect(await accepts(text, segment), text).toBe(true);
  });

  it("rejects identifiers outside the schema, free aliases and broken structure", async () => {
    const segment = buildGrammar(schema, "execution-aware");
    const bad = [
      "<final_sql>SELECT name FROM users</final_sql>",
      "<final_sql>SELECT salary FROM singer</final_sql>",
      "<final_sql>SELECT x.name FROM singer AS x</final_sql>",
      "<final_sql>SELECT order FROM concert</final_sql>",
      "<think>a</think><think>b</think><final_sql>SELECT 1</final_sql>",
      "<think>nested </think> inside</think><final_sql>SELECT 1</final_sql>",
      "<result>fake</result><final_sql>SELECT 1</final_sql>",
      "<final_sql>SELECT 1</final_sql> trailing",
    ];
    for (const text of bad) expect(await accepts(text, segment), text).toBe(false);
  });

  it("makes the first segment think first, the standard family never probe, and the forced final body close the tag", async () => {
    const exec = buildSegmentGrammars(schema, "execution-aware");
    expect(await accepts("<intermediate_sql>SELECT 1</intermediate_sql>", exec.first!)).toBe(false);
    expect(await accepts("<intermediate_sql>SELECT 1</intermediate_sql>", exec.segment!)).toBe(true);
    expect(await accepts(" SELECT name FROM singer </final_sql>", exec.finalBody!)).toBe(true);
    const standard = buildGrammar(schema, "standard");
    expect(await accepts("<think>a</think><intermediate_sql>SELECT 1</intermediate_sql>", standard)).toBe(false);
    expect(await accepts("<think>a</think>\n<final_sql>SELECT name FROM singer</final_sql>", standard)).toBe(true);
    expect(await accepts("<final_sql>SELECT name FROM singer</final_sql>", buildGrammar(schema, "direct"))).toBe(true);
  });
});

describe("checkIdentifiers", () => {
  it("finds nothing wrong in a query over the schema with aliases", () => {
    const sql =
      'SELECT T1.name, COUNT(*) AS cnt, T2."concert_name" FROM singer AS T1 JOIN concert T2 ON T1.singer_id = T2.singer_id ' +
      "WHERE T1.country = 'no_such_thing' GROUP BY T1.name ORDER BY cnt DESC LIMIT 1";
    expect(checkIdentifiers(sql, schema)).toEqual([]);
  });

  it("lists unknown tables, columns and qualifiers once, case-insensitively", () => {
    expect(checkIdentifiers("SELECT salary, Salary, name FROM employees", schema)).toEqual(["salary", "employees"]);
    expect(checkIdentifiers("SELECT x.name FROM singer", schema)).toEqual(["x"]);
    expect(checkIdentifiers("SELECT T1.wage FROM singer AS T1", schema)).toEqual(["wage"]);
  });

  it("handles quoted identifiers, CTE names and functions", () => {
    expect(checkIdentifiers('SELECT "Song Name", `order` FROM [Stadium Info], singer', schema)).toEqual([]);
    expect(checkIdentifiers("WITH old AS (SELECT name FROM singer WHERE age > 40) SELECT UPPER(name) FROM old", schema)).toEqual([]);
    expect(checkIdentifiers('SELECT "Song Title" FROM singer', schema)).toEqual(["Song Title"]);
  });
});

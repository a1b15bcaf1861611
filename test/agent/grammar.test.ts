import { getLlama, type Llama, type LlamaGrammar } from "node-llama-cpp";
import { beforeAll, describe, expect, it } from "vitest";
import { buildSegmentGrammars, checkIdentifiers, type SchemaNames } from "../../src/agent/index.js";
import { buildGrammar } from "../../src/agent/testing.js";
import { DEFAULT_MAX_THINK_BYTES } from "../../src/agent/grammar.js";

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
        for (const literals of [undefined, [], ["France", "it's"]]) {
          const columnLiterals = [{ column: "Song Name", values: ["a", "b'c"] }];
          const text = buildGrammar(schema, family, { start, ...(literals ? { literals, columnLiterals } : {}) });
          const lines = text.trim().split("\n");
          expect(lines[0]!.startsWith("root ::= ")).toBe(true);
          const defined = new Set(lines.map((l) => l.split(" ::= ")[0]!));
          expect(defined.size).toBe(lines.length);
          const bodies = lines.map((l) => l.slice(l.indexOf(" ::= ") + 5).replace(/"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]/g, " "));
          const used = new Set(bodies.flatMap((b) => b.match(/[a-z][a-z0-9-]*/g) ?? []));
          for (const name of used) expect(defined, `rule ${name}`).toContain(name);
        }
      }
    }
  });

  it("is recursion-free with bounded repetitions only, so every sentence is finite", () => {
    for (const family of ["execution-aware", "standard", "direct"] as const) {
      for (const start of ["first", "segment", "final-body"] as const) {
        const lines = buildGrammar(schema, family, { start }).trim().split("\n");
        const refs = new Map<string, string[]>();
        for (const line of lines) {
          const name = line.split(" ::= ")[0]!;
          const body = line.slice(line.indexOf(" ::= ") + 5).replace(/"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]/g, " ");
          expect(body, name).not.toMatch(/[*+]/);
          refs.set(name, body.replace(/\{\d+,\d+\}/g, " ").match(/[a-z][a-z0-9-]*/g) ?? []);
        }
        // depth-first search for a cycle in the rule reference graph
        const state = new Map<string, "open" | "done">();
        const visit = (name: string, path: string[]): void => {
          if (state.get(name) === "done") return;
          expect(state.get(name), `cycle ${[...path, name].join(" → ")}`).not.toBe("open");
          state.set(name, "open");
          for (const next of refs.get(name) ?? []) visit(next, [...path, name]);
          state.set(name, "done");
        };
        visit("root", []);
      }
    }
  });

  it("shapes the segment per family and start", () => {
    expect(buildGrammar(schema, "execution-aware", { start: "first" })).toMatch(/^root ::= ows think ows \(probe \| final\)$/m);
    expect(buildGrammar(schema, "execution-aware")).toMatch(/^root ::= ows \(think ows\)\? \(probe \| final\)$/m);
    expect(buildGrammar(schema, "standard")).toMatch(/^root ::= ows think ows final$/m);
    expect(buildGrammar(schema, "direct")).toMatch(/^root ::= ows final$/m);
    expect(buildGrammar(schema, "direct", { start: "final-body" })).toMatch(/^root ::= final-body "<\/final_sql>"$/m);
    const grammars = buildSegmentGrammars(schema, "execution-aware");
    expect(Object.keys(grammars).sort()).toEqual(["finalBody", "first", "fromRest", "segment"]);
    // after a FROM: the rest of the statement up to the closing tag, declaring the aliases the SELECT list named
    const after = grammars.fromRest!("final", 2);
    expect(after).toMatch(/^root ::= from-rest ows \(";" ows\)\? "<\/final_sql>"$/m);
    expect(grammars.fromRest!("probe", 0)).toMatch(/^root ::= from-rest ows \(";" ows\)\? "<\/intermediate_sql>"$/m);
    expect(grammars.fromRest!("final", 2)).toBe(after);
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

  it("with listed literals, writes only those strings (with % around them for LIKE), date and time text, and date modifiers inside date functions", async () => {
    const segment = buildGrammar(schema, "execution-aware", { literals: ["France", "John O'Neil", "Song 2", "<b>", "2019"] });
    const good = [
      "<final_sql>SELECT name FROM singer WHERE country = 'France'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name LIKE '%John O''Neil%' OR name LIKE 'Song 2%'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE year LIKE '%/2007' OR year LIKE '2023-03-%' OR year = '1995-96' OR year LIKE '%12:30%'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE STRFTIME('%Y-%m', year) = '2019-04' AND year > '2019-04-01 10:00:00' AND year LIKE '19%'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE year LIKE '02/%/2019' OR substr(year, 1, 4) BETWEEN '1990' AND '1999'</final_sql>",
      "<final_sql>SELECT COUNT(*) FROM concert WHERE STRFTIME('%Y', year) = '2019' AND year > DATE('now', '+18 years', 'start of month')</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = ''</final_sql>",
      "<final_sql>SELECT COUNT(*) FROM concert WHERE julianday('now') - julianday(year) > 365 AND date(year, 'start of year', '+1 day') < '2020-01-01'</final_sql>",
    ];
    for (const text of good) expect(await accepts(text, segment), text).toBe(true);
    const bad = [
      "<final_sql>SELECT name FROM singer WHERE country = 'france'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'Frnce'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'Paris'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name = 'John O'Neil'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name = '<b>'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name = 'yearminutes' OR name = ' 6start of 88.'</final_sql>",
      // a modifier is a date function's argument, not a value
      "<final_sql>SELECT name FROM singer WHERE name = 'subsec'</final_sql>",
      // date text is date-shaped: no bare number that is not listed, no stray spaces or trailing separators
      "<final_sql>SELECT name FROM singer WHERE name = '441'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name LIKE ' 652%'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name = '86/'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE name = '350078 69'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'start of month'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE UPPER('localtime') = country</final_sql>",
    ];
    for (const text of bad) expect(await accepts(text, segment), text).toBe(false);
    // without a list, any short string
    expect(await accepts("<final_sql>SELECT name FROM singer WHERE country = 'Paris'</final_sql>", buildGrammar(schema, "execution-aware")), "free").toBe(true);
  });

  it("writes a column's listed values only where that column is compared, bare, qualified or quoted", async () => {
    const columnLiterals = [
      { column: "country", values: ["FR", "DE"] },
      { column: "song name", values: ["It's Over"] },
      { column: "no_such_column", values: ["x"] },
    ];
    const segment = buildGrammar(schema, "execution-aware", { literals: ["France"], columnLiterals });
    const good = [
      "<final_sql>SELECT name FROM singer WHERE country = 'FR'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE singer.country != 'DE' AND country = 'France'</final_sql>",
      "<final_sql>SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id WHERE T1.country IN ('FR', 'DE')</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country NOT LIKE '%DE%' OR \"Song Name\" = 'It''s Over'</final_sql>",
      "<final_sql>SELECT CASE WHEN country = 'FR' THEN 1 ELSE 0 END FROM singer</final_sql>",
    ];
    for (const text of good) expect(await accepts(text, segment), text).toBe(true);
    const bad = [
      "<final_sql>SELECT name FROM singer WHERE name = 'FR'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE \"Song Name\" = 'DE'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'x'</final_sql>",
      "<final_sql>SELECT name FROM singer WHERE country = 'fr'</final_sql>",
    ];
    for (const text of bad) expect(await accepts(text, segment), text).toBe(false);
  });

  it("keeps each column's listed values apart where one column's name begins another's", async () => {
    const prefixed: SchemaNames = { tables: [{ name: "t", columns: ["tier", "tiers", "tier_code"] }] };
    const columnLiterals = [
      { column: "tier", values: ["G"] },
      { column: "tiers", values: ["S"] },
      { column: "tier_code", values: ["B"] },
    ];
    const segment = buildGrammar(prefixed, "execution-aware", { literals: [], columnLiterals });
    for (const [column, value] of [
      ["tier", "G"],
      ["tiers", "S"],
      ["tier_code", "B"],
    ] as const) {
      expect(await accepts(`<final_sql>SELECT tier FROM t WHERE ${column} = '${value}'</final_sql>`, segment), column).toBe(true);
      for (const other of ["G", "S", "B"].filter((v) => v !== value)) {
        expect(await accepts(`<final_sql>SELECT tier FROM t WHERE ${column} = '${other}'</final_sql>`, segment), `${column} ${other}`).toBe(false);
      }
    }
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

/** The constraints that make constrained output well formed and bounded, checked with llama.cpp's matcher. */
describe("buildGrammar bounds and bindings", () => {
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
  const final = (sql: string): string => `<final_sql>${sql}</final_sql>`;
  const tagged: SchemaNames = { tables: [...schema.tables, { name: "lab", columns: ["result", "think", "value"] }] };

  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never", logLevel: "warn" as never });
  });

  it("caps a think at maxThinkBytes UTF-8 bytes (default 256), so at as many tokens", async () => {
    const segment = buildGrammar(schema, "execution-aware");
    const sql = "<final_sql>SELECT name FROM singer</final_sql>";
    expect(await accepts(`<think>${"x".repeat(DEFAULT_MAX_THINK_BYTES)}</think>${sql}`, segment)).toBe(true);
    expect(await accepts(`<think>${"x".repeat(DEFAULT_MAX_THINK_BYTES + 1)}</think>${sql}`, segment)).toBe(false);
    const short = buildGrammar(schema, "execution-aware", { maxThinkBytes: 10 });
    expect(await accepts(`<think>${"x".repeat(10)}</think>${sql}`, short)).toBe(true);
    expect(await accepts(`<think>é€😀x</think>${sql}`, short)).toBe(true);
    expect(await accepts(`<think>${"é".repeat(6)}</think>${sql}`, short)).toBe(false);
    expect(await accepts(`<think>${"x".repeat(11)}</think>${sql}`, short)).toBe(false);
    const none = buildGrammar(schema, "standard", { maxThinkBytes: 0 });
    expect(await accepts(`<think></think>${sql}`, none)).toBe(true);
    expect(await accepts(`<think>x</think>${sql}`, none)).toBe(false);
    expect(() => buildGrammar(schema, "direct", { maxThinkBytes: -1 })).toThrow(RangeError);
  });

  it("never lets a tag, an end tag or a special token start inside a think, a string or after a bare <", async () => {
    const segment = buildGrammar(tagged, "execution-aware");
    const sql = "<final_sql>SELECT name FROM singer</final_sql>";
    for (const inner of ["a <= b, a < 3, a<>b, x <- y", "costs €5 → ok\n\tnext line"]) {
      expect(await accepts(`<think>${inner}</think>${sql}`, segment), inner).toBe(true);
    }
    for (const inner of ["<final_sql>", "x</think", "<intermediate_sql>", "<result>", "<|im_end|>", "a<b", "bell \x07"]) {
      expect(await accepts(`<think>${inner}</think>${sql}`, segment), inner).toBe(false);
    }
    expect(await accepts(final("SELECT value FROM lab WHERE value < result"), segment)).toBe(true);
    expect(await accepts(final("SELECT value FROM lab WHERE value <3 AND value<'x'"), segment)).toBe(true);
    expect(await accepts(final("SELECT value FROM lab WHERE value<result"), segment)).toBe(false);
    expect(await accepts(final("SELECT value FROM lab WHERE value<think"), segment)).toBe(false);
    expect(await accepts(final("SELECT value FROM lab WHERE value = 'a < b'"), segment)).toBe(true);
    expect(await accepts(final("SELECT value FROM lab WHERE value = '</final_sql>'"), segment)).toBe(false);
    expect(await accepts(final("SELECT value FROM lab WHERE value = '<think>'"), segment)).toBe(false);
  });

  it("binds table aliases: T1..Tn only when the FROM clause declares them, in order", async () => {
    const g = buildGrammar(schema, "direct");
    const good = [
      "SELECT T1.name FROM singer AS T1",
      "SELECT T2.concert_name, T1.* FROM singer T1 JOIN concert T2 ON T1.singer_id = T2.singer_id",
      "SELECT T1.name FROM singer AS T1 WHERE T1.age > (SELECT AVG(age) FROM singer WHERE singer.country = T1.country)",
      "SELECT COUNT(*) FROM (SELECT country FROM singer GROUP BY country) AS T1",
      "SELECT singer.name FROM singer",
    ];
    const bad = [
      "SELECT T2.name FROM singer AS T1",
      "SELECT T1.name FROM singer",
      "SELECT T1.name FROM concert AS T2",
      "SELECT T1.name FROM singer AS T1 JOIN concert ON T1.singer_id = concert.singer_id",
      "SELECT name FROM singer WHERE age > (SELECT AVG(T1.age) FROM singer AS T1)",
    ];
    for (const sql of good) expect(await accepts(final(sql), g), sql).toBe(true);
    for (const sql of bad) expect(await accepts(final(sql), g), sql).toBe(false);
  });

  it("matches large schemas' names through a radix tree, exactly", async () => {
    const wide: SchemaNames = { tables: [{ name: "wide", columns: Array.from({ length: 80 }, (_, i) => `col_${i}`).concat(["col", "Big Col"]) }] };
    const text = buildGrammar(wide, "direct");
    expect(text).toMatch(/^column ::= "col" column-1\?/m);
    for (const sql of ["SELECT col_7, col_79, col, [Big Col] FROM wide", "SELECT col_1 FROM wide"]) expect(await accepts(final(sql), text), sql).toBe(true);
    for (const sql of ["SELECT col_80 FROM wide", "SELECT co FROM wide", "SELECT col_ FROM wide"]) expect(await accepts(final(sql), text), sql).toBe(false);
  });

  it("spells a name bare when it can be, else quoted, backticked or bracketed", async () => {
    const g = buildGrammar(schema, "direct");
    for (const sql of [
      'SELECT "Song Name", `Song Name`, [Song Name] FROM singer',
      'SELECT "order", [order] FROM concert',
      'SELECT capacity FROM "Stadium Info"',
    ]) {
      expect(await accepts(final(sql), g), sql).toBe(true);
    }
    for (const sql of ["SELECT order FROM concert", "SELECT capacity FROM Stadium Info", 'SELECT "name" FROM singer', "SELECT Name FROM singer"]) {
      expect(await accepts(final(sql), g), sql).toBe(false);
    }
  });

  it("budgets the SQL: long lists, deep nesting and long literals are refused", async () => {
    const g = buildGrammar(schema, "direct");
    expect(await accepts(final('SELECT name, age, country, singer_id, "Song Name" FROM singer'), g)).toBe(true);
    expect(await accepts(final('SELECT name, age, country, singer_id, "Song Name", name FROM singer'), g)).toBe(false);
    expect(await accepts(final("SELECT name FROM singer WHERE age > 1 AND age < 9 AND country = 'a' AND name = 'b'"), g)).toBe(true);
    expect(await accepts(final("SELECT name FROM singer WHERE age > 1 AND age < 9 AND country = 'a' AND name = 'b' AND age = 3"), g)).toBe(false);
    expect(await accepts(final("SELECT ROUND(ABS(LENGTH(name))) FROM singer"), g)).toBe(true);
    expect(await accepts(final("SELECT ROUND(ABS(LENGTH(TRIM(name)))) FROM singer"), g)).toBe(false);
    expect(await accepts(final(`SELECT name FROM singer WHERE name = '${"a".repeat(32)}'`), g)).toBe(true);
    expect(await accepts(final(`SELECT name FROM singer WHERE name = '${"a".repeat(33)}'`), g)).toBe(false);
    expect(await accepts(final(`SELECT name FROM singer WHERE name = 'José''s ${"ü".repeat(11)}'`), g)).toBe(true);
    expect(await accepts(final(`SELECT name FROM singer WHERE name = '${"ü".repeat(17)}'`), g)).toBe(false);
    expect(await accepts(final("SELECT COUNT(*), MAX(age) FROM singer"), g)).toBe(true);
    expect(await accepts(final("SELECT ABS(*) FROM singer"), g)).toBe(false);
  });

  it("gives the unary functions one argument and the others at least one", async () => {
    const g = buildGrammar(schema, "direct");
    for (const sql of ["SELECT COUNT(DISTINCT name), SUBSTR(name, 1, 2) FROM singer", "SELECT ROUND(AVG(age), 2), COALESCE(name, country, 'x') FROM singer"]) {
      expect(await accepts(final(sql), g), sql).toBe(true);
    }
    for (const sql of ["SELECT HEX(name, age) FROM singer", "SELECT COUNT(name, age) FROM singer", "SELECT AVG() FROM singer", "SELECT IFNULL() FROM singer"]) {
      expect(await accepts(final(sql), g), sql).toBe(false);
    }
  });

  it("writes IN with a parenthesised list or subquery and BETWEEN with both bounds (what SQLite parses as such)", async () => {
    const g = buildGrammar(schema, "direct");
    for (const sql of [
      "SELECT name FROM singer WHERE age IN (20, 30) AND country NOT IN (SELECT country FROM singer WHERE age < 20)",
      "SELECT name FROM singer WHERE age NOT BETWEEN 20 AND 30 AND name LIKE 'A%'",
    ]) {
      expect(await accepts(final(sql), g), sql).toBe(true);
    }
    for (const sql of [
      "SELECT name FROM singer WHERE age IN singer",
      "SELECT name FROM singer WHERE age IN concert.year",
      "SELECT name FROM singer WHERE age BETWEEN 20",
      "SELECT name FROM singer WHERE age BETWEEN 20 OR 30",
    ]) {
      expect(await accepts(final(sql), g), sql).toBe(false);
    }
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

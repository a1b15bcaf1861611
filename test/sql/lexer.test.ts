/** `lexSql`: the one SQL lexer (src/sql/lexer.ts), through src/sql's public surface. */
import { describe, expect, it } from "vitest";
import { lexSql, type SqlToken } from "../../src/sql/index.js";

const kinds = (sql: string, options?: Parameters<typeof lexSql>[1]): [SqlToken["kind"], string][] => lexSql(sql, options).map((t) => [t.kind, t.value]);

describe("lexSql", () => {
  it("splits a query into words, names, literals, operators and punctuation, with the offsets of each in the text", () => {
    const sql = "SELECT T1.name, COUNT(*) FROM singer AS T1 WHERE age >= 30.5 AND x <> 'it''s';";
    const tokens = lexSql(sql);
    expect(tokens.map((t) => t.text)).toEqual([
      "SELECT",
      "T1",
      ".",
      "name",
      ",",
      "COUNT",
      "(",
      "*",
      ")",
      "FROM",
      "singer",
      "AS",
      "T1",
      "WHERE",
      "age",
      ">=",
      "30.5",
      "AND",
      "x",
      "<>",
      "'it''s'",
      ";",
    ]);
    for (const t of tokens) expect(sql.slice(t.start, t.end)).toBe(t.text);
    const literal = tokens.at(-2)!;
    expect([literal.kind, literal.value, literal.unterminated]).toEqual(["string", "it's", false]);
    expect(tokens.find((t) => t.text === "WHERE")).toMatchObject({ kind: "word", upper: "WHERE" });
    expect(tokens.filter((t) => t.kind === "op").map((t) => t.text)).toEqual(["*", ">=", "<>"]);
    expect(tokens.filter((t) => t.kind === "punct").map((t) => t.text)).toEqual([".", ",", "(", ")", ";"]);
  });

  it("reads a word of any script as one word, as SQLite does", () => {
    expect(kinds("SELECT popolazione FROM città WHERE 名前 = 'Zürich'")).toEqual([
      ["word", "SELECT"],
      ["word", "popolazione"],
      ["word", "FROM"],
      ["word", "città"],
      ["word", "WHERE"],
      ["word", "名前"],
      ["op", "="],
      ["string", "Zürich"],
    ]);
    // decomposed (NFD) letters, astral characters and `$` stay inside the word
    expect(kinds("SELECT citta\u0300, a$b, x😀y FROM t").filter(([k]) => k === "word")).toEqual([
      ["word", "SELECT"],
      ["word", "citta\u0300"],
      ["word", "a$b"],
      ["word", "x😀y"],
      ["word", "FROM"],
      ["word", "t"],
    ]);
    expect(lexSql("SELECT ÉTÉ")[1]!.upper).toBe("ÉTÉ");
  });

  it("unquotes names in double quotes, backticks and brackets, undoing doubled quotes (not inside brackets)", () => {
    const tokens = lexSql('SELECT "Song ""Name""", `o``rder`, [a]]b] FROM "città"');
    expect(tokens.filter((t) => t.kind === "quoted").map((t) => [t.text, t.value])).toEqual([
      ['"Song ""Name"""', 'Song "Name"'],
      ["`o``rder`", "o`rder"],
      ["[a]", "a"],
      ['"città"', "città"],
    ]);
    // `]b]` after the bracketed name: SQLite's brackets have no escape
    expect(tokens.slice(6, 9).map((t) => [t.kind, t.text])).toEqual([
      ["op", "]"],
      ["word", "b"],
      ["op", "]"],
    ]);
  });

  it("reads numbers, blobs and parameters", () => {
    expect(kinds("SELECT 1, 2.5, .5, 1e5, 3.2E-4, 0x1F, x'0A', X'ff', ?, ?3, :name, @v, $w, $")).toEqual(
      [
        ["word", "SELECT"],
        ["number", "1"],
        ["number", "2.5"],
        ["number", ".5"],
        ["number", "1e5"],
        ["number", "3.2E-4"],
        ["number", "0x1F"],
        ["blob", "0A"],
        ["blob", "ff"],
        ["param", "?"],
        ["param", "?3"],
        ["param", ":name"],
        ["param", "@v"],
        ["param", "$w"],
        ["op", "$"],
      ].flatMap((t, i) => (i < 2 ? [t] : [["punct", ","], t])) as [SqlToken["kind"], string][],
    );
    // x followed by a word character is a word, not a blob
    expect(kinds("SELECT xy'a'")).toEqual([
      ["word", "SELECT"],
      ["word", "xy"],
      ["string", "a"],
    ]);
  });

  it("drops comments unless asked for them, and never reads a quote or `;` inside one", () => {
    const sql = "SELECT a -- it's; here\nFROM t /* b; 'c */ WHERE x";
    expect(lexSql(sql).map((t) => t.text)).toEqual(["SELECT", "a", "FROM", "t", "WHERE", "x"]);
    const withComments = lexSql(sql, { comments: true });
    expect(withComments.filter((t) => t.kind === "comment").map((t) => t.text)).toEqual(["-- it's; here", "/* b; 'c */"]);
    for (const t of withComments) expect(sql.slice(t.start, t.end)).toBe(t.text);
  });

  it("runs an unterminated string, quoted name, blob or block comment to the end of the text, marked, and never throws", () => {
    const open = (sql: string): SqlToken => lexSql(sql, { comments: true }).at(-1)!;
    expect(open("SELECT 'abc")).toMatchObject({ kind: "string", value: "abc", unterminated: true, end: 11 });
    expect(open("SELECT 'it''")).toMatchObject({ kind: "string", value: "it'", unterminated: true });
    expect(open('SELECT "na')).toMatchObject({ kind: "quoted", value: "na", unterminated: true });
    expect(open("SELECT `na")).toMatchObject({ kind: "quoted", value: "na", unterminated: true });
    expect(open("SELECT [na")).toMatchObject({ kind: "quoted", value: "na", unterminated: true });
    expect(open("SELECT x'0")).toMatchObject({ kind: "blob", value: "0", unterminated: true });
    expect(open("SELECT 1 /* no end")).toMatchObject({ kind: "comment", text: "/* no end", unterminated: true });
    expect(open("SELECT 1 -- to the end")).toMatchObject({ kind: "comment", text: "-- to the end", unterminated: false });
    expect(open("SELECT 'abc'")).toMatchObject({ unterminated: false });
    for (const text of ["", "'", '"', "[", "`", "/*", "--", "x'", "(((", ")))", "\u0000\u0001", "\ud800"]) expect(() => lexSql(text)).not.toThrow();
  });

  it("matches parentheses and gives each token its nesting depth", () => {
    const tokens = lexSql("SELECT (a + (b)) FROM t WHERE x IN (SELECT y FROM u))");
    const at = (text: string, nth = 0): number => tokens.map((t, i) => (t.text === text ? i : -1)).filter((i) => i >= 0)[nth]!;
    expect(tokens[at("(")]!.match).toBe(at(")", 1));
    expect(tokens[at("(", 1)]!.match).toBe(at(")"));
    expect(tokens[at("b")]!.depth).toBe(2);
    expect(tokens[at("(", 1)]!.depth).toBe(1);
    expect(tokens[at("y")]!.depth).toBe(1);
    expect(tokens.at(-1)!).toMatchObject({ text: ")", match: -1, depth: 0 });
  });

  it("skips Unicode white space where a token would start (inside a word it is the word's, as in SQLite), or with asciiSpace takes it for a word character everywhere", () => {
    const sql = "SELECT\u00a0name FROM\u3000t";
    expect(lexSql(sql).map((t) => t.text)).toEqual(["SELECT\u00a0name", "FROM\u3000t"]);
    expect(lexSql("\u00a0SELECT 1\u2003").map((t) => t.text)).toEqual(["SELECT", "1"]);
    expect(lexSql("\u00a0SELECT 1\u2003", { asciiSpace: true }).map((t) => t.text)).toEqual(["\u00a0SELECT", "1", "\u2003"]);
  });
});

import { describe, expect, it } from "vitest";
import { PROFILES, extractFinal, extractProbes, formatCheck, normalizeSql, segments } from "../../src/agent/index.js";
import { tagWith, unwrapSql } from "../../src/agent/testing.js";

describe("extractFinal reads the final SQL of every response format", () => {
  it("takes <final_sql> content and strips trailing semicolons", () => {
    expect(extractFinal("<think>x</think>\n<final_sql>SELECT name FROM singer;</final_sql>")).toMatchObject({
      sql: "SELECT name FROM singer",
      answerable: true,
      source: "final_sql",
      closed: true,
    });
  });

  it("unwraps the paper's sentence + quotes wrapping", () => {
    const text = "<final_sql>The final SQL query is: \"SELECT T1.name FROM singer AS T1 WHERE T1.country = 'France'\"</final_sql>";
    expect(extractFinal(text).sql).toBe("SELECT T1.name FROM singer AS T1 WHERE T1.country = 'France'");
  });

  it("keeps double-quoted identifiers inside the paper's quotes", () => {
    const text = '<final_sql>The final SQL query is: "SELECT "Song Name" FROM singer;"</final_sql>';
    expect(extractFinal(text).sql).toBe('SELECT "Song Name" FROM singer');
  });

  it("accepts a sentence without a colon before the query", () => {
    expect(extractFinal("<final_sql>So the answer is SELECT COUNT(*) FROM singer</final_sql>").sql).toBe("SELECT COUNT(*) FROM singer");
  });

  it("reads fenced ```sql blocks inside the tag", () => {
    expect(extractFinal("<final_sql>\n```sql\nSELECT 1;\n```\n</final_sql>").sql).toBe("SELECT 1");
  });

  it("reads a fenced block alone, with or without a language", () => {
    expect(extractFinal("Here you go:\n```sql\nSELECT a FROM t\n```").sql).toBe("SELECT a FROM t");
    expect(extractFinal("```\nSELECT b FROM t\n```")).toMatchObject({ sql: "SELECT b FROM t", source: "loose" });
  });

  it("reads Think2SQL / CogniSQL <reasoning> + <answer>", () => {
    const text = "<reasoning>I need singers: SELECT * FROM singer</reasoning>\n<answer>SELECT name FROM singer WHERE age > 30</answer>";
    expect(extractFinal(text)).toMatchObject({ sql: "SELECT name FROM singer WHERE age > 30", source: "answer" });
  });

  it("reads SQL-R1 <think> + <answer> with a fence", () => {
    const text = "<think>count them</think>\n<answer>\n```sql\nSELECT COUNT(*) FROM concert;\n```\n</answer>";
    expect(extractFinal(text).sql).toBe("SELECT COUNT(*) FROM concert");
  });

  it("lets the last of several answer blocks count", () => {
    const text = "<final_sql>SELECT 1</final_sql> wait <final_sql>SELECT 2</final_sql>";
    expect(extractFinal(text).sql).toBe("SELECT 2");
    expect(extractFinal("```sql\nSELECT 1\n```\nbetter:\n```sql\nSELECT 2\n```").sql).toBe("SELECT 2");
  });

  it("prefers an answer tag over loose SQL written after it", () => {
    expect(extractFinal("<final_sql>SELECT 1</final_sql>\n```sql\nSELECT 2\n```").sql).toBe("SELECT 1");
  });

  it("never takes probes or server results as the final SQL", () => {
    const text = "<intermediate_sql>SELECT 1</intermediate_sql>\n<result>\nSELECT 2\n</result>\n";
    expect(extractFinal(text)).toMatchObject({ sql: null, source: "none" });
  });

  it("ignores SQL inside <think> unless nothing else exists", () => {
    expect(extractFinal("<think>maybe ```sql\nSELECT 1\n```</think>\n<final_sql>SELECT 2</final_sql>").sql).toBe("SELECT 2");
    expect(extractFinal("<think>the query is: SELECT name FROM singer</think>")).toMatchObject({ sql: "SELECT name FROM singer", source: "think" });
  });

  it("accepts a bare query as the whole response (direct models without tags)", () => {
    expect(extractFinal("SELECT name FROM singer;\n")).toMatchObject({ sql: "SELECT name FROM singer", source: "loose" });
  });

  it("reads the paper's sentence outside tags", () => {
    expect(extractFinal('The final SQL query is: "SELECT 3 FROM t".').sql).toBe("SELECT 3 FROM t");
  });

  it("reports an unclosed final block as not closed", () => {
    expect(extractFinal("<final_sql>SELECT name FROM sing")).toMatchObject({ sql: "SELECT name FROM sing", closed: false });
  });

  it("detects the UNANSWERABLE convention with its reason", () => {
    expect(extractFinal("<final_sql>UNANSWERABLE: the database has no salary column</final_sql>")).toEqual({
      sql: null,
      answerable: false,
      reason: "the database has no salary column",
      source: "final_sql",
      fromTag: true,
      closed: true,
    });
    expect(extractFinal("<answer>Unanswerable - no such data.</answer>")).toMatchObject({ answerable: false, reason: "no such data" });
  });

  it("detects UNANSWERABLE written without tags, but not inside <think>", () => {
    expect(extractFinal("<think>hmm</think>\nUNANSWERABLE: no such table")).toMatchObject({ sql: null, answerable: false, reason: "no such table" });
    expect(extractFinal("<think>UNANSWERABLE? no</think>")).toMatchObject({ answerable: true, source: "none" });
  });

  it("returns nothing for a response without SQL", () => {
    expect(extractFinal("<think>hmm</think> I do not know.")).toMatchObject({ sql: null, answerable: true, source: "none" });
  });
});

describe("extractProbes", () => {
  it("lists every closed probe in order, unwrapped, and skips an unclosed one", () => {
    const text = [
      "<think>a</think>",
      "<intermediate_sql>SELECT 1;</intermediate_sql>",
      "<result>\n1\n</result>",
      '<intermediate_sql>Let me check: "SELECT name FROM singer"</intermediate_sql>',
      "<result>\nname\n</result>",
      "<intermediate_sql>```sql\nSELECT 3\n```</intermediate_sql>",
      "<intermediate_sql>SELECT 4",
    ].join("\n");
    expect(extractProbes(text)).toEqual(["SELECT 1", "SELECT name FROM singer", "SELECT 3"]);
  });

  it("does not see probes written inside <think>", () => {
    expect(extractProbes("<think>I could run <intermediate_sql>SELECT 1</intermediate_sql></think>")).toEqual([]);
  });
});

describe("segments", () => {
  it("splits a response into top-level blocks and text with offsets", () => {
    const text = "hi <think>a <final_sql>x</final_sql></think> <final_sql>SELECT 1</final_sql>";
    const segs = segments(text);
    expect(segs.map((s) => s.kind)).toEqual(["text", "think", "text", "final_sql"]);
    expect(segs[1]!.content).toBe("a <final_sql>x</final_sql>");
    expect(text.slice(segs[3]!.start, segs[3]!.end)).toBe("<final_sql>SELECT 1</final_sql>");
  });

  it("ends an unclosed <think> where a probe or the final SQL opens, and the format check still fails it", () => {
    const text = "<think>count them\n<intermediate_sql>SELECT COUNT(*) FROM t</intermediate_sql>";
    const segs = segments(text);
    expect(segs.map((s) => [s.kind, s.closed])).toEqual([
      ["think", false],
      ["intermediate_sql", true],
    ]);
    expect(extractProbes(text)).toEqual(["SELECT COUNT(*) FROM t"]);
    expect(extractFinal("<think>so <final_sql>SELECT 1</final_sql>")).toMatchObject({ sql: "SELECT 1", fromTag: true });
    expect(formatCheck(`${text}<result>\n1\n</result>\n<final_sql>SELECT 1</final_sql>`, "execution-aware").ok).toBe(false);
  });
});

describe("unwrapSql and normalizeSql", () => {
  it("unwraps quotes and fences but leaves plain SQL alone", () => {
    expect(unwrapSql("  SELECT a FROM t ;; ")).toBe("SELECT a FROM t");
    expect(unwrapSql("'SELECT a FROM t WHERE b = ''x'''")).toBe("SELECT a FROM t WHERE b = ''x''");
    expect(unwrapSql("SELECT strftime('%H:%M', t) FROM x")).toBe("SELECT strftime('%H:%M', t) FROM x");
  });

  it("treats queries that differ only in case, spacing and semicolons as equal, but not in literals", () => {
    expect(normalizeSql("SELECT  name\nFROM singer WHERE age>30;")).toBe(normalizeSql("select name from singer where age > 30"));
    expect(normalizeSql("SELECT COUNT ( * ) FROM t")).toBe(normalizeSql("select count(*) from t"));
    expect(normalizeSql("SELECT 1 FROM t WHERE n = 'Bob'")).not.toBe(normalizeSql("SELECT 1 FROM t WHERE n = 'bob'"));
  });

  it("reads the query with the SQL lexer: comments dropped, non-ASCII names whole, quoted names and strings kept as written", () => {
    expect(normalizeSql("SELECT a -- the first\nFROM t /* all */;")).toBe(normalizeSql("select a from t"));
    expect(normalizeSql("SELECT Città FROM t")).toBe("select città from t");
    expect(normalizeSql("SELECT \"Città\" FROM t WHERE x = 'a  ;b'")).toBe("select \"Città\" from t where x='a  ;b'");
    expect(normalizeSql("SELECT a FROM t WHERE b = '--'")).not.toBe(normalizeSql("SELECT a FROM t WHERE b = ''"));
  });
});

describe("formatCheck follows the template of each family", () => {
  const probeRound = "<intermediate_sql>SELECT 1</intermediate_sql>\n<result>\n1\n</result>\n";

  it("accepts execution-aware responses with zero or more probe rounds", () => {
    expect(formatCheck("<think>a</think>\n<final_sql>SELECT 1</final_sql>", "execution-aware").ok).toBe(true);
    const two = `<think>a</think>\n${probeRound}<think>b</think>\n${probeRound}<final_sql>SELECT 1</final_sql>`;
    expect(formatCheck(two, "execution-aware")).toEqual({ ok: true, problems: [] });
  });

  it("allows whitespace and end tokens after </final_sql>, nothing else", () => {
    expect(formatCheck("<think>a</think><final_sql>SELECT 1</final_sql>\n<|im_end|>\n", "standard").ok).toBe(true);
    const after = formatCheck("<think>a</think><final_sql>SELECT 1</final_sql> done", "standard");
    expect(after.ok).toBe(false);
    expect(after.problems).toContain("text after the last block");
  });

  it("rejects a <result> the model wrote itself (not right after a probe)", () => {
    const text = "<think>a</think>\n<result>\nfake\n</result>\n<final_sql>SELECT 1</final_sql>";
    expect(formatCheck(text, "execution-aware").ok).toBe(false);
  });

  it("rejects a probe without an answer, unbalanced or nested tags, text between blocks", () => {
    expect(formatCheck("<think>a</think><intermediate_sql>SELECT 1</intermediate_sql><final_sql>SELECT 1</final_sql>", "execution-aware").ok).toBe(false);
    expect(formatCheck("<think>a<final_sql>SELECT 1</final_sql>", "execution-aware").problems).toEqual(
      expect.arrayContaining(["<final_sql> inside <think>", "unclosed <think>"]),
    );
    expect(formatCheck("<think>a</think> so <final_sql>SELECT 1</final_sql>", "execution-aware").problems).toContain("text outside tags before <final_sql>");
    expect(formatCheck("<think>a</think></think><final_sql>SELECT 1</final_sql>", "execution-aware").problems).toContain("stray </think>");
  });

  it("requires the leading think and the final for reasoning families", () => {
    expect(formatCheck(`${probeRound}<final_sql>SELECT 1</final_sql>`, "execution-aware").ok).toBe(false);
    expect(formatCheck("<think>a</think>", "standard").ok).toBe(false);
    expect(formatCheck("<think>a</think><final_sql> </final_sql>", "standard").problems).toContain("empty <final_sql>");
  });

  it("forbids probes in the standard family and anything but the final in direct", () => {
    expect(formatCheck(`<think>a</think>${probeRound}<final_sql>SELECT 1</final_sql>`, "standard").ok).toBe(false);
    expect(formatCheck("<final_sql>SELECT 1</final_sql>", "direct").ok).toBe(true);
    expect(formatCheck("<think>a</think><final_sql>SELECT 1</final_sql>", "direct").ok).toBe(false);
  });

  it("rejects other formats' tags even when parseable", () => {
    expect(formatCheck("<think>a</think><answer>SELECT 1</answer>", "standard").ok).toBe(false);
  });
});

const tagRoleOf = (profile: (typeof PROFILES)[number], role: string): string =>
  tagWith(profile.syntax, role as Parameters<typeof tagWith>[1]) !== undefined ? role : role === "think" ? "think-alias" : "final-alias";

describe("offsets survive text whose case mapping changes its length", () => {
  // each lower-cases (İ → i̇) or upper-cases (ß → SS, ﬁ → FI) to another number of code units, or folds by context (Σ)
  const SHIFTING = "İstanbul İzmir ẞtraße ﬁnal ΣΊΣΥΦΟΣ";
  const rows = Array.from({ length: 40 }, (_, i) => `İstanbul-${i}`).join("\n");

  it.each(PROFILES.map((p) => [p.id, p] as const))("the %s profile's final SQL and every block read exactly after such values", (_, profile) => {
    const block = (role: Parameters<typeof tagWith>[1], body: string, upper = false): { role: string; text: string }[] => {
      const alias = role === "think" ? "think-alias" : role === "final" ? "final-alias" : role;
      const tag = tagWith(profile.syntax, role) ?? tagWith(profile.syntax, alias);
      if (tag === undefined) return role === "final" ? [{ role: "fence", text: `\`\`\`sql\n${body}\n\`\`\`` }] : [];
      const name = upper ? tag.toUpperCase() : tag;
      return [{ role, text: `<${name}>${body}</${name}>\n` }];
    };
    const sql = "SELECT COUNT(*) FROM customers WHERE city = 'İstanbul'";
    const blocks = [
      ...block("think", SHIFTING),
      ...block("probe", "SELECT DISTINCT city FROM customers"),
      ...block("feedback", `\n${rows}\n`),
      ...block("think", `${SHIFTING} again`, true),
      ...block("final", sql),
    ];
    const text = `${SHIFTING}\n${blocks.map((b) => b.text).join("")}`;
    expect(extractFinal(text, profile.syntax)).toMatchObject({ sql, answerable: true, closed: true });
    const segs = segments(text, profile.syntax);
    for (const s of segs) {
      const whole = text.slice(s.start, s.end);
      if (s.kind === "text") expect(whole).toBe(s.content);
      else {
        expect(whole.toLowerCase().startsWith(`<${s.kind}>`)).toBe(true);
        expect(whole.toLowerCase().endsWith(`</${s.kind}>`)).toBe(true);
        expect(whole.slice(s.kind.length + 2, whole.length - s.kind.length - 3)).toBe(s.content);
      }
    }
    expect(segs.filter((s) => s.kind !== "text").map((s) => s.role)).toEqual(blocks.filter((b) => b.role !== "fence").map((b) => tagRoleOf(profile, b.role)));
    if (blocks.some((b) => b.role === "feedback")) expect(segs.find((s) => s.role === "feedback")!.content).toBe(`\n${rows}\n`);
  });

  it("a value that looks like a tag only after case folding is not a tag", () => {
    // 'ı' (dotless i) upper-cases to I and 'ſ' (long s) to S; neither may make a closing tag
    const text = "<final_sql>SELECT 'x</fınal_sql>' AS a, 'y</final_ſql>' AS b</final_sql>";
    expect(extractFinal(text).sql).toBe("SELECT 'x</fınal_sql>' AS a, 'y</final_ſql>' AS b");
  });
});

/**
 * The allow-list layer of the Postgres guard over every parse-tree node that names an operator, a
 * function or a type, without a server: a catalogue where one operator (`===`), one function
 * (`evil`) and one type (`evil_t`) are not allowed, and each node kind written once with the
 * forbidden object (refused) and once with an allowed one (passes). Operators a node implies
 * (`IN` is `=`, `BETWEEN` is `>=` and `<=`, `LIKE` is `~~`, …) are checked with a catalogue where
 * a user's overload of that operator is not allowed. The walker is iterative: a 30,000-term
 * expression gets a typed answer, not a RangeError.
 */
import { describe, expect, test } from "vitest";
import { checkPostgresSql } from "../../src/pg/index.js";
import { compileFunctionPolicy, type FunctionPolicy, type ProcRow } from "../../src/pg/functions.js";

const proc = (schema: string, name: string, volatility = "i", kind = "f"): ProcRow => ({
  schema,
  name,
  kind,
  volatility,
  argNames: [],
  argTypes: [],
  projectable: name === "evil",
});

const BUILT_IN_FUNCTIONS = [
  "lower",
  "count",
  "string_agg",
  "row_number",
  "generate_series",
  "percentile_cont",
  "textin",
  "int4in",
  "int4",
  "bernoulli",
  "similar_to_escape",
  "int4eq",
  "int4lt",
  "int4gt",
  "int4le",
  "int4ge",
  "int4ne",
  "int4pl",
  "textlike",
  "texticlike",
  "textregexeq",
  "xml_in",
  "json_in",
  "enum_in",
  "array_in",
];
const COMPARISONS = ["=", "<", ">", "<=", ">=", "<>", "~~", "~~*", "~", "!~~", "+"];
const PROCS_OF: Record<string, string> = {
  "=": "int4eq",
  "<": "int4lt",
  ">": "int4gt",
  "<=": "int4le",
  ">=": "int4ge",
  "<>": "int4ne",
  "~~": "textlike",
  "!~~": "textlike",
  "~~*": "texticlike",
  "~": "textregexeq",
  "+": "int4pl",
};

/** A catalogue with `===`, `evil()` and `evil_t` not allowed; `userOverload` adds a public overload of that operator backed by `evil`. */
function policy(userOverload?: string): FunctionPolicy {
  return compileFunctionPolicy({
    procs: [...BUILT_IN_FUNCTIONS.map((n) => proc("pg_catalog", n)), proc("public", "evil", "v"), proc("public", "mood_in", "v")],
    operators: [
      ...COMPARISONS.map((name) => ({ schema: "pg_catalog", name, procSchema: "pg_catalog", proc: PROCS_OF[name]!, builtInEstimators: true })),
      { schema: "public", name: "===", procSchema: "public", proc: "evil", builtInEstimators: true },
      ...(userOverload ? [{ schema: "public", name: userOverload, procSchema: "public", proc: "evil", builtInEstimators: true }] : []),
    ],
    casts: [],
    types: [
      { schema: "pg_catalog", name: "int4", kind: "b", inputSchema: "pg_catalog", input: "int4in", elementSchema: "", element: "" },
      { schema: "pg_catalog", name: "text", kind: "b", inputSchema: "pg_catalog", input: "textin", elementSchema: "", element: "" },
      { schema: "pg_catalog", name: "xml", kind: "b", inputSchema: "pg_catalog", input: "xml_in", elementSchema: "", element: "" },
      { schema: "pg_catalog", name: "json", kind: "b", inputSchema: "pg_catalog", input: "json_in", elementSchema: "", element: "" },
      { schema: "pg_catalog", name: "jsonb", kind: "b", inputSchema: "pg_catalog", input: "json_in", elementSchema: "", element: "" },
      { schema: "public", name: "evil_t", kind: "d", inputSchema: "pg_catalog", input: "int4in", elementSchema: "", element: "" },
      { schema: "public", name: "mood", kind: "e", inputSchema: "pg_catalog", input: "enum_in", elementSchema: "", element: "" },
      { schema: "public", name: "_evil_t", kind: "b", inputSchema: "pg_catalog", input: "array_in", elementSchema: "public", element: "evil_t" },
      { schema: "public", name: "_mood", kind: "b", inputSchema: "pg_catalog", input: "array_in", elementSchema: "public", element: "mood" },
    ],
    searchPath: ["pg_catalog", "public"],
    fingerprint: "test",
  });
}

async function verdict(sql: string, p: FunctionPolicy): Promise<string> {
  const r = await checkPostgresSql(sql, p);
  return r.ok ? "ok" : `${r.error.code}: ${r.error.message}`;
}

/** Node kind → [query with the forbidden object, the same with an allowed one]. */
const OPERATOR_NODES: [string, string, string][] = [
  ["A_Expr AEXPR_OP", "SELECT 1 === 1", "SELECT 1 = 1"],
  ["A_Expr AEXPR_OP, qualified", "SELECT 1 OPERATOR(public.===) 1", "SELECT 1 OPERATOR(pg_catalog.=) 1"],
  ["A_Expr AEXPR_OP, prefix", "SELECT === 1", "SELECT + 1"],
  ["A_Expr AEXPR_OP_ANY", "SELECT 1 === ANY (ARRAY[1])", "SELECT 1 = ANY (ARRAY[1])"],
  ["A_Expr AEXPR_OP_ALL", "SELECT 1 === ALL (ARRAY[1])", "SELECT 1 < ALL (ARRAY[2])"],
  ["A_Expr row comparison", "SELECT (1, 2) === (1, 2)", "SELECT (1, 2) < (1, 3)"],
  ["SubLink ANY_SUBLINK", "SELECT 1 WHERE 1 === ANY (SELECT 1)", "SELECT 1 WHERE 1 = ANY (SELECT 1)"],
  ["SubLink ALL_SUBLINK", "SELECT 1 WHERE 1 === ALL (SELECT 1)", "SELECT 1 WHERE 1 <= ALL (SELECT 1)"],
  ["SubLink ROWCOMPARE_SUBLINK", "SELECT (1, 2) === (SELECT 1, 2)", "SELECT (1, 2) = (SELECT 1, 2)"],
  ["SubLink in WHERE of a CTE", "WITH c AS (SELECT 1 AS a WHERE 1 === ANY (SELECT 1)) SELECT * FROM c", "WITH c AS (SELECT 1 AS a) SELECT * FROM c"],
  ["SortBy USING", "SELECT 1 AS a ORDER BY a USING ===", "SELECT 1 AS a ORDER BY a USING <"],
  ["SortBy USING in a window", "SELECT row_number() OVER (ORDER BY 1 USING ===)", "SELECT row_number() OVER (ORDER BY 1 USING >)"],
  ["SortBy USING in an aggregate", "SELECT string_agg('a', ',' ORDER BY 1 USING ===)", "SELECT string_agg('a', ',' ORDER BY 1 USING <)"],
];

/** Node kinds that imply an operator: [kind, implied operator, query]. */
const IMPLIED: [string, string, string][] = [
  ["A_Expr AEXPR_DISTINCT", "=", "SELECT 1 IS DISTINCT FROM 2"],
  ["A_Expr AEXPR_NOT_DISTINCT", "=", "SELECT 1 IS NOT DISTINCT FROM 2"],
  ["A_Expr AEXPR_NULLIF", "=", "SELECT NULLIF(1, 2)"],
  ["A_Expr AEXPR_IN", "=", "SELECT 1 IN (1, 2)"],
  ["A_Expr AEXPR_IN, NOT IN", "<>", "SELECT 1 NOT IN (1, 2)"],
  ["SubLink IN (SELECT …)", "=", "SELECT 1 WHERE 1 IN (SELECT 1)"],
  ["CaseExpr with an argument", "=", "SELECT CASE 1 WHEN 1 THEN 'a' END"],
  ["A_Expr AEXPR_BETWEEN", ">=", "SELECT 2 BETWEEN 1 AND 3"],
  ["A_Expr AEXPR_BETWEEN_SYM", "<=", "SELECT 2 BETWEEN SYMMETRIC 3 AND 1"],
  ["A_Expr AEXPR_NOT_BETWEEN", "<", "SELECT 2 NOT BETWEEN 1 AND 3"],
  ["A_Expr AEXPR_NOT_BETWEEN_SYM", ">", "SELECT 2 NOT BETWEEN SYMMETRIC 3 AND 1"],
  ["A_Expr AEXPR_LIKE", "~~", "SELECT 'a' LIKE 'b'"],
  ["A_Expr AEXPR_LIKE, NOT LIKE", "!~~", "SELECT 'a' NOT LIKE 'b'"],
  ["A_Expr AEXPR_ILIKE", "~~*", "SELECT 'a' ILIKE 'b'"],
  ["A_Expr AEXPR_SIMILAR", "~", "SELECT 'a' SIMILAR TO 'b'"],
];

const FUNCTION_NODES: [string, string, string][] = [
  ["FuncCall", "SELECT evil()", "SELECT lower('A')"],
  ["FuncCall, qualified", "SELECT public.evil()", "SELECT pg_catalog.lower('A')"],
  ["FuncCall in FROM", "SELECT * FROM evil()", "SELECT * FROM generate_series(1, 2)"],
  ["FuncCall in ROWS FROM", "SELECT * FROM ROWS FROM (evil(), generate_series(1, 2))", "SELECT * FROM ROWS FROM (generate_series(1, 2))"],
  ["FuncCall in LATERAL", "SELECT * FROM (SELECT 1) s, LATERAL evil()", "SELECT * FROM (SELECT 1) s, LATERAL generate_series(1, 2)"],
  ["FuncCall in FILTER", "SELECT count(*) FILTER (WHERE evil())", "SELECT count(*) FILTER (WHERE lower('a') = 'a')"],
  ["FuncCall in WITHIN GROUP", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY evil())", "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY 1)"],
  ["FuncCall in OVER", "SELECT row_number() OVER (PARTITION BY evil())", "SELECT row_number() OVER (PARTITION BY 1)"],
  ["column notation", "SELECT s.evil FROM (SELECT 1) AS s", "SELECT s.x FROM (SELECT 1 AS x) AS s"],
  ["A_Indirection", "SELECT (s).evil FROM (SELECT 1) AS s", "SELECT (s).x FROM (SELECT 1 AS x) AS s"],
  ["TABLESAMPLE's arguments", "SELECT * FROM pg_class TABLESAMPLE bernoulli (evil())", "SELECT * FROM pg_class TABLESAMPLE bernoulli (10)"],
];

const TYPE_NODES: [string, string, string][] = [
  ["TypeCast ::", "SELECT 1::evil_t", "SELECT 1::int"],
  ["TypeCast CAST", "SELECT CAST(1 AS evil_t)", "SELECT CAST(1 AS integer)"],
  ["TypeCast typed literal", "SELECT evil_t '1'", "SELECT int4 '1'"],
  ["TypeCast to an array", "SELECT ARRAY[1]::evil_t[]", "SELECT ARRAY[1]::int[]"],
  ["TypeCast, qualified", "SELECT 1::public.evil_t", "SELECT 'ok'::public.mood"],
  ["TypeCast to an array type by its own name", "SELECT '{1}'::_evil_t", "SELECT '{ok}'::_mood"],
  [
    "ColumnDef in a column definition list",
    "SELECT * FROM ROWS FROM (generate_series(1, 2) AS (a evil_t))",
    "SELECT * FROM ROWS FROM (generate_series(1, 2) AS (a int))",
  ],
  ["XmlSerialize", "SELECT XMLSERIALIZE(CONTENT '<a/>'::xml AS evil_t)", "SELECT XMLSERIALIZE(CONTENT '<a/>'::xml AS text)"],
  [
    "RangeTableFuncCol in XMLTABLE",
    "SELECT * FROM XMLTABLE('/a' PASSING CAST('<a/>' AS xml) COLUMNS x evil_t PATH '.')",
    "SELECT * FROM XMLTABLE('/a' PASSING CAST('<a/>' AS xml) COLUMNS x int PATH '.')",
  ],
  ["JsonOutput in RETURNING", "SELECT JSON_OBJECT('a': 1 RETURNING evil_t)", "SELECT JSON_OBJECT('a': 1 RETURNING json)"],
  ["JsonFuncExpr RETURNING", "SELECT JSON_VALUE('1'::jsonb, '$' RETURNING evil_t)", "SELECT JSON_VALUE('1'::jsonb, '$' RETURNING int)"],
  [
    "JsonTableColumn in JSON_TABLE",
    "SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (a evil_t PATH '$'))",
    "SELECT * FROM JSON_TABLE('[1]'::jsonb, '$[*]' COLUMNS (a int PATH '$'))",
  ],
];

describe("every parse-tree node that names an operator, a function or a type", () => {
  test.each([...OPERATOR_NODES, ...FUNCTION_NODES, ...TYPE_NODES])(
    "%s: refused with the forbidden object, passes with an allowed one",
    async (_, bad, good) => {
      const p = policy();
      expect(await verdict(bad, p), bad).toMatch(/^SQL_REFUSED: /);
      expect(await verdict(good, p), good).toBe("ok");
    },
  );

  test.each(IMPLIED)("%s implies %s: refused when a user's overload of it is not allowed", async (_, op, sql) => {
    expect(await verdict(sql, policy()), sql).toBe("ok");
    expect(await verdict(sql, policy(op)), sql).toMatch(new RegExp(`^SQL_REFUSED: the operator ${op.replace(/[~*+<>!=]/g, "\\$&")} `));
  });

  test("an operator, function or type the catalogue does not hold is refused (an allow-list, not a deny-list)", async () => {
    const p = policy();
    expect(await verdict("SELECT 1 #=# 1", p)).toMatch(/^SQL_REFUSED: the operator #=# /);
    expect(await verdict("SELECT 1 WHERE 1 #=# ANY (SELECT 1)", p)).toMatch(/^SQL_REFUSED: the operator #=# /);
    expect(await verdict("SELECT unknown_fn()", p)).toMatch(/^SQL_REFUSED: unknown_fn\(\)/);
    expect(await verdict("SELECT 1::no_such_type", p)).toMatch(/^SQL_REFUSED: the type no_such_type /);
  });

  test("a long flat expression gets a typed answer, however long: the walker does not recurse", async () => {
    for (const terms of [3_000, 30_000]) {
      const sql = `SELECT ${Array.from({ length: terms }, () => "1").join("+")}`;
      const r = await checkPostgresSql(sql, policy());
      expect(r.ok || r.error.code === "SQL_REFUSED" || r.error.code === "SQL_SYNTAX", `${terms} terms: ${JSON.stringify(r).slice(0, 200)}`).toBe(true);
    }
    const nested = `SELECT ${"(".repeat(5000)}1${")".repeat(5000)}`;
    const r = await checkPostgresSql(nested, policy());
    expect(r.ok || ["SQL_REFUSED", "SQL_SYNTAX"].includes(r.error.code)).toBe(true);
  });
});

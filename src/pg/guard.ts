/**
 * The first layers of the Postgres guard, before anything reaches the server: PostgreSQL's own
 * parser (libpg_query compiled to WebAssembly) must find exactly one plain read statement, every
 * function, operator and cast in it must be one the server's catalogue declares safe
 * (./functions.ts), and no call may name a function on the deny-list (./denied.ts). The next layer,
 * the READ ONLY transaction with its limits, is in ./session.ts; the last is the operator's
 * SELECT-only role.
 */
import { parse } from "libpg-query";
import type { SqlErrorInfo } from "../sql/index.js";
import { deniedFunction } from "./denied.js";
import { capMessage } from "../errors/index.js";
import { callAllowed, operatorAllowed, typeAllowed, type FunctionPolicy } from "./functions.js";

/**
 * The single statement that may run, cut out of the text (no trailing `;` or comments after it), or
 * why not; `byPolicy` when the allow-list refused it (a catalogue read again might allow it).
 */
export type PgGuardResult = { ok: true; statement: string } | { ok: false; error: SqlErrorInfo; byPolicy?: true };

const refusal = (message: string): SqlErrorInfo => ({ code: "SQL_REFUSED", category: "refused", message });

const ONLY_READS = "only one read-only query (SELECT, WITH … SELECT, VALUES, TABLE) may run";
const MULTIPLE = "only one statement may run: remove everything after the first `;`";
const TOO_DEEP = "the query is nested too deeply to check: write it with fewer nested expressions (an IN list, a CASE, sum() over rows)";

/** Statement kinds with a message the model can act on; every other kind gets {@link ONLY_READS}. */
const KIND_MESSAGES: Record<string, string> = {
  InsertStmt: "writes are not allowed: " + ONLY_READS,
  UpdateStmt: "writes are not allowed: " + ONLY_READS,
  DeleteStmt: "writes are not allowed: " + ONLY_READS,
  MergeStmt: "writes are not allowed: " + ONLY_READS,
  CopyStmt: "COPY is not allowed: " + ONLY_READS,
  DoStmt: "DO blocks are not allowed: " + ONLY_READS,
  CallStmt: "CALL is not allowed: " + ONLY_READS,
  TransactionStmt: "transaction control is not allowed: send one read-only query on its own",
  VariableSetStmt: "SET is not allowed: " + ONLY_READS,
  ExplainStmt: "EXPLAIN is not allowed: " + ONLY_READS,
};

interface Found {
  /** Function calls, as the parser names them (`[name]` or `[schema, name]`). */
  functions: string[][];
  /** Operator names (`[op]` or `[schema, op]`), implied ones included (`IN` is `=`, `BETWEEN` is `>=` and `<=`, …). */
  operators: string[][];
  /** Type names cast to, written as literals (`DATE '…'`) or named elsewhere (`RETURNING`, column definitions). */
  types: string[][];
  /** Field names of column references and indirections, which may call a function in column notation. */
  fields: string[];
  writes: string[];
  into: boolean;
  locking: boolean;
  params: boolean;
  /** Deepest nesting of the parse tree's JSON, in objects and arrays. */
  depth: number;
}

const newFound = (): Found => ({
  functions: [],
  operators: [],
  types: [],
  fields: [],
  writes: [],
  into: false,
  locking: false,
  params: false,
  depth: 0,
});

type Named = { String?: { sval?: string } }[] | undefined;
const names = (list: Named): string[] => (list ?? []).flatMap((p) => (p.String?.sval === undefined ? [] : [p.String.sval]));

/** The operators an A_Expr stands for: its name, or for BETWEEN and its kin the comparisons PostgreSQL rewrites it to. */
function operatorsOf(expr: { kind?: string; name?: Named }): string[][] {
  const kind = expr.kind ?? "AEXPR_OP";
  if (kind.startsWith("AEXPR_NOT_BETWEEN")) return [["<"], [">"]];
  if (kind.startsWith("AEXPR_BETWEEN")) return [[">="], ["<="]];
  const n = names(expr.name);
  return n.length > 0 ? [n] : [];
}

/** Sublink kinds that compare with an operator: `x op ANY (SELECT …)`, `x op ALL (…)`, `(a, b) op (SELECT …)`, `x IN (SELECT …)`. */
const COMPARING_SUBLINKS = new Set(["ANY_SUBLINK", "ALL_SUBLINK", "ROWCOMPARE_SUBLINK"]);

/**
 * Notes what one parse-tree node names: every node kind that carries a function, an operator or a
 * type (the corpus in test/pg/guard-nodes.test.ts has one query per kind), plus nested writes,
 * SELECT INTO, FOR UPDATE/SHARE and bind parameters. TABLESAMPLE's method is not noted: it names a
 * `tsm_handler` function, which only C code (a superuser's) can create, and the built-in ones are
 * volatile, so the function rule would refuse every sample.
 */
function note(key: string, value: unknown, found: Found): void {
  const v = value as Record<string, unknown>;
  switch (key) {
    case "FuncCall":
      found.functions.push(names(v.funcname as Named));
      return;
    case "A_Expr":
      found.operators.push(...operatorsOf(v as { kind?: string; name?: Named }));
      return;
    case "SubLink":
      if (COMPARING_SUBLINKS.has(String(v.subLinkType))) {
        const op = names(v.operName as Named);
        found.operators.push(op.length > 0 ? op : ["="]);
      }
      return;
    case "SortBy":
      if (v.useOp !== undefined) found.operators.push(names(v.useOp as Named));
      return;
    case "CaseExpr":
      if (v.arg !== undefined) found.operators.push(["="]);
      return;
    case "typeName":
    case "TypeName":
      if (v && typeof v === "object") found.types.push(names(v.names as Named));
      return;
    case "ColumnRef":
      found.fields.push(...names(v.fields as Named));
      return;
    case "A_Indirection":
      found.fields.push(...names(v.indirection as Named));
      return;
    case "InsertStmt":
    case "UpdateStmt":
    case "DeleteStmt":
    case "MergeStmt":
      found.writes.push(key);
      return;
    case "intoClause":
      found.into = true;
      return;
    case "lockingClause":
      found.locking = true;
      return;
    case "ParamRef":
      found.params = true;
      return;
  }
}

/**
 * Deepest parse tree (in JSON objects and arrays, about two per level of expression) the guard
 * reads; deeper is refused. PostgreSQL's own parser stops well before (its stack depth limit), so
 * this only bounds the work on a tree libpg_query could still build.
 */
const MAX_TREE_DEPTH = 20_000;

/**
 * Walks a libpg_query JSON tree with an explicit stack (no recursion, so a 3,000-term `1+1+…`
 * cannot overflow the call stack), noting each node in order of appearance; stops descending past
 * `maxDepth` levels and records the depth reached, for the caller to refuse.
 */
function walk(root: unknown, found: Found, maxDepth = MAX_TREE_DEPTH): void {
  const stack: [key: string, value: unknown, depth: number][] = [["", root, 0]];
  while (stack.length > 0) {
    const [key, value, depth] = stack.pop()!;
    if (key !== "") note(key, value, found);
    if (value === null || typeof value !== "object") continue;
    if (depth > found.depth) found.depth = depth;
    if (depth >= maxDepth) continue;
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push(["", value[i], depth + 1]);
    } else {
      const entries = Object.entries(value as Record<string, unknown>);
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i]![0], entries[i]![1], depth + 1]);
    }
  }
}

/** The first use in `found` that `policy` does not allow, as a message for the model; null when all are allowed. */
function disallowed(found: Found, policy: FunctionPolicy): string | null {
  for (const parts of found.functions) {
    if (!callAllowed(policy, parts))
      return `${parts.join(".")}() is not among the functions this database allows (built-in IMMUTABLE or STABLE functions that take no SQL text): query the tables with ordinary expressions instead`;
  }
  const op = found.operators.find((o) => !operatorAllowed(policy, o));
  if (op !== undefined) return `the operator ${op.join(".")} is not among the operators this database allows (those backed by allowed functions)`;
  const type = found.types.find((t) => t.length > 0 && !typeAllowed(policy, t));
  if (type !== undefined)
    return `the type ${type.join(".")} is not among the types this database allows casts to (built-in types and enums whose casts call allowed functions)`;
  const field = found.fields.find((f) => policy.unsafeProjections.has(f));
  if (field !== undefined) return `${field} names a function this database does not allow (t.${field} calls ${field}(t))`;
  return null;
}

/**
 * The functions of `sql` the guard refuses by name, in order of appearance (empty when none or when
 * the text does not parse). The by-name layer on its own, for tests and tools.
 */
export async function deniedFunctionsIn(sql: string): Promise<string[]> {
  let tree: unknown;
  try {
    tree = await parse(sql);
  } catch {
    return [];
  }
  const found = newFound();
  walk(tree, found);
  return found.functions.flatMap((f) => deniedFunction(f.at(-1) ?? "") ?? []);
}

/**
 * Checks `sql` with PostgreSQL's parser: exactly one statement, a plain SELECT (VALUES, TABLE and
 * WITH … SELECT are SELECTs to the parser) with no data-modifying WITH, no SELECT INTO, no FOR
 * UPDATE/SHARE, no bind parameters, no function on the deny-list and, given the server's
 * `functions` policy (./functions.ts), no function, operator, cast or column-notation call it does
 * not allow. A parse error is SQL_SYNTAX with PostgreSQL's message; every refusal is SQL_REFUSED.
 */
export async function checkPostgresSql(sql: string, functions?: FunctionPolicy): Promise<PgGuardResult> {
  let tree: { stmts?: { stmt?: Record<string, unknown>; stmt_location?: number; stmt_len?: number }[] };
  try {
    tree = (await parse(sql)) as typeof tree;
  } catch (err) {
    if (err instanceof RangeError) return { ok: false, error: refusal(TOO_DEEP) };
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: capMessage((err as Error).message) } };
  }
  const stmts = tree.stmts ?? [];
  if (stmts.length === 0) return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "the SQL string contains no statement" } };
  if (stmts.length > 1) return { ok: false, error: refusal(MULTIPLE) };
  const { stmt = {}, stmt_location: start = 0, stmt_len: len } = stmts[0]!;
  const kind = Object.keys(stmt)[0] ?? "";
  if (kind !== "SelectStmt")
    return {
      ok: false,
      error: refusal(
        KIND_MESSAGES[kind] ??
          (kind.endsWith("Stmt") && /^(Create|Alter|Drop|Grant|Truncate|Rename|Comment|Reindex|Cluster|Vacuum)/.test(kind)
            ? "schema changes are not allowed: " + ONLY_READS
            : ONLY_READS),
      ),
    };
  const found = newFound();
  walk(stmt, found);
  if (found.depth >= MAX_TREE_DEPTH) return { ok: false, error: refusal(TOO_DEEP) };
  if (found.writes.length > 0) return { ok: false, error: refusal("writes are not allowed, not even inside WITH: " + ONLY_READS) };
  if (found.into) return { ok: false, error: refusal("SELECT INTO creates a table and is not allowed: " + ONLY_READS) };
  if (found.locking) return { ok: false, error: refusal("FOR UPDATE / FOR SHARE lock rows and are not allowed: " + ONLY_READS) };
  const denied = found.functions.flatMap((f) => deniedFunction(f.at(-1) ?? "") ?? []);
  if (denied.length > 0) {
    return { ok: false, error: refusal(`${denied[0]}() reaches outside the database and is not allowed: query only the tables`) };
  }
  const notAllowed = functions ? disallowed(found, functions) : null;
  if (notAllowed !== null) return { ok: false, error: refusal(notAllowed), byPolicy: true };
  if (found.params) {
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "the query has bind parameters ($1, …); write literal values instead" } };
  }
  const bytes = Buffer.from(sql, "utf8");
  const statement = bytes.subarray(start, len === undefined ? bytes.length : start + len).toString("utf8");
  return { ok: true, statement };
}

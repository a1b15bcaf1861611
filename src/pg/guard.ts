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
import { callAllowed, type FunctionPolicy } from "./functions.js";

/** The single statement that may run, cut out of the text (no trailing `;` or comments after it). */
export type PgGuardResult = { ok: true; statement: string } | { ok: false; error: SqlErrorInfo };

const refusal = (message: string): SqlErrorInfo => ({ code: "SQL_REFUSED", category: "refused", message });

const ONLY_READS = "only one read-only query (SELECT, WITH … SELECT, VALUES, TABLE) may run";
const MULTIPLE = "only one statement may run: remove everything after the first `;`";

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
  /** Operator names (last part), BETWEEN and its kin read as the comparisons they stand for. */
  operators: string[];
  /** Type names (last part) cast to. */
  casts: string[];
  /** Field names of column references and indirections, which may call a function in column notation. */
  fields: string[];
  writes: string[];
  into: boolean;
  locking: boolean;
}

const newFound = (): Found => ({ functions: [], operators: [], casts: [], fields: [], writes: [], into: false, locking: false });

type Named = { String?: { sval?: string } }[] | undefined;
const names = (list: Named): string[] => (list ?? []).flatMap((p) => (p.String?.sval === undefined ? [] : [p.String.sval]));

function operatorNames(expr: { kind?: string; name?: Named }): string[] {
  if (expr.kind?.startsWith("AEXPR_BETWEEN") || expr.kind?.startsWith("AEXPR_NOT_BETWEEN")) return [">=", "<="];
  const n = names(expr.name);
  return n.length > 0 ? [n[n.length - 1]!] : [];
}

/** Walks a libpg_query JSON tree, noting calls, operators, casts, field names, nested writes, SELECT INTO and FOR UPDATE/SHARE. */
function walk(node: unknown, found: Found): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item, found);
    return;
  }
  if (node === null || typeof node !== "object") return;
  for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
    if (key === "FuncCall") {
      found.functions.push(names((value as { funcname?: Named }).funcname));
    } else if (key === "A_Expr") {
      found.operators.push(...operatorNames(value as { kind?: string; name?: Named }));
    } else if (key === "TypeCast") {
      const n = names((value as { typeName?: { names?: Named } }).typeName?.names);
      if (n.length > 0) found.casts.push(n[n.length - 1]!);
    } else if (key === "ColumnRef") {
      found.fields.push(...names((value as { fields?: Named }).fields));
    } else if (key === "A_Indirection") {
      found.fields.push(...names((value as { indirection?: Named }).indirection));
    } else if (key === "InsertStmt" || key === "UpdateStmt" || key === "DeleteStmt" || key === "MergeStmt") {
      found.writes.push(key);
    } else if (key === "intoClause") {
      found.into = true;
    } else if (key === "lockingClause") {
      found.locking = true;
    }
    walk(value, found);
  }
}

/** The first use in `found` that `policy` does not allow, as a message for the model; null when all are allowed. */
function disallowed(found: Found, policy: FunctionPolicy): string | null {
  for (const parts of found.functions) {
    if (!callAllowed(policy, parts))
      return `${parts.join(".")}() is not among the functions this database allows (built-in IMMUTABLE or STABLE functions that take no SQL text): query the tables with ordinary expressions instead`;
  }
  const op = found.operators.find((o) => policy.unsafeOperators.has(o));
  if (op !== undefined) return `the operator ${op} is backed by a function this database does not allow`;
  const cast = found.casts.find((t) => policy.unsafeCastTargets.has(t));
  if (cast !== undefined) return `a cast to ${cast} calls a function this database does not allow`;
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
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: (err as Error).message } };
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
  if (found.writes.length > 0) return { ok: false, error: refusal("writes are not allowed, not even inside WITH: " + ONLY_READS) };
  if (found.into) return { ok: false, error: refusal("SELECT INTO creates a table and is not allowed: " + ONLY_READS) };
  if (found.locking) return { ok: false, error: refusal("FOR UPDATE / FOR SHARE lock rows and are not allowed: " + ONLY_READS) };
  const denied = found.functions.flatMap((f) => deniedFunction(f.at(-1) ?? "") ?? []);
  if (denied.length > 0) {
    return { ok: false, error: refusal(`${denied[0]}() reaches outside the database and is not allowed: query only the tables`) };
  }
  const notAllowed = functions ? disallowed(found, functions) : null;
  if (notAllowed !== null) return { ok: false, error: refusal(notAllowed) };
  if (JSON.stringify(stmt).includes('"ParamRef"')) {
    return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "the query has bind parameters ($1, …); write literal values instead" } };
  }
  const bytes = Buffer.from(sql, "utf8");
  const statement = bytes.subarray(start, len === undefined ? bytes.length : start + len).toString("utf8");
  return { ok: true, statement };
}

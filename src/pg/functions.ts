/**
 * The allow-list layer of the Postgres guard: which functions, operators and casts a query may use,
 * read from the server's own catalogue at connect time. A function is allowed only when PostgreSQL
 * declares it IMMUTABLE or STABLE, it is a built-in (pg_catalog, information_schema), it takes no
 * SQL text or cursor, and its name is not on the deny-list; or when the operator names it in
 * `sql.postgresFunctions`. A name is refused when any of its overloads is not allowed, since the
 * parser gives names, not resolved overloads (`ts_rewrite(tsquery, text)` runs SQL, its other
 * overload does not). Names the catalogue does not hold are refused too.
 */
import { deniedFunction } from "./denied.js";

/** Volatile built-ins that only read the clock or a random source. */
const HARMLESS_VOLATILE = new Set(["random", "random_normal", "clock_timestamp", "timeofday", "gen_random_uuid"]);
/** Argument names of functions that run the SQL text they are given. */
const SQL_ARGUMENTS = new Set(["query", "sql", "command", "cursor"]);
const BUILT_IN_SCHEMAS = new Set(["pg_catalog", "information_schema"]);

/** One row of pg_proc as {@link functionCatalogQuery} returns it. */
export interface ProcRow {
  schema: string;
  name: string;
  /** `f` function, `a` aggregate, `w` window, `p` procedure. */
  kind: string;
  /** `i` immutable, `s` stable, `v` volatile. */
  volatility: string;
  argNames: string[];
  argTypes: string[];
  /** True when the function can be called with one argument of a row (composite or pseudo) type: `t.f` means `f(t)`. */
  projectable: boolean;
}

/** What the server allows, compiled from its catalogue; see {@link compileFunctionPolicy}. */
export interface FunctionPolicy {
  /** Schema → function name → true when every overload there is allowed. */
  bySchema: Map<string, Map<string, boolean>>;
  /** Schemas an unqualified name resolves through (pg_catalog first, as PostgreSQL does). */
  searchPath: string[];
  /** Operator names some operator of which is backed by a function that is not allowed. */
  unsafeOperators: Set<string>;
  /** Type names that some cast backed by a not-allowed function casts to. */
  unsafeCastTargets: Set<string>;
  /** Not-allowed function names callable in column notation (`t.f`). */
  unsafeProjections: Set<string>;
}

/**
 * The catalogue query the policy is compiled from: every function with its schema, kind,
 * volatility, argument names and types, then the operators and casts backed by functions.
 */
export const FUNCTION_CATALOG_SQL = {
  functions: `SELECT n.nspname, p.proname, p.prokind::text, p.provolatile::text,
      coalesce(array_to_string(p.proargnames, ','), ''),
      coalesce((SELECT string_agg(format_type(t, NULL), ',') FROM unnest(p.proargtypes::oid[]) AS t), ''),
      (p.pronargs - p.pronargdefaults <= 1 AND p.pronargs >= 1
        AND (SELECT typtype IN ('c', 'p') FROM pg_type WHERE oid = (p.proargtypes::oid[])[0]))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace`,
  operators: `SELECT o.oprname, pn.nspname, p.proname FROM pg_operator o
    JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace pn ON pn.oid = p.pronamespace`,
  casts: `SELECT t.typname, pn.nspname, p.proname FROM pg_cast c JOIN pg_type t ON t.oid = c.casttarget
    JOIN pg_proc p ON p.oid = c.castfunc JOIN pg_namespace pn ON pn.oid = p.pronamespace`,
  searchPath: "SELECT array_to_string(current_schemas(true), ',')",
} as const;

/** Splits an operator's `sql.postgresFunctions` entry into schema (or null: any schema) and name. */
function parseAllowed(entry: string): { schema: string | null; name: string } {
  const dot = entry.lastIndexOf(".");
  return dot < 0 ? { schema: null, name: entry } : { schema: entry.slice(0, dot), name: entry.slice(dot + 1) };
}

/** Whether one overload is allowed by the rules of this module's header. */
function procAllowed(row: ProcRow, allow: readonly string[] = []): boolean {
  for (const entry of allow) {
    const a = parseAllowed(entry);
    if (a.name === row.name && (a.schema === null || a.schema === row.schema)) return true;
  }
  if (!BUILT_IN_SCHEMAS.has(row.schema)) return false;
  if (row.kind !== "f" && row.kind !== "a" && row.kind !== "w") return false;
  if (deniedFunction(row.name) !== null) return false;
  if (row.argNames.some((n) => SQL_ARGUMENTS.has(n.toLowerCase())) || row.argTypes.includes("refcursor")) return false;
  return row.volatility === "i" || row.volatility === "s" || HARMLESS_VOLATILE.has(row.name);
}

/**
 * Compiles the catalogue's rows into a {@link FunctionPolicy}; `allow` lists the operator's own
 * additions as `name` or `schema.name` (exact, case-sensitive, as PostgreSQL stores them).
 */
export function compileFunctionPolicy(
  procs: readonly ProcRow[],
  operators: readonly { name: string; schema: string; proc: string }[],
  casts: readonly { target: string; schema: string; proc: string }[],
  searchPath: readonly string[],
  allow: readonly string[] = [],
): FunctionPolicy {
  const bySchema = new Map<string, Map<string, boolean>>();
  const unsafeProjections = new Set<string>();
  for (const row of procs) {
    const names = bySchema.get(row.schema) ?? new Map<string, boolean>();
    bySchema.set(row.schema, names);
    const ok = procAllowed(row, allow);
    names.set(row.name, (names.get(row.name) ?? true) && ok);
    if (!ok && row.projectable) unsafeProjections.add(row.name);
  }
  const safe = (schema: string, proc: string): boolean => bySchema.get(schema)?.get(proc) === true;
  const path = searchPath.includes("pg_catalog") ? [...searchPath] : ["pg_catalog", ...searchPath];
  return {
    bySchema,
    searchPath: path,
    unsafeOperators: new Set(operators.filter((o) => !safe(o.schema, o.proc)).map((o) => o.name)),
    unsafeCastTargets: new Set(casts.filter((c) => !safe(c.schema, c.proc)).map((c) => c.target)),
    unsafeProjections,
  };
}

/**
 * Whether a call of `parts` (the parser's name: `[name]`, `[schema, name]`) is allowed: qualified,
 * every overload in that schema; unqualified, every overload in every schema of the search path,
 * and at least one must exist.
 */
export function callAllowed(policy: FunctionPolicy, parts: readonly string[]): boolean {
  if (parts.length === 0 || parts.length > 2) return false;
  const name = parts[parts.length - 1]!;
  const schemas = parts.length === 2 ? [parts[0]!] : policy.searchPath;
  let found = false;
  for (const schema of schemas) {
    const verdict = policy.bySchema.get(schema)?.get(name);
    if (verdict === undefined) continue;
    if (!verdict) return false;
    found = true;
  }
  return found;
}

/**
 * The allow-list layer of the Postgres guard: which functions, operators and types (casts and typed
 * literals) a query may use, read from the server's own catalogue when the source connects and read
 * again whenever the catalogue's fingerprint changes (checked in the transaction of every query, see
 * ./source.ts). A function is allowed only when PostgreSQL declares it IMMUTABLE or STABLE, it is a
 * built-in (pg_catalog, information_schema), it takes no SQL text or cursor, and its name is not on
 * the deny-list; or when the operator names it in `sql.postgresFunctions`. A name is refused when
 * any of its overloads is not allowed, since the parser gives names, not resolved overloads
 * (`ts_rewrite(tsquery, text)` runs SQL, its other overload does not). Operators and types are held
 * to the same rule through the functions behind them. Names the catalogue does not hold are refused.
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

/** One operator of pg_operator as {@link FUNCTION_CATALOG_SQL} returns it. */
export interface OperatorRow {
  schema: string;
  name: string;
  /** Schema and name of the function behind it (`oprcode`). */
  procSchema: string;
  proc: string;
  /** True when its selectivity estimators (run by the planner) are none or built-in. */
  builtInEstimators: boolean;
}

/** One cast backed by a function (pg_cast with a `castfunc`), by its target type. */
export interface CastRow {
  targetSchema: string;
  target: string;
  /** Schema and name of the cast function. */
  schema: string;
  proc: string;
}

/** One type of pg_type with its input function (what a cast from text or a typed literal calls). */
export interface TypeRow {
  schema: string;
  name: string;
  /** `b` base, `c` composite, `d` domain, `e` enum, `p` pseudo, `r` range, `m` multirange. */
  kind: string;
  inputSchema: string;
  input: string;
  /** For an array type, its element type's schema and name ("" otherwise): a cast to it runs the element's input. */
  elementSchema: string;
  element: string;
}

/** What {@link compileFunctionPolicy} reads: the catalogue's rows and the state they were read at. */
export interface Catalogue {
  procs: readonly ProcRow[];
  operators: readonly OperatorRow[];
  casts: readonly CastRow[];
  types: readonly TypeRow[];
  searchPath: readonly string[];
  /** What {@link FUNCTION_CATALOG_SQL}'s `fingerprint` answered before the rows were read. */
  fingerprint: string;
}

/** Schema → name → true when every object of that name there is allowed. */
type Verdicts = Map<string, Map<string, boolean>>;

/**
 * What the server allows, compiled from its catalogue; see {@link compileFunctionPolicy}. An
 * allow-list throughout: a function, operator or type the catalogue did not hold when it was read
 * is refused.
 */
export interface FunctionPolicy {
  /** Schema → function name → true when every overload there is allowed. */
  bySchema: Verdicts;
  /** Schema → operator name → true when every operator of that name there is backed by an allowed function. */
  operators: Verdicts;
  /** Schema → type name → true when casting to it (or writing a literal of it) calls only allowed functions. */
  types: Verdicts;
  /** Schemas an unqualified name resolves through (pg_catalog first, as PostgreSQL does). */
  searchPath: string[];
  /** Not-allowed function names callable in column notation (`t.f`). */
  unsafeProjections: Set<string>;
  /** The catalogue state the policy was compiled from; a query runs only while the server still answers this. */
  fingerprint: string;
}

/**
 * Catalogues whose rows decide the policy: any row added, changed or dropped changes the
 * fingerprint. Of pg_type, composite types and arrays are left out: a user's composite is refused
 * whether it exists or not, an array is judged by its element (created, renamed and dropped with
 * it), and every CREATE TABLE, temporary ones included, adds both, so watching them would make a
 * busy database's DDL read the list again for nothing.
 */
const WATCHED = ["pg_proc", "pg_operator", "pg_cast", "pg_type WHERE typtype <> 'c' AND typcategory <> 'A'", "pg_namespace"];

/**
 * The catalogue queries the policy is compiled from: every function with its schema, kind,
 * volatility, argument names and types; the operators, casts and types with the functions behind
 * them; the search path; and a fingerprint of the catalogue's state (row count and the sum of the
 * row versions' `xmin` of each catalogue it reads, and the search path), cheap enough to read again
 * before every query.
 */
export const FUNCTION_CATALOG_SQL = {
  functions: `SELECT n.nspname, p.proname, p.prokind::text, p.provolatile::text,
      coalesce(array_to_string(p.proargnames, ','), ''),
      coalesce((SELECT string_agg(format_type(t, NULL), ',') FROM unnest(p.proargtypes::oid[]) AS t), ''),
      (p.pronargs - p.pronargdefaults <= 1 AND p.pronargs >= 1
        AND (SELECT typtype IN ('c', 'p') FROM pg_type WHERE oid = (p.proargtypes::oid[])[0]))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace`,
  operators: `SELECT n.nspname, o.oprname, pn.nspname, p.proname,
      (o.oprrest::oid = 0 OR (SELECT pronamespace = 'pg_catalog'::regnamespace FROM pg_proc WHERE oid = o.oprrest::oid))
      AND (o.oprjoin::oid = 0 OR (SELECT pronamespace = 'pg_catalog'::regnamespace FROM pg_proc WHERE oid = o.oprjoin::oid))
    FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
    JOIN pg_proc p ON p.oid = o.oprcode JOIN pg_namespace pn ON pn.oid = p.pronamespace`,
  casts: `SELECT tn.nspname, t.typname, pn.nspname, p.proname FROM pg_cast c JOIN pg_type t ON t.oid = c.casttarget
    JOIN pg_namespace tn ON tn.oid = t.typnamespace JOIN pg_proc p ON p.oid = c.castfunc JOIN pg_namespace pn ON pn.oid = p.pronamespace`,
  types: `SELECT n.nspname, t.typname, t.typtype::text, pn.nspname, p.proname, coalesce(en.nspname, ''), coalesce(e.typname, '')
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace JOIN pg_proc p ON p.oid = t.typinput
    JOIN pg_namespace pn ON pn.oid = p.pronamespace
    LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A' LEFT JOIN pg_namespace en ON en.oid = e.typnamespace`,
  searchPath: "SELECT array_to_string(current_schemas(true), ',')",
  fingerprint: `SELECT concat_ws(' ', ${WATCHED.map((t) => `(SELECT count(*) || ':' || coalesce(sum(xmin::text::int8), 0) FROM pg_catalog.${t})`).join(", ")}, array_to_string(pg_catalog.current_schemas(true), ','))`,
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
 * Kinds of a user's type whose input function is all a cast to them runs: a domain's CHECK, a
 * composite's fields and a range's subtype could call anything (base types need C, a superuser's).
 */
const PLAIN_TYPE_KINDS = new Set(["b", "e"]);

function verdict(map: Verdicts, schema: string, name: string, ok: boolean): void {
  const names = map.get(schema) ?? new Map<string, boolean>();
  map.set(schema, names);
  names.set(name, (names.get(name) ?? true) && ok);
}

/**
 * Compiles the catalogue's rows into a {@link FunctionPolicy}; `allow` lists the operator's own
 * additions as `name` or `schema.name` (exact, case-sensitive, as PostgreSQL stores them). An
 * operator is allowed when the function behind it is and its selectivity estimators are built-in;
 * a type when it is built-in (pg_catalog, information_schema) or a user's enum or base type, its
 * input function is allowed, and every cast to it backed by a function is backed by an allowed one;
 * an array type as its element type.
 */
export function compileFunctionPolicy(catalogue: Catalogue, allow: readonly string[] = []): FunctionPolicy {
  const bySchema: Verdicts = new Map();
  const unsafeProjections = new Set<string>();
  for (const row of catalogue.procs) {
    const ok = procAllowed(row, allow);
    verdict(bySchema, row.schema, row.name, ok);
    if (!ok && row.projectable) unsafeProjections.add(row.name);
  }
  const safe = (schema: string, proc: string): boolean => bySchema.get(schema)?.get(proc) === true;
  const operators: Verdicts = new Map();
  for (const o of catalogue.operators) verdict(operators, o.schema, o.name, safe(o.procSchema, o.proc) && o.builtInEstimators);
  const types: Verdicts = new Map();
  for (const t of catalogue.types) {
    if (t.element !== "") continue;
    const plain = BUILT_IN_SCHEMAS.has(t.schema) || PLAIN_TYPE_KINDS.has(t.kind);
    verdict(types, t.schema, t.name, plain && safe(t.inputSchema, t.input));
  }
  for (const t of catalogue.types) {
    if (t.element !== "") verdict(types, t.schema, t.name, safe(t.inputSchema, t.input) && types.get(t.elementSchema)?.get(t.element) === true);
  }
  for (const c of catalogue.casts) {
    if (!safe(c.schema, c.proc) && types.get(c.targetSchema)?.has(c.target)) verdict(types, c.targetSchema, c.target, false);
  }
  const path = catalogue.searchPath.includes("pg_catalog") ? [...catalogue.searchPath] : ["pg_catalog", ...catalogue.searchPath];
  return { bySchema, operators, types, searchPath: path, unsafeProjections, fingerprint: catalogue.fingerprint };
}

/**
 * Whether `parts` (the parser's name: `[name]` or `[schema, name]`) names only allowed objects in
 * `verdicts`: qualified, every one in that schema; unqualified, every one in every schema of the
 * search path, and at least one must exist (a name the catalogue did not hold is refused).
 */
function resolvesAllowed(verdicts: Verdicts, searchPath: readonly string[], parts: readonly string[]): boolean {
  if (parts.length === 0 || parts.length > 2) return false;
  const name = parts[parts.length - 1]!;
  const schemas = parts.length === 2 ? [parts[0]!] : searchPath;
  let found = false;
  for (const schema of schemas) {
    const ok = verdicts.get(schema)?.get(name);
    if (ok === undefined) continue;
    if (!ok) return false;
    found = true;
  }
  return found;
}

/** Whether an operator named `parts` (`[op]` or `[schema, op]`, as in `OPERATOR(schema.op)`) is allowed. */
export function operatorAllowed(policy: FunctionPolicy, parts: readonly string[]): boolean {
  return resolvesAllowed(policy.operators, policy.searchPath, parts);
}

/** Whether a cast to (or a literal of) the type named `parts` is allowed. */
export function typeAllowed(policy: FunctionPolicy, parts: readonly string[]): boolean {
  return resolvesAllowed(policy.types, policy.searchPath, parts);
}

/**
 * Whether a call of `parts` (the parser's name: `[name]`, `[schema, name]`) is allowed: qualified,
 * every overload in that schema; unqualified, every overload in every schema of the search path,
 * and at least one must exist.
 */
export function callAllowed(policy: FunctionPolicy, parts: readonly string[]): boolean {
  return resolvesAllowed(policy.bySchema, policy.searchPath, parts);
}

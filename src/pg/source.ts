/**
 * A PostgreSQL connection as a reex database source: a small connection pool, the guard (parser,
 * refused functions, READ ONLY transaction with limits), schema introspection from the catalogue,
 * and a bounded snapshot of the text values for matched values. The connection URL (and so its
 * password) stays inside this module: names, messages and logs use the display name only.
 */
import { createHash } from "node:crypto";
import { mkdirSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { capMessage, ReexError } from "../errors/index.js";
import {
  registerSource,
  type ColumnInfo,
  type DatabaseSchema,
  type ExecResult,
  type ExecuteOptions,
  type ExternalSource,
  type SqlValue,
  type TableInfo,
} from "../sql/index.js";
import { compileFunctionPolicy, FUNCTION_CATALOG_SQL, type FunctionPolicy } from "./functions.js";
import { checkPostgresSql } from "./guard.js";
import { ClientStuck, runReadOnly, type CatalogueCheck, type ReadOnlyLimits } from "./session.js";
import { reexTypes } from "./types.js";

/** How long a dropped connection's backend gets to end on its own before it is terminated, ms. */
const BACKEND_END_MS = 500;

/** Settings of one {@link PostgresSource}; the limits match the `sql` config section. */
export interface PostgresSourceOptions {
  /** `postgres://user[:password]@host[:port]/database`; `${NAME}` parts are read from the environment. */
  url: string;
  /** Display name. Default: the database name in the URL. */
  name?: string;
  /** Connections kept open at most. Default 4. */
  poolSize?: number;
  /** Per-query time limit when a call gives none, ms. Default 5000. */
  timeoutMs?: number;
  /** Rows returned per query when a call gives no limit. Default 1000. */
  maxRows?: number;
  /** Largest result, in bytes as PostgreSQL sends the rows (text form, bytea as hex), before a query fails SQL_RUNTIME. Default 32 MiB. */
  maxResultBytes?: number;
  /** How long connecting may take, ms. Default 10000. */
  connectTimeoutMs?: number;
  /** Folder of the matched-values snapshot files. Default ".reex/pg". */
  snapshotDir?: string;
  /** Distinct values per text column in the snapshot at most. Default 50000. */
  maxValuesPerColumn?: number;
  /** Example values per column in the schema. Default 3. */
  examples?: number;
  /**
   * Functions allowed besides the built-in IMMUTABLE/STABLE ones, as `name` or `schema.name`
   * (exact, as PostgreSQL stores them): e.g. an extension's. Default none.
   */
  allowFunctions?: string[];
}

/** Counters of a source's pool, for health checks. */
export interface PostgresPoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** True for `postgres://` and `postgresql://` URLs. */
export function isPostgresUrl(text: string): boolean {
  return /^postgres(ql)?:\/\//i.test(text.trim());
}

/** True for a Postgres source setting: a `postgres://` URL, optionally as `name=postgres://…`. */
export function isPostgresSetting(text: string): boolean {
  return /^([A-Za-z0-9_.-]+=)?postgres(ql)?:\/\//i.test(text.trim());
}

/** Expands `${NAME}` from the environment; a missing variable is CONFIG_INVALID (named, never its value). */
export function expandUrl(url: string, env: NodeJS.ProcessEnv = process.env): string {
  return url.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const value = env[name];
    if (value === undefined) throw new ReexError("CONFIG_INVALID", `the PostgreSQL URL refers to \${${name}}, which is not set in the environment`);
    return encodeURIComponent(value);
  });
}

/** The display name a URL gives when none is set: its database name (else the user name, else "postgres"). */
export function defaultSourceName(url: string): string {
  try {
    const u = new URL(url.replace(/\$\{[^}]*\}/g, "x"));
    return decodeURIComponent(u.pathname.replace(/^\//, "")) || decodeURIComponent(u.username) || "postgres";
  } catch {
    throw new ReexError("CONFIG_INVALID", "a PostgreSQL source is not a valid postgres:// URL");
  }
}

/** Splits a `name=postgres://…` setting into its name and URL (the name defaults to the URL's database). */
export function parseSourceSetting(setting: string): { name: string; url: string } {
  const m = /^([A-Za-z0-9_.-]+)=(postgres(?:ql)?:\/\/.*)$/i.exec(setting.trim());
  const url = m ? m[2]! : setting.trim();
  if (!isPostgresUrl(url)) throw new ReexError("CONFIG_INVALID", "a PostgreSQL source must be a postgres:// URL, optionally as name=postgres://…");
  return { name: m ? m[1]! : defaultSourceName(url), url };
}

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;
const NON_TEXT =
  /^(smallint|integer|bigint|numeric|real|double precision|boolean|bytea|json|jsonb|date|time|timestamp|interval|oid|uuid|money|point|inet|cidr|tsvector)\b|\[\]$/;

/** A PostgreSQL database behind the {@link ExternalSource} seam. Create with {@link openPostgresSource}. */
export class PostgresSource implements ExternalSource {
  readonly kind = "postgres" as const;
  readonly dialect = "PostgreSQL";
  readonly key: string;
  readonly name: string;
  schema: DatabaseSchema | undefined;
  valuesPath: string | undefined;
  private readonly pool: pg.Pool;
  private readonly limits: ReadOnlyLimits;
  private readonly snapshotDir: string;
  private readonly maxValuesPerColumn: number;
  private readonly examples: number;
  private readonly allowFunctions: string[];
  private functions: Promise<FunctionPolicy> | undefined;
  /** The policy {@link functions} resolved to, once it has. */
  private current: FunctionPolicy | undefined;
  private closed = false;

  constructor(options: PostgresSourceOptions) {
    const urlName = defaultSourceName(options.url); // also rejects a malformed URL without echoing it
    this.name = options.name ?? urlName;
    this.key = `postgres:${this.name}`;
    this.limits = { timeoutMs: options.timeoutMs ?? 5000, maxRows: options.maxRows ?? 1000, maxResultBytes: options.maxResultBytes ?? 32 * 1024 * 1024 };
    this.snapshotDir = resolve(options.snapshotDir ?? ".reex/pg");
    this.maxValuesPerColumn = options.maxValuesPerColumn ?? 50_000;
    this.examples = options.examples ?? 3;
    this.allowFunctions = options.allowFunctions ?? [];
    this.pool = new pg.Pool({
      connectionString: expandUrl(options.url),
      max: options.poolSize ?? 4,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      idleTimeoutMillis: 30_000,
      application_name: "reex",
      types: reexTypes,
    });
    // An idle connection that breaks is dropped by the pool; without a listener the error would crash the process.
    this.pool.on("error", () => {});
  }

  /** Pool counters: connections open, idle, and callers waiting for one. */
  stats(): PostgresPoolStats {
    return { total: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  /**
   * Runs one query through every guard layer; never rejects for bad SQL (see {@link ExecResult}).
   * The allow-list is checked against the catalogue in the query's own transaction: when the
   * catalogue changed since the list was read (an operator, cast, type or function created,
   * altered or dropped), the list is read again and the query checked again before it runs. A
   * query the list refuses is checked again too when the catalogue changed, so that what was
   * created since is judged by the catalogue that holds it.
   */
  async execute(sql: string, options: ExecuteOptions = {}): Promise<ExecResult> {
    for (let attempt = 0; attempt < 3; attempt++) {
      let functions: FunctionPolicy;
      try {
        functions = await this.functionPolicy();
      } catch (err) {
        return { ok: false, error: { code: "DB_UNREACHABLE", category: "runtime", message: (err as Error).message }, elapsedMs: 0 };
      }
      const checked = await checkPostgresSql(sql, functions);
      if (!checked.ok) {
        if (checked.byPolicy && (await this.catalogueChanged(functions))) continue;
        return { ok: false, error: checked.error, elapsedMs: 0 };
      }
      let stale = false;
      const result = await this.runChecked(checked.statement, options, {
        sql: FUNCTION_CATALOG_SQL.fingerprint,
        accept: (fingerprint) => !(stale = fingerprint !== functions.fingerprint),
      });
      if (!stale) return result;
      this.forget(functions);
    }
    return {
      ok: false,
      error: { code: "SQL_REFUSED", category: "refused", message: "the database's catalogue kept changing while the query was checked; try again" },
      elapsedMs: 0,
    };
  }

  /** Whether the catalogue changed since `policy` was read (then it is dropped); false when the server cannot say. */
  private async catalogueChanged(policy: FunctionPolicy): Promise<boolean> {
    const r = await this.runChecked(FUNCTION_CATALOG_SQL.fingerprint, { timeoutMs: 10_000 });
    if (!r.ok || r.rows[0]?.[0] === policy.fingerprint) return false;
    this.forget(policy);
    return true;
  }

  /**
   * The transaction layer alone: runs `statement` in the READ ONLY transaction with the limits,
   * skipping the parser check. For tests of that layer and for reex's own catalogue queries.
   */
  async runChecked(statement: string, options: ExecuteOptions = {}, catalogue?: CatalogueCheck): Promise<ExecResult> {
    if (this.closed)
      return { ok: false, error: { code: "EXECUTOR_UNAVAILABLE", category: "runtime", message: `database "${this.name}" is closed` }, elapsedMs: 0 };
    if (options.signal?.aborted)
      return { ok: false, error: { code: "SQL_TIMEOUT", category: "timeout", message: "the query was cancelled before it started" }, elapsedMs: 0 };
    const limits: ReadOnlyLimits = {
      timeoutMs: options.timeoutMs ?? this.limits.timeoutMs,
      maxRows: options.maxRows ?? this.limits.maxRows,
      maxResultBytes: this.limits.maxResultBytes,
    };
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      return { ok: false, error: { code: "DB_UNREACHABLE", category: "runtime", message: this.unreachable(err) }, elapsedMs: 0 };
    }
    try {
      const result = await runReadOnly(client, statement, limits, catalogue);
      client.release();
      return result;
    } catch (err) {
      const pid = (client as unknown as { processID: number | null }).processID;
      client.release(err instanceof Error ? err : new Error(String(err)));
      if (err instanceof ClientStuck) {
        if (pid !== null) await this.endBackend(pid);
        if (err.result) return err.result;
        return {
          ok: false,
          error: {
            code: "SQL_TIMEOUT",
            category: "timeout",
            message: `the query ran past its ${limits.timeoutMs} ms time limit and its connection was dropped`,
          },
          elapsedMs: limits.timeoutMs,
        };
      }
      return { ok: false, error: { code: "SQL_RUNTIME", category: "runtime", message: capMessage((err as Error).message) }, elapsedMs: 0 };
    }
  }

  /**
   * After a dropped connection: waits (bounded) until its backend is gone, terminating it if it is
   * still there, so that no query of reex runs on after its answer. Best effort: the backend's own
   * statement and idle timeouts end it anyway.
   */
  private async endBackend(pid: number): Promise<void> {
    const until = performance.now() + BACKEND_END_MS;
    const alive = async (): Promise<boolean> => (await this.pool.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount !== 0;
    const settle = async (): Promise<void> => {
      while (await alive()) {
        if (performance.now() > until) {
          await this.pool.query("SELECT pg_terminate_backend($1)", [pid]);
          return;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([settle(), new Promise<void>((r) => (timer = setTimeout(r, 2 * BACKEND_END_MS)))]);
    } catch {
      // the server is unreachable or the role may not see the backend: its own timeouts end it
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * What the guard allows on this server, read from its catalogue (pg_proc, pg_operator, pg_cast,
   * pg_type) and kept until {@link execute} finds the catalogue changed; a failed read is retried on
   * the next call. Throws DB_UNREACHABLE.
   */
  functionPolicy(): Promise<FunctionPolicy> {
    if (!this.functions) {
      const reading = this.readFunctionPolicy();
      this.functions = reading;
      reading.then(
        (policy) => {
          if (this.functions === reading) this.current = policy;
        },
        () => {
          if (this.functions === reading) this.functions = undefined;
        },
      );
    }
    return this.functions;
  }

  /** Drops `policy` when it is still the one kept, so that the next query reads the catalogue again. */
  private forget(policy: FunctionPolicy): void {
    if (this.current === policy) {
      this.current = undefined;
      this.functions = undefined;
    }
  }

  private async readFunctionPolicy(): Promise<FunctionPolicy> {
    const q = async (sql: string): Promise<string[][]> => {
      const r = await this.runChecked(sql, { timeoutMs: 30_000, maxRows: 1_000_000 });
      if (!r.ok)
        throw new ReexError(
          "DB_UNREACHABLE",
          r.error.code === "DB_UNREACHABLE" ? r.error.message : `could not read the function catalogue of database "${this.name}": ${r.error.message}`,
        );
      return r.rows.map((row) => row.map((v) => (v === null ? "" : String(v))));
    };
    const split = (text: string | undefined): string[] => (text ? text.split(",") : []);
    const yes = (v: string | undefined): boolean => v === "1" || v === "true";
    // read first: a change while the rows are read leaves the policy newer than its fingerprint, never older
    const fingerprint = (await q(FUNCTION_CATALOG_SQL.fingerprint))[0]?.[0] ?? "";
    const procs = (await q(FUNCTION_CATALOG_SQL.functions)).map(([schema, name, kind, volatility, argNames, argTypes, projectable]) => ({
      schema: schema!,
      name: name!,
      kind: kind!,
      volatility: volatility!,
      argNames: split(argNames),
      argTypes: split(argTypes),
      projectable: yes(projectable),
    }));
    const operators = (await q(FUNCTION_CATALOG_SQL.operators)).map(([schema, name, procSchema, proc, estimators]) => ({
      schema: schema!,
      name: name!,
      procSchema: procSchema!,
      proc: proc!,
      builtInEstimators: yes(estimators),
    }));
    const casts = (await q(FUNCTION_CATALOG_SQL.casts)).map(([targetSchema, target, schema, proc]) => ({
      targetSchema: targetSchema!,
      target: target!,
      schema: schema!,
      proc: proc!,
    }));
    const types = (await q(FUNCTION_CATALOG_SQL.types)).map(([schema, name, kind, inputSchema, input, elementSchema, element]) => ({
      schema: schema!,
      name: name!,
      kind: kind!,
      inputSchema: inputSchema!,
      input: input!,
      elementSchema: elementSchema ?? "",
      element: element ?? "",
    }));
    const searchPath = split((await q(FUNCTION_CATALOG_SQL.searchPath))[0]?.[0]);
    return compileFunctionPolicy({ procs, operators, casts, types, searchPath, fingerprint }, this.allowFunctions);
  }

  /** Checks the server answers; throws DB_UNREACHABLE naming only the display name. */
  async ping(): Promise<void> {
    const r = await this.runChecked("SELECT 1", { timeoutMs: 10_000 });
    if (!r.ok)
      throw new ReexError(
        "DB_UNREACHABLE",
        r.error.code === "DB_UNREACHABLE" ? r.error.message : `PostgreSQL database "${this.name}" did not answer: ${r.error.message}`,
      );
  }

  /** Reads tables (and views), columns, types, keys, comments and example values from the catalogue; throws DB_UNREACHABLE. */
  async loadSchema(): Promise<DatabaseSchema> {
    const q = async (sql: string): Promise<SqlValue[][]> => {
      const r = await this.runChecked(sql, { timeoutMs: 30_000, maxRows: 100_000 });
      if (!r.ok) throw new ReexError("DB_UNREACHABLE", `could not read the schema of database "${this.name}": ${r.error.message}`);
      return r.rows;
    };
    const rels = await q(
      `SELECT c.oid::int8, c.relname, c.relkind::text, obj_description(c.oid, 'pg_class')
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY (current_schemas(false)) AND NOT c.relispartition
         AND has_table_privilege(c.oid, 'SELECT')
       ORDER BY array_position(current_schemas(false), n.nspname), c.oid`,
    );
    const oids = rels.map((r) => Number(r[0]));
    const list = oids.length > 0 ? oids.join(",") : "0";
    const cols = await q(
      `SELECT a.attrelid::int8, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, col_description(a.attrelid, a.attnum), a.attnum
       FROM pg_attribute a WHERE a.attrelid IN (${list}) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum`,
    );
    const cons = await q(
      `SELECT contype::text, conrelid::int8, conkey::int2[]::text, confrelid::int8, confkey::int2[]::text FROM pg_constraint
       WHERE contype IN ('p', 'f') AND conrelid IN (${list}) ORDER BY conrelid, contype DESC, conname`,
    );
    const seen = new Set<string>();
    const tables: (TableInfo & { oid: number; attnums: number[]; kind: string; tableComment: string | null })[] = [];
    for (const [oid, name, kind, comment] of rels) {
      if (seen.has(name as string)) continue;
      seen.add(name as string);
      tables.push({
        oid: Number(oid),
        name: name as string,
        kind: kind as string,
        tableComment: comment as string | null,
        columns: [],
        attnums: [],
        rowCount: null,
        sql: "",
        foreignKeys: [],
      });
    }
    const byOid = new Map(tables.map((t) => [t.oid, t]));
    for (const [rel, name, type, notNull, comment, attnum] of cols) {
      const t = byOid.get(Number(rel));
      if (!t) continue;
      const c: ColumnInfo = { name: name as string, type: type as string, primaryKey: false, notNull: notNull === 1, examples: [] };
      if (comment) c.comment = (comment as string).trim().replace(/\s+/g, " ");
      t.columns.push(c);
      t.attnums.push(Number(attnum));
    }
    const keys = (text: SqlValue | undefined): number[] => JSON.parse(String(text).replace(/^\{/, "[").replace(/\}$/, "]")) as number[];
    for (const [type, rel, conkey, frel, confkey] of cons) {
      const t = byOid.get(Number(rel));
      if (!t) continue;
      const from = keys(conkey).map((k) => t.columns[t.attnums.indexOf(k)]);
      if (type === "p") {
        for (const c of from) if (c) c.primaryKey = true;
        continue;
      }
      const ref = byOid.get(Number(frel));
      if (!ref) continue;
      keys(confkey).forEach((k, i) => {
        const to = ref.columns[ref.attnums.indexOf(k)];
        const fromCol = from[i];
        if (to && fromCol) t.foreignKeys.push({ table: t.name, column: fromCol.name, refTable: ref.name, refColumn: to.name });
      });
    }
    for (const t of tables) {
      const count = await this.runChecked(`SELECT count(*) FROM (SELECT 1 FROM ${quote(t.name)} LIMIT 1000000) AS s`, { timeoutMs: 10_000 });
      t.rowCount = count.ok ? Number(count.rows[0]![0]) : null;
      if (this.examples > 0) {
        for (const c of t.columns) {
          if (/^(bytea|json|jsonb|tsvector)\b/.test(c.type)) continue;
          const r = await this.runChecked(
            `SELECT DISTINCT v FROM (SELECT ${quote(c.name)} AS v FROM ${quote(t.name)} LIMIT 10000) AS s WHERE v IS NOT NULL AND v::text <> '' LIMIT ${this.examples}`,
            { timeoutMs: 5000 },
          );
          if (!r.ok) continue;
          c.examples = r.rows.map(([v]) => {
            if (typeof v === "number") return v;
            if (typeof v === "bigint") return Number(v);
            const s = String(v).replace(/\s+/g, " ").trim();
            return s.length > 40 ? `${s.slice(0, 40)}...` : s;
          });
        }
      }
      t.sql = ddl(t, t.tableComment, t.kind);
    }
    const out: TableInfo[] = tables.map(({ name, columns, rowCount, sql, foreignKeys }) => ({ name, columns, rowCount, sql, foreignKeys }));
    const schema: DatabaseSchema = { path: this.key, tables: out, foreignKeys: out.flatMap((t) => t.foreignKeys) };
    this.schema = schema;
    return schema;
  }

  /**
   * Writes the matched-values snapshot: a SQLite file with one table per table of the schema and one
   * TEXT column per text column, holding up to `maxValuesPerColumn` distinct values each, each read
   * by a bounded query. reex's value index is then built from it as from any SQLite file.
   */
  async valuesFile(): Promise<string> {
    const schema = this.schema ?? (await this.loadSchema());
    mkdirSync(this.snapshotDir, { recursive: true });
    const file = join(this.snapshotDir, `values-${createHash("sha256").update(this.key).digest("hex").slice(0, 16)}.sqlite`);
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    const columns: { table: string; column: string; values: string[] }[] = [];
    for (const t of schema.tables) {
      for (const c of t.columns) {
        if (NON_TEXT.test(c.type)) continue;
        const r = await this.runChecked(
          `SELECT DISTINCT ${quote(c.name)}::text FROM ${quote(t.name)} WHERE ${quote(c.name)} IS NOT NULL AND length(${quote(c.name)}::text) BETWEEN 1 AND 100 LIMIT ${this.maxValuesPerColumn}`,
          { timeoutMs: 10_000, maxRows: this.maxValuesPerColumn },
        );
        if (r.ok && r.rows.length > 0) columns.push({ table: t.name, column: c.name, values: r.rows.map((row) => String(row[0])) });
      }
    }
    const out = new Database(tmp);
    try {
      out.pragma("journal_mode = OFF");
      const byTable = new Map<string, typeof columns>();
      for (const c of columns) byTable.set(c.table, [...(byTable.get(c.table) ?? []), c]);
      out.transaction(() => {
        for (const [table, cs] of byTable) {
          out.exec(`CREATE TABLE ${quote(table)} (${cs.map((c) => `${quote(c.column)} TEXT`).join(", ")})`);
          const insert = out.prepare(`INSERT INTO ${quote(table)} VALUES (${cs.map(() => "?").join(", ")})`);
          const n = Math.max(...cs.map((c) => c.values.length));
          for (let i = 0; i < n; i++) insert.run(cs.map((c) => c.values[i] ?? null));
        }
      })();
      out.close();
      renameSync(tmp, file);
    } catch (err) {
      if (out.open) out.close();
      rmSync(tmp, { force: true });
      throw err;
    }
    this.valuesPath = file;
    return file;
  }

  /** Closes the pool; later queries answer EXECUTOR_UNAVAILABLE. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  private unreachable(err: unknown): string {
    const why = (err as { code?: string }).code ?? "";
    const reason =
      why === "28P01" || why === "28000"
        ? "the login was refused (check the user and password)"
        : why === "3D000"
          ? "the database does not exist"
          : /timeout/i.test((err as Error).message ?? "")
            ? "connecting timed out"
            : why
              ? `connection failed (${why})`
              : "connection failed";
    return `PostgreSQL database "${this.name}" is unreachable: ${reason}`;
  }
}

function ddl(t: TableInfo, comment: string | null, kind: string): string {
  const lines: { body: string; note?: string }[] = t.columns.map((c) => ({
    body: `  ${quote(c.name)} ${c.type}${c.notNull ? " NOT NULL" : ""}`,
    ...(c.comment ? { note: c.comment } : {}),
  }));
  const pk = t.columns.filter((c) => c.primaryKey).map((c) => quote(c.name));
  if (pk.length > 0) lines.push({ body: `  PRIMARY KEY (${pk.join(", ")})` });
  for (const fk of t.foreignKeys) lines.push({ body: `  FOREIGN KEY (${quote(fk.column)}) REFERENCES ${quote(fk.refTable)} (${quote(fk.refColumn)})` });
  const body = lines.map((l, i) => `${l.body}${i < lines.length - 1 ? "," : ""}${l.note ? ` -- ${l.note}` : ""}`).join("\n");
  const head = comment ? `-- ${comment.trim().replace(/\s+/g, " ")}\n` : "";
  return `${head}CREATE ${kind === "v" || kind === "m" ? "VIEW" : "TABLE"} ${quote(t.name)} (\n${body}\n)`;
}

/**
 * Connects a Postgres source, reads its schema and values snapshot, and registers it so the
 * executor, `loadSchema` and the prompt builder route its key to it. Throws DB_UNREACHABLE.
 */
export async function openPostgresSource(options: PostgresSourceOptions): Promise<PostgresSource> {
  const source = new PostgresSource(options);
  try {
    await source.ping();
    await source.functionPolicy();
    await source.loadSchema();
    await source.valuesFile();
  } catch (err) {
    await source.close();
    throw err;
  }
  registerSource(source);
  return source;
}

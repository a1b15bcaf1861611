/**
 * The allow-list layer against a real PostgreSQL server: SQL run from a string (ts_stat, ts_rewrite,
 * the *_to_xml family), signals, files, settings, statistics resets, WAL and backups, locks and large
 * objects, in every call form (plain, schema-qualified, quoted, FROM f(), ROWS FROM, LATERAL, casts,
 * operators and column notation backed by a user's function, inside CTEs, subqueries, FILTER, OVER,
 * ORDER BY and GROUP BY). As the SELECT-only role and as the superuser, each one is refused before it
 * runs: another session of the same role survives, no large object, file or setting changed, and the
 * ordinary functions a text-to-SQL model writes still run.
 */
import { existsSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { PostgresSource } from "../../src/pg/index.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";

let server: PgServer;
let admin: pg.Client;

/** The security probe's own inputs. */
const PROBE = [
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_terminate_backend(pid)::text) FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid()')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''/etc/passwd''))')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(string_agg(f, '','')) FROM pg_ls_dir(''.'') AS f')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_reload_conf()::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_stat_reset()::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(lo_import(''/etc/hostname'')::text)')",
  "SELECT ts_rewrite('a'::tsquery, 'SELECT ''a''::tsquery, ''b''::tsquery FROM pg_stat_activity WHERE pg_terminate_backend(pid)')",
];

/** At least forty more, by family and call form. */
const MORE = [
  // SQL from a string
  "SELECT pg_catalog.ts_stat('SELECT to_tsvector(''x'')')",
  `SELECT * FROM "ts_stat"('SELECT to_tsvector(''x'')')`,
  "SELECT * FROM ROWS FROM (ts_stat('SELECT to_tsvector(''x'')'), generate_series(1, 2)) AS t",
  "SELECT (ts_stat('SELECT to_tsvector(''x'')')).word",
  "SELECT * FROM ts_stat(E'SELECT to_tsvector(pg_reload_conf()::text)')",
  "SELECT * FROM ts_stat($q$SELECT to_tsvector(pg_stat_reset()::text)$q$)",
  "SELECT * FROM ts_stat('SELECT to_tsvector(''x'')', 'a')",
  "WITH x AS (SELECT * FROM ts_stat('SELECT to_tsvector(''x'')')) SELECT * FROM x",
  "SELECT count(*) FROM customers WHERE EXISTS (SELECT 1 FROM ts_stat('SELECT to_tsvector(''x'')'))",
  "SELECT * FROM customers c, LATERAL ts_stat('SELECT to_tsvector(''x'')') AS s",
  "SELECT query_to_xml('SELECT pg_read_file(''/etc/passwd'')', true, true, '')",
  "SELECT query_to_xmlschema('SELECT 1', true, true, '')",
  "SELECT query_to_xml_and_xmlschema('SELECT 1', true, true, '')",
  "SELECT cursor_to_xml('c'::refcursor, 1, true, true, '')",
  "SELECT database_to_xml(true, true, '')",
  "SELECT schema_to_xml('public', true, true, '')",
  "SELECT * FROM xpath('/a', query_to_xml('SELECT 1', true, true, ''))",
  // signals
  "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_stat_activity",
  `SELECT "pg_cancel_backend"(pg_backend_pid())`,
  "SELECT * FROM (SELECT pid FROM pg_stat_activity) AS s WHERE pg_terminate_backend(s.pid)",
  "SELECT 1 WHERE pg_cancel_backend(pg_backend_pid())",
  "SELECT pg_reload_conf()",
  "SELECT pg_rotate_logfile()",
  "SELECT pg_log_backend_memory_contexts(pg_backend_pid())",
  "SELECT count(*) FROM customers GROUP BY pg_terminate_backend(customer_id)",
  // files
  "SELECT pg_read_binary_file('/etc/passwd')",
  `SELECT "pg_catalog"."pg_read_file"('/etc/passwd')`,
  "SELECT pg_catalog . pg_read_file ( '/etc/hostname' )",
  "SELECT * FROM pg_ls_logdir()",
  "SELECT * FROM pg_ls_waldir()",
  "SELECT pg_stat_file('postgresql.conf')",
  "SELECT * FROM ROWS FROM (pg_ls_dir('/'), generate_series(1, 3))",
  "SELECT pg_current_logfile()",
  "SELECT pg_read_file(setting || '/postgresql.conf') FROM pg_settings WHERE name = 'data_directory'",
  "SELECT CAST(pg_read_file('/etc/passwd') AS int)",
  "SELECT ARRAY[pg_read_file('/etc/passwd')]",
  "VALUES (pg_read_file('/etc/passwd'))",
  "SELECT count(*) FILTER (WHERE pg_read_file('/etc/passwd') IS NULL) FROM customers",
  // settings, statistics, WAL, backups, locks, sequences
  "SELECT set_config('work_mem', '1GB', false)",
  "SELECT pg_catalog.set_config('default_transaction_read_only', 'off', true)",
  "SELECT pg_stat_reset()",
  "SELECT pg_stat_reset_shared('bgwriter')",
  "SELECT pg_stat_reset_single_table_counters('customers'::regclass)",
  "SELECT pg_create_restore_point('x')",
  "SELECT pg_switch_wal()",
  "SELECT pg_backup_start('x')",
  "SELECT pg_try_advisory_xact_lock(1)",
  "SELECT row_number() OVER (ORDER BY pg_advisory_lock(customer_id)) FROM customers",
  "SELECT * FROM customers ORDER BY pg_sleep(0.01)",
  "SELECT setval('counter', 1)",
  "SELECT txid_current()",
  // large objects
  "SELECT lo_import('/etc/passwd')",
  "SELECT lo_export(1, '/tmp/reex-lo-2')",
  "SELECT lo_create(0)",
  "SELECT pg_catalog.lo_creat(-1)",
  "SELECT lo_from_bytea(0, 'x')",
  "SELECT lo_put(1, 0, 'x')",
  "SELECT lo_get(1)",
  "SELECT lo_unlink(1)",
  "SELECT * FROM customers WHERE customer_id = lo_import('/etc/hostname')",
  // a user's functions, in function, column, operator and cast form
  "SELECT public.leak(c) FROM customers AS c",
  "SELECT c.leak FROM customers AS c",
  "SELECT (c).leak FROM customers AS c",
  "SELECT 1 ### 2",
  "SELECT 1 OPERATOR(public.###) 2",
  "SELECT 1::mood",
  "SELECT CAST(2 AS mood)",
  // names the catalogue does not hold
  "SELECT dblink_connect('host=127.0.0.1')",
  `SELECT "PG_READ_FILE"('/etc/passwd')`,
];

/** What a text-to-SQL model ordinarily writes on PostgreSQL, which must keep running. */
const ORDINARY = [
  "SELECT lower(first_name), count(*), max(signup_date) FROM customers GROUP BY 1 ORDER BY 2 DESC LIMIT 3",
  "SELECT date_trunc('month', order_date::timestamp) AS m, sum(shipping_fee) FROM orders GROUP BY m ORDER BY m LIMIT 2",
  "SELECT EXTRACT(YEAR FROM order_date::date) AS y, count(*) FROM orders GROUP BY y",
  "SELECT substring(email FROM 1 FOR 3), trim(both ' ' from city), position('a' in city) FROM customers LIMIT 1",
  "SELECT coalesce(nullif(city, ''), 'none'), greatest(1, 2), round(avg(customer_id)::numeric, 2) FROM customers GROUP BY 1 LIMIT 1",
  "SELECT string_agg(country, ',' ORDER BY country), array_agg(DISTINCT tier) FROM customers",
  "SELECT customer_id, row_number() OVER (PARTITION BY country ORDER BY signup_date), rank() OVER w FROM customers WINDOW w AS (ORDER BY customer_id) LIMIT 3",
  "SELECT * FROM generate_series(1, 3) AS g",
  "SELECT now() - interval '1 day' > '2020-01-01'::date, current_date, random() < 2",
  "SELECT to_char(order_date::date, 'YYYY-MM'), regexp_replace(city, 'a', 'b') FROM orders o JOIN customers c USING (customer_id) LIMIT 1",
  "SELECT count(*) FROM customers WHERE city ILIKE '%a%' AND customer_id BETWEEN 1 AND 50 AND country IN ('DE', 'AU')",
  "SELECT to_tsvector('english', 'the quick fox') @@ to_tsquery('fox')",
  "SELECT pg_typeof(1), length('abc'), abs(-2), upper('x') || 'y'",
];

async function sessionsOf(role: string): Promise<number[]> {
  const r = await admin.query("SELECT pid FROM pg_stat_activity WHERE usename = $1 ORDER BY pid", [role]);
  return r.rows.map((row) => row.pid as number);
}

beforeAll(async () => {
  server = await startPostgres();
  await loadExamples(server);
  admin = new pg.Client({ connectionString: server.adminUrlOf("reex_retail") });
  await admin.connect();
  await admin.query("CREATE SEQUENCE counter");
  await admin.query("CREATE FUNCTION public.leak(customers) RETURNS text LANGUAGE sql STABLE AS $$ SELECT pg_read_file('/etc/hostname') $$");
  await admin.query("CREATE FUNCTION public.evilop(int, int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT $1 + $2 $$");
  await admin.query("CREATE OPERATOR public.### (LEFTARG = int, RIGHTARG = int, FUNCTION = public.evilop)");
  await admin.query("CREATE TYPE mood AS ENUM ('sad', 'ok')");
  await admin.query("CREATE FUNCTION public.tomood(int) RETURNS mood LANGUAGE sql IMMUTABLE AS $$ SELECT 'ok'::mood $$");
  await admin.query("CREATE CAST (int AS mood) WITH FUNCTION public.tomood(int)");
  await admin.query("GRANT USAGE ON SEQUENCE counter TO reex_reader");
});

afterAll(async () => {
  await admin?.end();
  await server?.stop();
});

const settings = async (): Promise<string> =>
  (await admin.query("SELECT string_agg(name || '=' || setting, ',' ORDER BY name) AS s FROM pg_settings WHERE context <> 'internal'")).rows[0].s as string;

describe.each([
  ["the SELECT-only role", "reex_reader", () => server.readerUrl("reex_retail")],
  ["the superuser", "postgres", () => server.adminUrlOf("reex_retail")],
] as const)("as %s", (_, role, url) => {
  test("every probe input and every other attempt is refused before it runs, and another session of the role survives", async () => {
    const source = new PostgresSource({ url: url(), name: "retail", poolSize: 2, timeoutMs: 3000 });
    const victim = new pg.Client({ connectionString: url() });
    await victim.connect();
    const victimPid = (await victim.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
    const before = await settings();
    try {
      const ran: string[] = [];
      for (const sql of [...PROBE, ...MORE]) {
        const r = await source.execute(sql);
        if (r.ok || r.error.code !== "SQL_REFUSED") ran.push(`${sql} → ${r.ok ? "ran" : `${r.error.code}: ${r.error.message}`}`);
      }
      expect(ran).toEqual([]);
      expect(await sessionsOf(role)).toContain(victimPid);
      expect((await victim.query("SELECT 1 AS one")).rows[0].one).toBe(1);
      expect(await settings()).toBe(before);
      expect((await admin.query("SELECT count(*)::int AS n FROM pg_largeobject_metadata")).rows[0].n).toBe(0);
      expect((await admin.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'")).rows[0].n).toBe(0);
      expect(existsSync("/tmp/reex-lo-2")).toBe(false);
    } finally {
      await victim.end();
      await source.close();
    }
  });

  test("the functions, operators and casts of ordinary questions still run", async () => {
    const source = new PostgresSource({ url: url(), name: "retail", poolSize: 2, timeoutMs: 3000 });
    try {
      for (const sql of ORDINARY) {
        const r = await source.execute(sql);
        expect(r.ok ? "ok" : `${r.error.code}: ${r.error.message}`, sql).toBe("ok");
      }
    } finally {
      await source.close();
    }
  });
});

test("an operator allows a function of its own by name, and only that one", async () => {
  const source = new PostgresSource({ url: server.readerUrl("reex_retail"), name: "retail", poolSize: 1, allowFunctions: ["public.evilop"] });
  try {
    expect(await source.execute("SELECT public.evilop(1, 2) AS n")).toMatchObject({ ok: true, rows: [[3]] });
    expect(await source.execute("SELECT 1 ### 2 AS n")).toMatchObject({ ok: true, rows: [[3]] });
    expect(await source.execute("SELECT public.leak(c) FROM customers AS c")).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
  } finally {
    await source.close();
  }
});

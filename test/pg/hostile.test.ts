/**
 * The hostile corpus against the Postgres source, connected as the superuser (the role layer is
 * deliberately left out, so only reex's own layers stand): writes of every kind, DDL, COPY, DO
 * blocks, multi-statement strings, comment tricks, outside-reaching functions, runaways and huge
 * results. Afterwards every table's checksum is unchanged, no reex backend is still running, and
 * the pool answers in parallel.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import pg from "pg";
import { PostgresSource } from "../../src/pg/index.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";

let server: PgServer;
let source: PostgresSource;
let admin: pg.Client;

const WRITES = [
  "INSERT INTO customers (customer_id, first_name, last_name, email, country, city, tier, signup_date) VALUES (999999, 'a', 'b', 'c', 'DE', 'x', 'S', '2020-01-01')",
  "UPDATE products SET list_price = 0",
  "DELETE FROM order_items",
  "MERGE INTO products p USING products q ON p.product_id = q.product_id WHEN MATCHED THEN DELETE",
  "WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone",
  "WITH up AS (UPDATE customers SET tier = 'P' RETURNING 1) SELECT * FROM up",
  "SELECT * INTO stolen FROM customers",
  "SELECT * FROM customers FOR UPDATE",
  "TRUNCATE order_items",
  "DROP TABLE customers",
  "CREATE TABLE evil (a int)",
  "ALTER TABLE customers DROP COLUMN email",
  "CREATE INDEX ON customers (email)",
  "GRANT ALL ON customers TO PUBLIC",
  "CREATE ROLE intruder SUPERUSER LOGIN PASSWORD 'x'",
  "COPY customers TO '/tmp/reex-stolen.csv'",
  "COPY customers FROM '/etc/passwd'",
  "COPY (SELECT 1) TO PROGRAM 'touch /tmp/reex-pwned'",
  "DO $$ BEGIN DELETE FROM orders; END $$",
  "DO LANGUAGE plpgsql $$ BEGIN EXECUTE 'DROP TABLE products'; END $$",
  "CALL nothing()",
  "SET default_transaction_read_only = off",
  "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
  "BEGIN; DELETE FROM orders; COMMIT",
  "COMMIT; DELETE FROM orders",
  "SELECT 1; DELETE FROM orders",
  "SELECT 1 -- harmless\n; DROP TABLE products",
  "SELECT 1 /* ; */ ; UPDATE products SET name = 'x'",
  "SELECT $$;$$; TRUNCATE orders",
  "SELECT 'it''s'; DELETE FROM customers",
  "EXPLAIN ANALYZE DELETE FROM orders",
  "PREPARE p AS DELETE FROM orders",
  "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE",
  "VACUUM FULL orders",
  "REINDEX TABLE orders",
  "LISTEN reex",
  "NOTIFY reex, 'x'",
  "CREATE EXTENSION dblink",
  "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'DELETE FROM orders; SELECT 1'",
  "SECURITY LABEL ON TABLE orders IS 'x'",
  "COMMENT ON TABLE orders IS 'pwned'",
  "REFRESH MATERIALIZED VIEW v",
  "DISCARD ALL",
  "RESET ALL",
];

const OUTSIDE = [
  "SELECT pg_read_file('/etc/passwd')",
  "SELECT pg_read_binary_file('/etc/hostname')",
  "SELECT * FROM pg_ls_dir('/')",
  "SELECT pg_stat_file('/etc/passwd')",
  "SELECT lo_import('/etc/passwd')",
  "SELECT lo_export(1, '/tmp/reex-lo')",
  "SELECT lo_from_bytea(0, 'x')",
  "SELECT dblink('dbname=postgres', 'delete from orders')",
  "SELECT pg_sleep(60)",
  "SELECT pg_catalog.pg_sleep_for('1 minute')",
  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
  "SELECT pg_cancel_backend(pid) FROM pg_stat_activity",
  "SELECT pg_reload_conf()",
  "SELECT set_config('default_transaction_read_only', 'off', false)",
  "SELECT pg_advisory_lock(42)",
  "SELECT pg_notify('reex', 'x')",
  "SELECT query_to_xml('delete from orders', true, true, '')",
  "SELECT nextval('orders_seq')",
  "SELECT pg_switch_wal()",
  "SELECT pg_create_restore_point('x')",
  "SELECT count(*) FROM customers WHERE email IN (SELECT \"pg_read_file\"('/etc/passwd'))",
];

async function checksums(): Promise<Record<string, string>> {
  const tables = (
    await admin.query(
      "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY relname",
    )
  ).rows.map((r) => r.relname as string);
  const out: Record<string, string> = {};
  for (const t of tables) out[t] = (await admin.query(`SELECT md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) AS h FROM "${t}" AS x`)).rows[0].h;
  out["~schema"] = (
    await admin.query(
      "SELECT md5(string_agg(table_name || '.' || column_name || ':' || data_type, ',' ORDER BY 1)) AS h FROM information_schema.columns WHERE table_schema = 'public'",
    )
  ).rows[0].h;
  out["~roles"] = (await admin.query("SELECT string_agg(rolname, ',' ORDER BY rolname) AS h FROM pg_roles")).rows[0].h;
  return out;
}

beforeAll(async () => {
  server = await startPostgres();
  await loadExamples(server);
  admin = new pg.Client({ connectionString: server.adminUrlOf("reex_retail") });
  await admin.connect();
  source = new PostgresSource({
    url: server.adminUrlOf("reex_retail"),
    name: "retail",
    poolSize: 3,
    timeoutMs: 1500,
    maxRows: 500,
    maxResultBytes: 2 * 1024 * 1024,
  });
});

afterAll(async () => {
  await source?.close();
  await admin?.end();
  await server?.stop();
});

test("every write, DDL, COPY, DO block, multi-statement string and outside-reaching call is refused, and nothing changed", async () => {
  const before = await checksums();
  expect(Object.keys(before)).toEqual(expect.arrayContaining(["customers", "orders", "order_items", "products"]));
  for (const sql of [...WRITES, ...OUTSIDE]) {
    const r = await source.execute(sql);
    expect(r.ok, sql).toBe(false);
    if (!r.ok) expect(r.error.code, `${sql}: ${r.error.message}`).toBe("SQL_REFUSED");
  }
  expect(await checksums()).toEqual(before);
  const { existsSync } = await import("node:fs");
  for (const f of ["/tmp/reex-stolen.csv", "/tmp/reex-pwned", "/tmp/reex-lo"]) expect(existsSync(f), f).toBe(false);
});

test("with the parser layer skipped, the cursor and the READ ONLY transaction still stop every write and nothing changed", async () => {
  const before = await checksums();
  const through: string[] = [];
  // pg_terminate_backend would run here as a superuser and end this test's own admin connection
  for (const sql of [...WRITES, ...OUTSIDE.filter((q) => !/pg_sleep|pg_terminate_backend/.test(q))]) {
    if ((await source.runChecked(sql)).ok) through.push(sql);
  }
  // as a superuser some outside-reaching calls do run in a read-only transaction: the by-name layer and a SELECT-only role are what stop them
  expect(through.filter((sql) => !OUTSIDE.includes(sql))).toEqual([]);
  expect(through).toEqual(expect.arrayContaining(["SELECT pg_read_file('/etc/passwd')", "SELECT lo_import('/etc/passwd')", "SELECT pg_advisory_lock(42)"]));
  expect(await checksums()).toEqual(before);
  expect((await admin.query("SELECT count(*)::int AS n FROM pg_largeobject_metadata")).rows[0].n).toBe(0);
  expect((await admin.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'")).rows[0].n).toBe(0);
});

test("runaway queries are stopped by the timeout and huge results by the row and byte caps", async () => {
  for (const sql of [
    "SELECT count(*) FROM generate_series(1, 100000000000)",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "SELECT count(*) FROM orders a, orders b, orders c, orders d",
  ]) {
    const started = performance.now();
    const r = await source.execute(sql);
    expect(r, sql).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT", category: "timeout" } });
    expect(performance.now() - started, sql).toBeLessThan(1500 + 4000);
  }
  expect(await source.execute("SELECT a.order_id, b.order_id, c.order_id FROM orders a, orders b, orders c")).toMatchObject({
    ok: true,
    rowCount: 500,
    truncated: true,
  });
  expect(await source.execute("SELECT repeat(md5(g::text), 2000) FROM generate_series(1, 400) AS g")).toMatchObject({
    ok: false,
    error: { code: "SQL_RUNTIME", message: expect.stringMatching(/larger than 2 MiB/) },
  });
});

test("after the corpus the pool is healthy: no reex query still runs on the server and parallel reads answer", async () => {
  const running = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'reex' AND state NOT IN ('idle')");
  expect(running.rows[0].n).toBe(0);
  const idleInTx = await admin.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'reex' AND state LIKE 'idle in transaction%'");
  expect(idleInTx.rows[0].n).toBe(0);
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) => source.execute(`SELECT count(*) FROM orders WHERE order_id > ${i}`)));
  expect(results.every((r) => r.ok)).toBe(true);
  expect(source.stats().total).toBeLessThanOrEqual(3);
  expect(source.stats().waiting).toBe(0);
});

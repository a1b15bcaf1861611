/**
 * The Postgres source on a real server holding the example databases, connected as the
 * SELECT-only role the README tells operators to create: the transaction layer on its own (writes
 * that the parser would let through, timeouts, caps, rollback), value normalisation against
 * SQLite's results, catalogue introspection, matched values, and secrets kept out of errors.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { PostgresSource, openPostgresSource } from "../../src/pg/index.js";
import { ExecutorPool, ValueIndex, exBird, loadSchema, resultKey, schemaPrompt, sourceFor, unregisterSource } from "../../src/sql/index.js";
import { renderSchema } from "../../src/sql/testing.js";
import { exampleQuestions } from "../../src/examples/index.js";
import { PROFILES } from "../../src/agent/index.js";
import { createPromptBuilder } from "../../src/decoding/index.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";

let server: PgServer;
let sqlite: Map<string, string>;
let snapshots: string;
let retail: PostgresSource;
let admin: pg.Client;

beforeAll(async () => {
  server = await startPostgres();
  sqlite = await loadExamples(server);
  snapshots = mkdtempSync(join(tmpdir(), "reex-pg-snap-"));
  admin = new pg.Client({ connectionString: server.adminUrlOf("reex_retail") });
  await admin.connect();
  await admin.query("CREATE SEQUENCE counter");
  await admin.query("CREATE TABLE audit (n int)");
  await admin.query("CREATE FUNCTION sneaky() RETURNS int LANGUAGE sql VOLATILE AS 'INSERT INTO audit VALUES (1); SELECT 1'");
  await admin.query("GRANT SELECT, INSERT ON audit TO reex_reader");
  await admin.query("GRANT USAGE ON SEQUENCE counter TO reex_reader");
  await admin.query("COMMENT ON COLUMN customers.tier IS 'loyalty tier: S silver, G gold, P platinum'");
  await admin.query("COMMENT ON TABLE customers IS 'people who signed up'");
  retail = await openPostgresSource({ url: server.readerUrl("reex_retail"), name: "retail-pg", snapshotDir: snapshots, timeoutMs: 3000 });
});

afterAll(async () => {
  await retail?.close();
  if (retail) unregisterSource(retail.key);
  await admin?.end();
  await server?.stop();
  if (snapshots) rmSync(snapshots, { recursive: true, force: true });
});

describe("the transaction layer alone (parser check skipped)", () => {
  test("a write hidden in a user's function is refused by the allow-list, and by the READ ONLY transaction when the guard is skipped", async () => {
    const guarded = await retail.execute("SELECT sneaky()");
    expect(guarded).toMatchObject({ ok: false, error: { code: "SQL_REFUSED", category: "refused" } });
    if (!guarded.ok) expect(guarded.error.message).toMatch(/sneaky\(\) is not among the functions this database allows/);
    const through = await retail.runChecked("SELECT sneaky()");
    expect(through).toMatchObject({ ok: false, error: { code: "SQL_REFUSED", category: "refused" } });
    if (!through.ok) expect(through.error.message).toMatch(/read-only transaction/);
    const seq = await retail.runChecked("SELECT nextval('counter')");
    expect(seq).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
    expect((await admin.query("SELECT count(*)::int AS n FROM audit")).rows[0].n).toBe(0);
  });

  test("statement_timeout stops a sleep the by-name layer would have refused, and the connection is reused", async () => {
    const started = performance.now();
    const r = await retail.runChecked("SELECT pg_sleep(30)", { timeoutMs: 400 });
    expect(r).toMatchObject({ ok: false, error: { code: "SQL_TIMEOUT", category: "timeout" } });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(await retail.runChecked("SELECT 1")).toMatchObject({ ok: true, rows: [[1]] });
    expect(retail.stats().total).toBeLessThanOrEqual(4);
  });

  test("the row cap truncates on the server's cursor and the byte cap fails a huge result", async () => {
    const rows = await retail.runChecked("SELECT g FROM generate_series(1, 5000000) AS g", { maxRows: 300 });
    expect(rows).toMatchObject({ ok: true, rowCount: 300, truncated: true });
    const small = new PostgresSource({ url: server.readerUrl("reex_retail"), name: "capped", maxResultBytes: 100_000 });
    try {
      const big = await small.runChecked("SELECT repeat('x', 10000) FROM generate_series(1, 50)");
      expect(big).toMatchObject({ ok: false, error: { code: "SQL_RUNTIME", message: expect.stringMatching(/larger than/) } });
      expect(await small.runChecked("SELECT repeat('x', 10000) FROM generate_series(1, 5)")).toMatchObject({ ok: true, rowCount: 5 });
    } finally {
      await small.close();
    }
  });

  test("every run ends its transaction: a row committed between two runs is seen by the second", async () => {
    const count = async (): Promise<unknown> => ((await retail.runChecked("SELECT count(*) FROM audit")) as { rows: unknown[][] }).rows[0]![0];
    const before = await count();
    await admin.query("INSERT INTO audit VALUES (7)");
    expect(await count()).toBe((before as number) + 1);
    await admin.query("DELETE FROM audit");
    const settings = await retail.runChecked("SELECT current_setting('transaction_read_only'), current_setting('statement_timeout')", { timeoutMs: 1234 });
    expect(settings).toMatchObject({ ok: true, rows: [["on", "1234ms"]] });
  });
});

describe("values compared by SQLite's rules", () => {
  test("numerics, dates, booleans, arrays and NULLs come back as the cells SQLite gives for the same data", async () => {
    const r = await retail.execute(
      "SELECT 1.50::numeric, 2::numeric, DATE '2024-01-02', NULL::int, true, false, ARRAY[1, 2], 9007199254740993::int8, 2.5::float8, 'x'::varchar",
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.rows[0]).toEqual([1.5, 2, "2024-01-02", null, 1, 0, "[1,2]", 9007199254740993n, 2.5, "x"]);
    const lite = new ExecutorPool({ workers: 1 });
    try {
      const s = await lite.execute(sqlite.get("retail")!, "SELECT 1.5, 2, '2024-01-02', NULL, 1, 0, '[1,2]', 9007199254740993, 2.5, 'x'");
      expect(s.ok && resultKey(s.rows)).toBe(resultKey(r.rows));
    } finally {
      await lite.close();
    }
  });

  test("the example gold queries that PostgreSQL accepts give the same result as on SQLite", async () => {
    const lite = new ExecutorPool({ workers: 1 });
    const sources = new Map<string, PostgresSource>([["retail", retail]]);
    try {
      for (const db of ["clinic", "music"])
        sources.set(db, await openPostgresSource({ url: server.readerUrl(`reex_${db}`), name: `${db}-pg`, snapshotDir: snapshots }));
      let compared = 0;
      for (const q of exampleQuestions()) {
        const onPg = await sources.get(q.db_id)!.execute(q.SQL);
        if (!onPg.ok) continue;
        const onLite = await lite.execute(sqlite.get(q.db_id)!, q.SQL);
        expect(onLite.ok).toBe(true);
        if (onLite.ok) expect(exBird(onPg.rows, onLite.rows), q.SQL).toBe(true);
        compared++;
      }
      expect(compared).toBeGreaterThanOrEqual(35);
    } finally {
      await lite.close();
      for (const [db, s] of sources)
        if (db !== "retail") {
          await s.close();
          unregisterSource(s.key);
        }
    }
  });
});

describe("the loop's view of the database", () => {
  test("introspection reads tables, columns, types, keys and comments from the catalogue", () => {
    const schema = loadSchema(retail.key);
    expect(schema.tables.map((t) => t.name)).toEqual(["customers", "products", "orders", "order_items", "audit"]);
    const customers = schema.tables[0]!;
    expect(customers.columns.find((c) => c.name === "customer_id")).toMatchObject({ type: "bigint", primaryKey: true, notNull: true });
    expect(customers.columns.find((c) => c.name === "tier")).toMatchObject({ type: "text", comment: "loyalty tier: S silver, G gold, P platinum" });
    expect(customers.sql).toMatch(/^-- people who signed up\nCREATE TABLE "customers"/);
    expect(customers.rowCount).toBeGreaterThan(0);
    expect(schema.foreignKeys).toContainEqual({ table: "orders", column: "customer_id", refTable: "customers", refColumn: "customer_id" });
    expect(
      schema.tables
        .find((t) => t.name === "order_items")!
        .columns.filter((c) => c.primaryKey)
        .map((c) => c.name),
    ).toEqual(["order_id", "product_id"]);
    expect(renderSchema(schema)).toMatch(/customers\.tier \( text \| comment : loyalty tier/);
  });

  test("the token budget prunes the Postgres schema like a SQLite one", () => {
    const schema = loadSchema(retail.key);
    const full = schemaPrompt(schema, { question: "How many orders shipped to GB?" });
    const pruned = schemaPrompt(schema, { question: "How many orders shipped to GB?", tokenBudget: 120 });
    expect(pruned.text.length).toBeLessThan(full.text.length);
    expect(pruned.text).toMatch(/orders/);
  });

  test("matched values come from the bounded snapshot through the usual value index", () => {
    expect(retail.valuesPath).toBeDefined();
    const index = ValueIndex.open(retail.valuesPath!, { indexDir: snapshots });
    try {
      const matches = index.match("orders from customers living in montreal");
      expect(matches).toContainEqual(expect.objectContaining({ table: "customers", column: "city", value: "Montreal" }));
    } finally {
      index.close();
    }
  });

  test("every profile's prompt names PostgreSQL for a Postgres source and SQLite for a file, with matched values from the snapshot", async () => {
    const builder = createPromptBuilder({ indexDir: snapshots });
    try {
      for (const profile of PROFILES) {
        const family = profile.families[0]!;
        const onPg = await builder.promptFor(retail.key, "How many customers live in Montreal?", undefined, family, profile);
        const onFile = await builder.promptFor(sqlite.get("retail")!, "How many customers live in Montreal?", undefined, family, profile);
        const pgText = onPg.messages.map((m) => m.content).join("\n");
        const fileText = onFile.messages.map((m) => m.content).join("\n");
        expect(pgText, profile.id).toMatch(/PostgreSQL/);
        expect(pgText, profile.id).not.toMatch(/SQLite/);
        expect(fileText, profile.id).toMatch(/SQLite/);
        expect(fileText, profile.id).not.toMatch(/PostgreSQL/);
        expect(pgText, profile.id).toMatch(/Montreal/);
      }
    } finally {
      builder.close();
    }
  });

  test("the source is what the executor pool answers for its key", async () => {
    expect(sourceFor(retail.key)).toBe(retail);
    const pool = new ExecutorPool({ workers: 1 });
    try {
      const r = await pool.execute(retail.key, "SELECT COUNT(*) FROM customers WHERE country = 'DE'");
      const direct = await retail.execute("SELECT COUNT(*) FROM customers WHERE country = 'DE'");
      expect(r).toMatchObject({ ok: true, rows: (direct as { rows: unknown }).rows });
      expect(pool.stats().spawned).toBe(0);
    } finally {
      await pool.close();
    }
  });
});

describe("secrets", () => {
  test("a refused login or a missing database is DB_UNREACHABLE naming only the display name", async () => {
    const wrong = server.readerUrl("reex_retail").replace(server.readerPassword, "not-the-password-123");
    await expect(openPostgresSource({ url: wrong, name: "shop" })).rejects.toMatchObject({
      code: "DB_UNREACHABLE",
      message: expect.stringMatching(/"shop" is unreachable: the login was refused/),
    });
    const missing = server.readerUrl("no_such_db");
    const err = await openPostgresSource({ url: missing, name: "gone" }).catch((e: Error) => e);
    expect(err).toMatchObject({ code: "DB_UNREACHABLE", message: expect.stringMatching(/does not exist/) });
    for (const text of [String(err), JSON.stringify(err), (err as Error).stack ?? ""]) {
      expect(text).not.toContain(server.readerPassword);
      expect(text).not.toContain("127.0.0.1");
    }
  });

  test("${NAME} in a URL is read from the environment", async () => {
    process.env.REEX_TEST_PG_PASSWORD = server.readerPassword;
    const url = server.readerUrl("reex_retail").replace(server.readerPassword, "${REEX_TEST_PG_PASSWORD}");
    const s = new PostgresSource({ url, name: "env" });
    try {
      expect(await s.execute("SELECT 1")).toMatchObject({ ok: true });
    } finally {
      await s.close();
      delete process.env.REEX_TEST_PG_PASSWORD;
    }
  });
});

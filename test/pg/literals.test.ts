/**
 * Literal and coverage repair on PostgreSQL: the lookups run through the executor on a real server
 * holding the example clinic database (read-only role), and the rewrites they choose run there too.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { type SchemaNames } from "../../src/agent/index.js";
import { repairCoverage, repairLiterals, type ReadRows } from "../../src/agent/testing.js";
import { PostgresSource, openPostgresSource } from "../../src/pg/index.js";
import { ExecutorPool, loadSchema, unregisterSource } from "../../src/sql/index.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";

let server: PgServer;
let snapshots: string;
let clinic: PostgresSource;
let pool: ExecutorPool;
let names: SchemaNames;
let read: ReadRows;

beforeAll(async () => {
  server = await startPostgres();
  await loadExamples(server);
  snapshots = mkdtempSync(join(tmpdir(), "reex-pg-literals-"));
  clinic = await openPostgresSource({ url: server.readerUrl("reex_clinic"), name: "clinic-literals", snapshotDir: snapshots, timeoutMs: 3000 });
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  names = { tables: loadSchema(clinic.key).tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) };
  read = async (sql) => {
    const r = await pool.execute(clinic.key, sql);
    return r.ok ? r.rows : undefined;
  };
});

afterAll(async () => {
  await pool?.close();
  await clinic?.close();
  if (clinic) unregisterSource(clinic.key);
  await server?.stop();
  if (snapshots) rmSync(snapshots, { recursive: true, force: true });
});

test("a city the table holds in several spellings is widened to all of them, and the rewrite runs on PostgreSQL", async () => {
  const r = await repairLiterals("SELECT COUNT(*) FROM patients WHERE city = 'LEEDS'", names, read);
  expect(r?.sql).toBe("SELECT COUNT(*) FROM patients WHERE LOWER(TRIM(city)) = 'leeds'");
  const widened = await pool.execute(clinic.key, r!.sql);
  const exact = await pool.execute(clinic.key, "SELECT COUNT(*) FROM patients WHERE city = 'LEEDS'");
  expect(widened.ok && exact.ok).toBe(true);
  if (widened.ok && exact.ok) expect(Number(widened.rows[0]![0])).toBeGreaterThan(Number(exact.rows[0]![0]));
});

test("a lookup PostgreSQL rejects (TRIM of an integer column) leaves the comparison as written", async () => {
  expect(await repairLiterals("SELECT COUNT(*) FROM patients WHERE patient_id = '1x'", names, read)).toBeUndefined();
});

test("a string its column lacks moves to the one other column that holds it, looked up as text across number and date columns", async () => {
  const r = await repairLiterals("SELECT COUNT(*) FROM patients WHERE city = 'F'", names, read);
  expect(r?.sql).toBe("SELECT COUNT(*) FROM patients WHERE sex = 'F'");
  expect(r?.fixes[0]?.rule).toBe("column");
  expect((await pool.execute(clinic.key, r!.sql)).ok).toBe(true);
});

test("a year the question names goes on the visits' one date column, read and run on PostgreSQL", async () => {
  const question = "How many telehealth visits took place in 2022?";
  const r = await repairCoverage("SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL'", names, read, { question });
  expect(r?.sql).toBe("SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL' AND visit_date LIKE '2022%'");
  const covered = await pool.execute(clinic.key, r!.sql);
  const all = await pool.execute(clinic.key, "SELECT COUNT(*) FROM visits WHERE visit_type = 'TEL'");
  expect(covered.ok && all.ok).toBe(true);
  if (covered.ok && all.ok) expect(Number(covered.rows[0]![0])).toBeLessThan(Number(all.rows[0]![0]));
});

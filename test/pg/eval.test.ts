/**
 * `reex eval --postgres` on a real server holding the example databases: gold and predicted SQL
 * both run on PostgreSQL under the EX rules, and questions whose gold SQL PostgreSQL rejects
 * (SQLite-only functions) are left out by name instead of failing the self-check.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test, vi } from "vitest";
import { run } from "../../src/cli/eval.js";
import { DEFAULT_EXAMPLES_DIR, QUESTIONS_FILE, buildExamples, exampleQuestions } from "../../src/examples/index.js";
import { loadExamples, startPostgres, type PgServer } from "../helpers/postgres.js";

let server: PgServer;
let dir: string;

beforeAll(async () => {
  server = await startPostgres();
  await loadExamples(server);
  await buildExamples();
  dir = mkdtempSync(join(tmpdir(), "reex-pg-eval-"));
});

afterAll(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("gold as predictions scores 100% EX on PostgreSQL, a wrong prediction does not, and SQLite-only golds are left out by id", async () => {
  const questions = exampleQuestions();
  const predictions: Record<string, string> = {};
  questions.forEach((q, i) => (predictions[String(i)] = i === 0 ? "SELECT COUNT(*) + 1 FROM orders" : q.SQL));
  const file = join(dir, "preds.json");
  writeFileSync(file, JSON.stringify(predictions));
  const err: string[] = [];
  vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  vi.spyOn(console, "log").mockImplementation(() => {});
  const out = join(dir, "out");
  const code = await run([
    "--dataset",
    join(DEFAULT_EXAMPLES_DIR, QUESTIONS_FILE),
    "--db-root",
    join(DEFAULT_EXAMPLES_DIR, "databases"),
    "--predictions",
    file,
    "--postgres",
    server.readerUrl("reex_{db_id}"),
    "--out",
    out,
    "--quiet",
  ]);
  vi.restoreAllMocks();
  expect(code, err.join("\n")).toBe(0);
  const left = err.find((l) => l.includes("left out"));
  expect(left).toMatch(/left out \d+ questions whose gold SQL PostgreSQL does not accept/);
  const strftime = questions.findIndex((q) => q.SQL.includes("strftime"));
  expect(left).toContain(String(strftime));
  const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8"));
  expect(report.selfCheck.ok).toBe(true);
  const summary = report.runs[0].summary;
  expect(summary.count).toBeGreaterThanOrEqual(35);
  expect(summary.count).toBeLessThan(questions.length);
  expect(summary.ex.bird).toBeCloseTo((summary.count - 1) / summary.count, 6);
  expect(err.join("\n")).not.toContain(server.readerPassword);
});

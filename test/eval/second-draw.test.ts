/**
 * `reex eval` on databases with a second row draw (`<db_id>.draw2.sqlite` beside the file): the
 * loader finds it, EX is also scored there, and the summary adds EX on both draws and the spurious
 * rate while `ex` keeps meaning the first draw.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run as evalCli } from "../../src/cli/eval.js";
import type { Answer, AnswerRequest } from "../../src/decoding/types.js";
import { createReport, loadDataset, runEval, scorePredictions, selfCheck } from "../../src/eval/index.js";
import { renderHtml } from "../../src/eval/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";

const GOLD = "SELECT name FROM products WHERE category = 'fruit'";
/** Right on the first draw (the fruit are the products under 0.7 or over 1), wrong on the second. */
const LUCKY = "SELECT name FROM products WHERE price < 0.7 OR price > 1";
const WRONG = "SELECT name FROM products";

let dir: string;
let pool: ExecutorPool;

function writeShop(path: string, rows: string): void {
  const db = new Database(path);
  db.exec(`CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL, category TEXT); INSERT INTO products VALUES ${rows};`);
  db.close();
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-eval-draws-"));
  for (const root of ["two", "one"]) mkdirSync(join(dir, root, "shop"), { recursive: true });
  for (const root of ["two", "one"])
    writeShop(join(dir, root, "shop", "shop.sqlite"), "(1, 'apple', 1.5, 'fruit'), (2, 'banana', 0.5, 'fruit'), (3, 'carrot', 0.8, 'veg')");
  writeShop(
    join(dir, "two", "shop", "shop.draw2.sqlite"),
    "(1, 'apple', 0.9, 'fruit'), (2, 'banana', 0.5, 'fruit'), (3, 'carrot', 1.2, 'veg'), (4, 'date', 2.5, 'fruit')",
  );
  const questions = [100, 101, 102].map((id) => ({ question_id: id, db_id: "shop", question: `Which products are fruit? (${id})`, evidence: "", SQL: GOLD }));
  writeFileSync(join(dir, "dev.json"), JSON.stringify(questions));
  pool = new ExecutorPool({ workers: 1 });
});

afterAll(async () => {
  await pool.close();
  rmSync(dir, { recursive: true, force: true });
});

const PREDICTIONS = [GOLD, LUCKY, WRONG];

afterEach(() => vi.restoreAllMocks());

describe("evaluation on two row draws", () => {
  it("finds the second draw beside the database file, and only where there is one", () => {
    const two = loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "two") }).items;
    expect(two.map((i) => i.dbPath2)).toEqual(two.map(() => join(dir, "two", "shop", "shop.draw2.sqlite")));
    const one = loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "one") }).items;
    expect(one.every((i) => !("dbPath2" in i))).toBe(true);
  });

  it("scores predictions on both draws: ex stays the first draw's, exBothDraws and spuriousRate are added", async () => {
    const items = loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "two") }).items;
    const run = await scorePredictions({ items, predictions: PREDICTIONS, executor: pool });
    expect(run.items.map((i) => i.ex.bird)).toEqual([true, true, false]);
    expect(run.items.map((i) => i.exSecondDraw?.bird)).toEqual([true, false, false]);
    expect(run.summary.ex.bird).toBeCloseTo(2 / 3, 12);
    expect(run.summary.exBothDraws!.bird).toBeCloseTo(1 / 3, 12);
    expect(run.summary.spuriousRate!.bird).toBe(0.5);
    expect(run.summary.byDifficulty).toEqual({});
    const html = renderHtml(createReport({ runs: [run] }));
    expect(html).toContain('<ul id="draws">');
    expect(html).toContain("66.7% on the first draw, 33.3% on both; spurious rate 50.0%");
  });

  it("prints EX on both draws and the spurious rate under the summary table, only where there is a second draw", async () => {
    const preds = join(dir, "preds.json");
    writeFileSync(preds, JSON.stringify(Object.fromEntries(PREDICTIONS.map((p, i) => [String(i), p]))));
    const printed = async (root: string): Promise<string> => {
      const out: string[] = [];
      vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
      vi.spyOn(process.stderr, "write").mockImplementation(() => true);
      expect(
        await evalCli(["--dataset", join(dir, "dev.json"), "--db-root", join(dir, root), "--predictions", preds, "--out", join(dir, `out-${root}`), "--quiet"]),
      ).toBe(0);
      vi.restoreAllMocks();
      return out.join("\n");
    };
    expect(await printed("two")).toContain("two row draws (bird): EX 66.7% on the first, 33.3% on both; spurious rate 50.0%");
    expect(await printed("one")).not.toContain("two row draws");
  });

  it("leaves runs on databases with one draw as they were", async () => {
    const items = loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "one") }).items;
    const run = await scorePredictions({ items, predictions: PREDICTIONS, executor: pool });
    expect(run.summary.ex.bird).toBeCloseTo(2 / 3, 12);
    expect("exBothDraws" in run.summary).toBe(false);
    expect("spuriousRate" in run.summary).toBe(false);
    expect(run.items.some((i) => "exSecondDraw" in i)).toBe(false);
    expect(renderHtml(createReport({ runs: [run] }))).not.toContain('<ul id="draws">');
  });

  it("scores decoded answers on both draws, a decoder failure wrong on both", async () => {
    const items = loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "two") }).items;
    const decode = async (req: AnswerRequest): Promise<Answer> => {
      const at = items.findIndex((i) => i.question === req.question);
      if (at === 2) throw new Error("the model fell over");
      const sql = PREDICTIONS[at]!;
      return {
        sql,
        answerable: true,
        candidates: [{ index: 0, path: "t0", sql, answerable: true, group: 0, votes: 1, interactions: 0, meanLogprob: -0.1, text: "" }],
        winner: 0,
        decidedBy: "majority",
        usage: { promptTokens: 10, evaluatedTokens: 10, generatedTokens: 5 },
        timings: { totalMs: 1 },
      };
    };
    const run = await runEval({ items, decode, executor: pool });
    expect(run.items.map((i) => i.exSecondDraw?.bird)).toEqual([true, false, false]);
    expect(run.summary.spuriousRate).toEqual({ bird: 0.5, spider: 0.5, refined: 0.5 });
  });

  it("self-checks the gold SQL on the second draw too", async () => {
    const bad = join(dir, "bad");
    mkdirSync(join(bad, "shop"), { recursive: true });
    writeShop(join(bad, "shop", "shop.sqlite"), "(1, 'apple', 1.5, 'fruit')");
    new Database(join(bad, "shop", "shop.draw2.sqlite")).exec("CREATE TABLE other (x INTEGER)").close();
    const items = loadDataset(join(dir, "dev.json"), { dbRoot: bad }).items;
    const check = await selfCheck(items, { executor: pool });
    expect(check.ok).toBe(false);
    expect(check.failures[0]!.reason).toMatch(/^gold SQL failed on the second row draw/);
    expect((await selfCheck(loadDataset(join(dir, "dev.json"), { dbRoot: join(dir, "two") }).items, { executor: pool })).ok).toBe(true);
  });
});

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyCount, loadDataset, scorePredictions, type EvalItem } from "../../src/eval/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { makeFixture, type Fixture } from "./fixtures.js";

const SHOP = { tables: [{ name: "products", columns: ["id", "name", "price", "category"] }] };

describe("copy count of one SQL", () => {
  it("counts distinct table and column names and the ones the schema lacks, case-insensitively", () => {
    expect(copyCount("SELECT name, Price FROM products WHERE category = 'fruit'", SHOP)).toEqual({ identifiers: 4, inSchema: 4, invented: [] });
    const c = copyCount("SELECT product_name FROM products WHERE colour = 'red' AND name = 'x'", SHOP);
    expect(c).toMatchObject({ identifiers: 4, inSchema: 2 });
    expect(c.invented.sort()).toEqual(["colour", "product_name"]);
  });

  it("leaves the query's aliases out, also one that follows an invented table", () => {
    expect(copyCount("SELECT T1.name FROM products AS T1 WHERE T1.price > 2", SHOP)).toEqual({ identifiers: 3, inSchema: 3, invented: [] });
    const c = copyCount("SELECT p.name FROM physicians p JOIN products AS q ON q.id = p.id", SHOP);
    expect(c.invented).toEqual(["physicians"]);
    expect(c).toMatchObject({ identifiers: 4, inSchema: 3 });
  });

  it("reads aliases off the FROM lists only: a derived table's alias is one, a word after FROM inside a string is not", () => {
    expect(copyCount("SELECT t.name FROM (SELECT name FROM products) AS t", SHOP).invented).toEqual([]);
    const c = copyCount("SELECT poll FROM products WHERE name = 'from ap poll'", SHOP);
    expect(c.invented).toEqual(["poll"]);
  });

  it("reads a non-ASCII name as one name, as SQLite does (any character past ASCII is a name's)", () => {
    const italian = { tables: [{ name: "città", columns: ["nome", "popolazione"] }] };
    expect(copyCount("SELECT nome FROM città WHERE popolazione > 5", italian)).toEqual({ identifiers: 3, inSchema: 3, invented: [] });
    expect(copyCount("SELECT nome FROM cittàà", italian)).toMatchObject({ identifiers: 2, inSchema: 1, invented: ["cittàà"] });
  });

  it("does not count string literals, functions or keywords", () => {
    expect(copyCount("SELECT COUNT(*), MAX(price), STRFTIME('%Y', 'colour') FROM products", SHOP)).toEqual({ identifiers: 2, inSchema: 2, invented: [] });
  });
});

describe("copy rate in a scored run", () => {
  let fx: Fixture;
  let items: EvalItem[];
  let pool: ExecutorPool;
  beforeAll(() => {
    fx = makeFixture();
    items = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot }).items.slice(0, 3);
    pool = new ExecutorPool({ workers: 1 });
  });
  afterAll(async () => {
    await pool.close();
  });

  it("is the share over all items' identifiers of the ones each item's database has, and absent for items without SQL", async () => {
    const run = await scorePredictions({
      items,
      predictions: ["SELECT COUNT(*) FROM products", "SELECT title FROM items WHERE category = 'fruit'", null],
      executor: pool,
    });
    expect(run.items[0]!.copy).toEqual({ identifiers: 1, inSchema: 1, invented: [] });
    expect(run.items[1]!.copy).toMatchObject({ identifiers: 3, inSchema: 1 });
    expect(run.items[2]!.copy).toBeUndefined();
    expect(run.summary.copyItems).toBe(2);
    expect(run.summary.copyRate).toBeCloseTo(2 / 4);
  });

  it("is null when no item has SQL", async () => {
    const run = await scorePredictions({ items, predictions: [null, null, null], executor: pool });
    expect(run.summary.copyRate).toBeNull();
    expect(run.summary.copyItems).toBe(0);
  });
});

/** The verified-example store on real SQLite files and the real executor: verification, visibility, the cap, replacement, BM25 retrieval and its files. */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bm25Scores } from "../../src/sql/examples.js";
import { ExampleStore, ExecutorPool } from "../../src/sql/index.js";

let dir: string;
let db: { id: string; path: string };
let executor: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-examples-"));
  const path = join(dir, "shop.sqlite");
  const d = new Database(path);
  d.exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, country TEXT, shipped INTEGER, placed TEXT);
    INSERT INTO orders VALUES (1,'United Kingdom',1,'2023-02-01'),(2,'France',0,'2022-05-03'),(3,'United Kingdom',1,'2022-11-30');`);
  d.close();
  db = { id: "shop-0123456789", path };
  executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});
afterAll(async () => {
  await executor.close();
  rmSync(dir, { recursive: true, force: true });
});

const fresh = (max = 50): ExampleStore => new ExampleStore({ dataDir: mkdtempSync(join(dir, "data-")), maxPerDatabase: max });

describe("ExampleStore", () => {
  it("stores an example only after its SQL runs, with its result's shape, in a file beside the registry", async () => {
    const store = fresh();
    const { example, created } = await store.add(
      db,
      "alice",
      { question: "How many orders went to the UK?", sql: "SELECT COUNT(*) AS n FROM orders WHERE country = 'United Kingdom'" },
      executor,
    );
    expect(created).toBe(true);
    expect(example).toMatchObject({ database: db.id, owner: "alice", columns: ["n"], rowCount: 1, truncated: false, origin: "added" });
    expect(example.id).toMatch(/^ex-[0-9a-f]{12}$/);
    const dataDir = (store as unknown as { dir: string }).dir;
    expect(readdirSync(dataDir)).toEqual([`${db.id}.json`]);
    expect(JSON.parse(readFileSync(join(dataDir, `${db.id}.json`), "utf8")).examples).toHaveLength(1);

    await expect(store.add(db, "alice", { question: "broken", sql: "SELECT nope FROM orders" }, executor)).rejects.toMatchObject({
      code: "EXAMPLE_SQL_FAILED",
      details: { sqlCode: "SQL_NO_SUCH_COLUMN" },
    });
    await expect(store.add(db, "alice", { question: "write", sql: "DROP TABLE orders" }, executor)).rejects.toMatchObject({
      details: { sqlCode: "SQL_REFUSED" },
    });
    expect(store.list(db.id, "alice")).toHaveLength(1);
    expect(readdirSync(dataDir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });

  it("shows a key its own examples and the shared ones; deleting a shared one with a key is FORBIDDEN", async () => {
    const store = fresh();
    await store.add(db, "alice", { question: "a", sql: "SELECT 1" }, executor);
    const shared = (await store.add(db, undefined, { question: "s", sql: "SELECT 2" }, executor)).example;
    await store.add(db, "bob", { question: "b", sql: "SELECT 3" }, executor);
    expect(store.list(db.id, "alice").map((e) => e.question)).toEqual(["a", "s"]);
    expect(store.list(db.id).map((e) => e.question)).toEqual(["a", "s", "b"]);
    expect(() => store.remove(db.id, shared.id, "alice")).toThrow(expect.objectContaining({ code: "FORBIDDEN" }));
    const bobs = store.list(db.id, "bob").find((e) => e.question === "b")!;
    expect(() => store.remove(db.id, bobs.id, "alice")).toThrow(expect.objectContaining({ code: "EXAMPLE_NOT_FOUND" }));
    store.remove(db.id, bobs.id, "bob");
    expect(store.list(db.id).map((e) => e.question)).toEqual(["a", "s"]);
  });

  it("replaces the key's example of the same question (keeping its id) and caps each key's examples per database", async () => {
    const store = fresh(2);
    const first = (await store.add(db, "alice", { question: "How many orders?", sql: "SELECT 1" }, executor)).example;
    const again = await store.add(db, "alice", { question: "  how many   ORDERS? ", sql: "SELECT COUNT(*) FROM orders" }, executor);
    expect(again).toMatchObject({ created: false, example: { id: first.id, sql: "SELECT COUNT(*) FROM orders" } });
    await store.add(db, "alice", { question: "Which countries?", sql: "SELECT DISTINCT country FROM orders" }, executor);
    await expect(store.add(db, "alice", { question: "third", sql: "SELECT 1" }, executor)).rejects.toMatchObject({ code: "EXAMPLES_FULL" });
    await store.add(db, "bob", { question: "third", sql: "SELECT 1" }, executor);
  });

  it("retrieves the k most similar questions a key sees by BM25, best first, and none that share no word", async () => {
    const store = fresh();
    await store.add(
      db,
      "alice",
      { question: "How many orders were shipped to the United Kingdom?", sql: "SELECT COUNT(*) FROM orders WHERE shipped = 1 AND country = 'United Kingdom'" },
      executor,
    );
    await store.add(db, "alice", { question: "Which orders were placed in 2022?", sql: "SELECT id FROM orders WHERE placed LIKE '2022%'" }, executor);
    await store.add(db, "alice", { question: "List the countries", sql: "SELECT DISTINCT country FROM orders" }, executor);
    await store.add(
      db,
      "bob",
      { question: "How many orders were shipped to France?", sql: "SELECT COUNT(*) FROM orders WHERE shipped = 1 AND country = 'France'" },
      executor,
    );
    const near = store.nearest(db.id, "alice", "How many orders were shipped to the UK?", 2);
    expect(near.map((e) => e.question)).toEqual(["How many orders were shipped to the United Kingdom?", "Which orders were placed in 2022?"]);
    expect(near[0]!.score).toBeGreaterThan(near[1]!.score);
    expect(store.nearest(db.id, "alice", "zebra giraffe", 3)).toEqual([]);
    expect(store.nearest(db.id, "alice", "orders shipped", 0)).toEqual([]);
    expect(store.nearest("another-db", "alice", "orders shipped", 3)).toEqual([]);
  });

  it("reads a file another process wrote, and survives a new store over the same folder", async () => {
    const dataDir = mkdtempSync(join(dir, "data-"));
    const one = new ExampleStore({ dataDir, maxPerDatabase: 10 });
    const two = new ExampleStore({ dataDir, maxPerDatabase: 10 });
    expect(two.list(db.id)).toEqual([]);
    const { example } = await one.add(db, undefined, { question: "How many orders?", sql: "SELECT COUNT(*) FROM orders" }, executor);
    expect(two.list(db.id).map((e) => e.id)).toEqual([example.id]);
    expect(new ExampleStore({ dataDir, maxPerDatabase: 10 }).nearest(db.id, "anyone", "how many orders", 1)[0]!.id).toBe(example.id);
    one.removeDatabase(db.id);
    expect(existsSync(join(dataDir, "examples", `${db.id}.json`))).toBe(false);
  });

  it("moves an unreadable file aside and starts empty; refuses a database id that is not file-name safe", () => {
    const dataDir = mkdtempSync(join(dir, "data-"));
    const store = new ExampleStore({ dataDir, maxPerDatabase: 10 });
    store.list(db.id);
    const folder = join(dataDir, "examples");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, `${db.id}.json`), "{ not json");
    expect(store.list(db.id)).toEqual([]);
    expect(readdirSync(folder).some((f) => f.startsWith(`${db.id}.json.invalid-`))).toBe(true);
    expect(() => store.list("../etc")).toThrow(expect.objectContaining({ code: "BAD_REQUEST" }));
  });
});

describe("bm25Scores", () => {
  it("weights rare terms over common ones and saturates repeats", () => {
    const docs = [
      ["order", "ship"],
      ["order", "countri"],
      ["order", "ship", "ship", "ship"],
    ];
    const [a, b, c] = bm25Scores(["ship"], docs);
    expect(b).toBe(0);
    expect(a).toBeGreaterThan(0);
    expect(c).toBeGreaterThan(a!);
    expect(c!).toBeLessThan(3 * a!);
    expect(bm25Scores(["order"], docs)[0]).toBeLessThan(a!);
    expect(bm25Scores(["x"], [])).toEqual([]);
  });
});

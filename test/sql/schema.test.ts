import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { approxTokens, loadSchema, schemaPrompt } from "../../src/sql/index.js";
import { renderSchema, withDescriptions } from "../../src/sql/testing.js";

let dir: string;
let concerts: string;
let shop: string;

const CONCERTS = `
  CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT NOT NULL, capacity INT);
  CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, "Birth Place" TEXT, bio TEXT);
  CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, stadium_id INTEGER REFERENCES stadium (stadium_id), year TEXT,
    FOREIGN KEY (concert_id) REFERENCES singer);
  CREATE VIEW big_stadium AS SELECT * FROM stadium WHERE capacity > 50000;
  INSERT INTO stadium VALUES (1, 'Wembley', 90000), (2, 'Anfield', 54000), (3, 'Old Trafford', 74000), (4, 'Hampden', 51000);
  INSERT INTO singer VALUES (1, 'Joe Sharp', 'London', '${"x".repeat(80)}'), (2, 'Timbaland', NULL, ''), (3, 'Joe Sharp', 'Paris', NULL);
  INSERT INTO concert VALUES (1, 1, '2014'), (2, 1, '2015');
`;

function makeDb(path: string, sql: string): void {
  const db = new Database(path);
  db.exec(sql);
  db.close();
}

/** A shop schema hidden among 295 unrelated tables (300 in all), with foreign keys among the fillers too. */
function makeShop(path: string): void {
  const db = new Database(path);
  db.exec(`
    CREATE TABLE customer (customer_id INTEGER PRIMARY KEY, full_name TEXT, city TEXT, email TEXT, phone TEXT, signup_date TEXT);
    CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer (customer_id), placed_at TEXT, status TEXT);
    CREATE TABLE order_item (order_id INTEGER REFERENCES orders (order_id), product_id INTEGER REFERENCES product (product_id), quantity INTEGER);
    CREATE TABLE product (product_id INTEGER PRIMARY KEY, title TEXT, price REAL, supplier_id INTEGER REFERENCES supplier (supplier_id), weight REAL, colour TEXT);
    CREATE TABLE supplier (supplier_id INTEGER PRIMARY KEY, company TEXT, country TEXT);
    INSERT INTO customer VALUES (1, 'Ann Lee', 'Berlin', 'ann@example.com', '555', '2020-01-01');
  `);
  const words = ["audit", "ledger", "sensor", "payroll", "ticket", "asset", "invoice", "shift", "badge", "vehicle", "permit", "lab"];
  db.transaction(() => {
    for (let i = 0; i < 295; i++) {
      const name = `${words[i % words.length]}_log_${i}`;
      const cols = Array.from({ length: 6 }, (_, c) => `attribute_${c} TEXT`).join(", ");
      const ref = i > 0 && i % 3 === 0 ? `, parent_id INTEGER REFERENCES ${words[(i - 1) % words.length]}_log_${i - 1} (id)` : "";
      db.exec(`CREATE TABLE ${name} (id INTEGER PRIMARY KEY, ${cols}${ref})`);
    }
  })();
  db.close();
}

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-schema-"));
  concerts = join(dir, "concerts.sqlite");
  shop = join(dir, "shop.sqlite");
  makeDb(concerts, CONCERTS);
  makeShop(shop);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("loadSchema", () => {
  it("reads tables in creation order with columns, keys, row counts and foreign keys, leaving views out", () => {
    const s = loadSchema(concerts);
    expect(s.tables.map((t) => t.name)).toEqual(["stadium", "singer", "concert"]);
    const stadium = s.tables[0]!;
    expect(stadium.rowCount).toBe(4);
    expect(stadium.columns.map((c) => [c.name, c.type, c.primaryKey, c.notNull])).toEqual([
      ["stadium_id", "INTEGER", true, false],
      ["name", "TEXT", false, true],
      ["capacity", "INT", false, false],
    ]);
    expect(s.foreignKeys).toEqual([
      { table: "concert", column: "concert_id", refTable: "singer", refColumn: "singer_id" },
      { table: "concert", column: "stadium_id", refTable: "stadium", refColumn: "stadium_id" },
    ]);
    expect(stadium.sql).toBe("CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT NOT NULL, capacity INT)");
  });

  it("samples three distinct, non-null, non-empty example values and truncates long strings", () => {
    const singer = loadSchema(concerts).tables[1]!;
    expect(singer.columns[1]!.examples).toEqual(["Joe Sharp", "Timbaland"]);
    expect(singer.columns[2]!.examples).toEqual(["London", "Paris"]);
    expect(singer.columns[3]!.examples).toEqual([`${"x".repeat(40)}...`]);
    expect(loadSchema(concerts).tables[0]!.columns[1]!.examples).toEqual(["Wembley", "Anfield", "Old Trafford"]);
    expect(loadSchema(concerts, { examples: 1 }).tables[0]!.columns[1]!.examples).toEqual(["Wembley"]);
  });

  it("serves repeated loads from the cache until the file changes", () => {
    const path = join(dir, "cached.sqlite");
    makeDb(path, "CREATE TABLE a (x INTEGER);");
    const first = loadSchema(path);
    expect(loadSchema(path)).toBe(first);
    makeDb(path, "CREATE TABLE b (y TEXT);");
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect(loadSchema(path).tables.map((t) => t.name)).toEqual(["a", "b"]);
  });

  it("does not change the database file", () => {
    const before = sha(concerts);
    loadSchema(concerts, { examples: 2 });
    schemaPrompt(loadSchema(shop), { question: "customers in Berlin", tokenBudget: 300 });
    expect(sha(concerts)).toBe(before);
  });

  it("fails with DB_FILE_NOT_FOUND for a missing file and DB_INVALID for a file that is not SQLite", () => {
    expect(() => loadSchema(join(dir, "missing.sqlite"))).toThrow(expect.objectContaining({ code: "DB_FILE_NOT_FOUND" }));
    const junk = join(dir, "junk.sqlite");
    writeFileSync(junk, "this is not a database, just some text that is long enough to have a header".repeat(20));
    let caught: unknown;
    try {
      loadSchema(junk);
    } catch (err) {
      caught = err;
    }
    expect(isReexError(caught, "DB_INVALID")).toBe(true);
  });
});

describe("schema text", () => {
  it("writes CodeS lines: one per table, types, keys, comments, values, then foreign keys", () => {
    const s = withDescriptions(loadSchema(concerts, { examples: 2 }), { SINGER: { "birth place": "city where the singer was born" } });
    expect(renderSchema(s)).toBe(
      [
        "table stadium , columns = [ stadium.stadium_id ( integer | primary key | values : 1 , 2 ) , stadium.name ( text | values : Wembley , Anfield ) , stadium.capacity ( int | values : 90000 , 54000 ) ]",
        "table singer , columns = [ singer.singer_id ( integer | primary key | values : 1 , 2 ) , singer.name ( text | values : Joe Sharp , Timbaland ) , singer.`Birth Place` ( text | comment : city where the singer was born | values : London , Paris ) , singer.bio ( text | values : " +
          "x".repeat(40) +
          "... ) ]",
        "table concert , columns = [ concert.concert_id ( integer | primary key | values : 1 , 2 ) , concert.stadium_id ( integer | values : 1 ) , concert.year ( text | values : 2014 , 2015 ) ]",
        "foreign keys :",
        "concert.concert_id = singer.singer_id",
        "concert.stadium_id = stadium.stadium_id",
      ].join("\n"),
    );
  });

  it("accepts descriptions through loadSchema as well", () => {
    const s = loadSchema(concerts, { descriptions: { stadium: { capacity: "seats" } } });
    expect(s.tables[0]!.columns[2]!.comment).toBe("seats");
    expect(loadSchema(concerts).tables[0]!.columns[2]!.comment).toBeUndefined();
  });

  it("writes the stored CREATE TABLE statements in the ddl format", () => {
    const text = renderSchema(loadSchema(concerts), { format: "ddl" });
    expect(text.split("\n\n")).toEqual([
      "CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT NOT NULL, capacity INT);",
      'CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, "Birth Place" TEXT, bio TEXT);',
      expect.stringMatching(
        /^CREATE TABLE concert \(concert_id INTEGER PRIMARY KEY, stadium_id INTEGER REFERENCES stadium \(stadium_id\), year TEXT,\s+FOREIGN KEY \(concert_id\) REFERENCES singer\);$/,
      ),
    ]);
  });
});

describe("schemaPrompt", () => {
  it("returns the whole schema when there is no budget or it fits", () => {
    const s = loadSchema(concerts);
    const full = renderSchema(s);
    expect(schemaPrompt(s).text).toBe(full);
    expect(schemaPrompt(s, { question: "singers", tokenBudget: 10_000 })).toEqual({
      text: full,
      tables: ["stadium", "singer", "concert"],
      omittedTables: [],
      omittedColumns: [],
    });
  });

  it("keeps the tables a question needs out of 300, with the join path between them, within the budget", () => {
    const s = loadSchema(shop);
    expect(s.tables).toHaveLength(300);
    const full = renderSchema(s);
    const budget = 500;
    expect(approxTokens(full)).toBeGreaterThan(10 * budget);
    const p = schemaPrompt(s, {
      question: "What is the total price of the products bought by customers living in Berlin?",
      tokenBudget: budget,
      matches: [{ table: "customer", column: "city", score: 1 }],
    });
    expect(approxTokens(p.text)).toBeLessThanOrEqual(budget);
    expect(p.tables).toEqual(expect.arrayContaining(["customer", "product", "orders", "order_item"]));
    expect(p.text).toContain("customer.city");
    expect(p.text).toContain("product.price");
    expect(p.text).toContain("orders.customer_id = customer.customer_id");
    expect(p.text).toContain("order_item.order_id = orders.order_id");
    expect(p.text).toContain("order_item.product_id = product.product_id");
    expect(p.tables.length + p.omittedTables.length).toBe(300);
    const last = p.text.split("\n").at(-1)!;
    expect(last).toMatch(new RegExp(`^-- omitted ${p.omittedTables.length} tables( and \\d+ columns?)? not related to the question: \\w+, .*, \\.\\.\\.$`));
  });

  it("keeps primary and foreign keys of partly shown tables", () => {
    const s = loadSchema(shop);
    const p = schemaPrompt(s, { question: "Which colour and weight do products of suppliers in France have?", tokenBudget: 160 });
    expect(approxTokens(p.text)).toBeLessThanOrEqual(160);
    expect(p.tables).toEqual(expect.arrayContaining(["product", "supplier"]));
    expect(p.text).toContain("product.product_id");
    expect(p.text).toContain("product.supplier_id = supplier.supplier_id");
    expect(p.text).toContain("product.colour");
    expect(p.text).toContain("product.weight");
  });

  it("uses the injected token counter", () => {
    const s = loadSchema(shop);
    const words = (t: string): number => t.split(/\s+/).filter(Boolean).length;
    let calls = 0;
    const countTokens = (t: string): number => {
      calls++;
      return words(t);
    };
    const p = schemaPrompt(s, { question: "customers in Berlin", tokenBudget: 400, countTokens });
    expect(calls).toBeGreaterThan(0);
    expect(words(p.text)).toBeLessThanOrEqual(400);
    expect(approxTokens(p.text)).toBeGreaterThan(400);
    expect(p.tables).toContain("customer");
  });

  it("without a question keeps whole tables in schema order and says it cut for the budget", () => {
    const s = loadSchema(shop);
    const p = schemaPrompt(s, { tokenBudget: 400 });
    expect(p.tables.slice(0, 3)).toEqual(["customer", "orders", "order_item"]);
    expect(p.omittedColumns).toEqual([]);
    expect(p.text.split("\n").at(-1)).toMatch(/^-- omitted \d+ tables to fit the token budget: /);
    expect(approxTokens(p.text)).toBeLessThanOrEqual(400);
  });

  it("cuts the ddl format to the budget too, writing CREATE TABLE for partly shown tables", () => {
    const s = loadSchema(shop);
    const p = schemaPrompt(s, { question: "price and colour of each product", tokenBudget: 120, format: "ddl" });
    expect(approxTokens(p.text)).toBeLessThanOrEqual(120);
    expect(p.text).toMatch(/CREATE TABLE (product|"product") \(/);
    expect(p.text).toContain("-- omitted ");
  });
});

/**
 * Matched values read codes: the region code a country's name stands for, the code a longer word
 * abbreviates, a one-letter code written against its column's name or a sex word, a stored
 * singular named in the plural, and `&` read as "and". Real SQLite file, real value index.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ValueIndex } from "../../src/sql/index.js";

let dir: string;
let index: ValueIndex;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-value-codes-"));
  const file = join(dir, "shop.sqlite");
  const db = new Database(file);
  db.exec(`
    CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, country TEXT, tier TEXT, sex TEXT);
    CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, channel TEXT, shipping_fee INTEGER);
    CREATE TABLE albums (id INTEGER PRIMARY KEY, album_type TEXT, genre TEXT);
    CREATE TABLE conductors (id INTEGER PRIMARY KEY, nationality TEXT, age INTEGER);
    INSERT INTO conductors (nationality, age) VALUES ('ARG', 40), ('ITA', 51), ('POL', 62), ('GBR', 48);
    CREATE TABLE passengers (id INTEGER PRIMARY KEY, frequent_flyer TEXT);
    INSERT INTO passengers (frequent_flyer) VALUES ('T'), ('F'), ('T');
    CREATE TABLE stores (id INTEGER PRIMARY KEY, state TEXT);
    INSERT INTO stores (state) VALUES ('CA'), ('NY'), ('TX'), ('WA'), ('FL'), ('MA');
    CREATE TABLE suppliers (id INTEGER PRIMARY KEY, country TEXT);
    CREATE TABLE items (id INTEGER PRIMARY KEY, fragile TEXT, is_returned TEXT, hasWarranty TEXT);
    INSERT INTO items (fragile, is_returned, hasWarranty) VALUES ('Y', 'false', 'yes'), ('N', 'true', 'no'), ('Y', 'true', 'no');
  `);
  const countries = ["DE", "GB", "KR", "US", "FR"];
  const add = db.prepare("INSERT INTO customers (name, country, tier, sex) VALUES (?, ?, ?, ?)");
  for (let i = 0; i < 40; i++) add.run(`Customer ${i}`, countries[i % 5], ["G", "S", "B"][i % 3], ["F", "M"][i % 2]);
  const order = db.prepare("INSERT INTO orders (status, channel) VALUES (?, ?)");
  for (let i = 0; i < 40; i++) order.run(["SHP", "CNC", "RTN", "PND"][i % 4], ["WEB", "STORE"][i % 2]);
  const album = db.prepare("INSERT INTO albums (album_type, genre) VALUES (?, ?)");
  for (let i = 0; i < 12; i++) album.run(["ep", "single", "album"][i % 3], ["Drum & Bass", "Jazz"][i % 2]);
  // more countries than a column of abbreviations may hold
  const many = "AR AT AU BE BR CA CH CL CN CO CZ DE DK EG ES FI FR GB GR HU ID IE IL IN IT JP KE KR MX NG NL NO NZ PE PL PT SE TR US ZA".split(" ");
  const supplier = db.prepare("INSERT INTO suppliers (country) VALUES (?)");
  for (const c of many) supplier.run(c);
  db.close();
  index = ValueIndex.open(file, { indexDir: join(dir, "indexes") });
});

afterAll(() => {
  index.close();
  rmSync(dir, { recursive: true, force: true });
});

const found = (question: string, codes = true): string[] => index.match(question, { codes }).map((m) => `${m.table}.${m.column}=${m.value}`);

describe("matched values read codes", () => {
  it("finds the region code a country's name, another common name or its people stand for", () => {
    expect(found("How many customers live in Germany?")).toContain("customers.country=DE");
    expect(found("How many customers come from the UK?")).toContain("customers.country=GB");
    expect(found("List the South Korean customers.")).toContain("customers.country=KR");
    expect(found("How many customers live in the United States?")).toContain("customers.country=US");
    expect(found("How many customers live in Spain?")).not.toContain("customers.country=ES");
    expect(found("How many suppliers are in Kenya?")).toContain("suppliers.country=KE");
  });

  it("reads a column of US state codes as states, not as the regions some of them also spell", () => {
    expect(found("How many stores are in California?")).toContain("stores.state=CA");
    expect(found("How many stores are in New York or Texas?")).toEqual(expect.arrayContaining(["stores.state=NY", "stores.state=TX"]));
    expect(found("How many stores are in Canada?")).not.toContain("stores.state=CA");
  });

  it("reads a longer word as the code of a few upper-case letters it abbreviates, and not a short or function word", () => {
    expect(found("How many orders were shipped?")).toContain("orders.status=SHP");
    expect(found("How many cancelled or returned orders are there?")).toEqual(expect.arrayContaining(["orders.status=CNC", "orders.status=RTN"]));
    // a word of a table's or column's name names that: "shipping" is shipping_fee's, "orderses" the table's
    expect(found("What is the average shipping fee of the orderses?").filter((m) => m.startsWith("orders.status"))).toEqual([]);
    // "ship" is too short to stand for SHP; no word of this question abbreviates a status
    expect(found("Which orders ship first?").filter((m) => m.startsWith("orders.status"))).toEqual([]);
    expect(found("How many conductors come from Argentina?")).toContain("conductors.nationality=ARG");
    // a word that says what to compute is not a value, though "average" holds the letters of ARG
    expect(found("What is the average age of conductors?")).not.toContain("conductors.nationality=ARG");
  });

  it("reads a one-letter code only against its column's name, or as the sex a word names", () => {
    expect(found("How many gold-tier customers are there?")).toContain("customers.tier=G");
    expect(found("How many gold customers are there?")).not.toContain("customers.tier=G");
    // a word of the column's own name is not a code: "frequent flyer" names frequent_flyer, not its F
    expect(found("How many passengers are frequent flyers? frequent flyer refers to passengers.frequent_flyer")).not.toContain("passengers.frequent_flyer=F");
    expect(found("How many female customers are there?")).toContain("customers.sex=F");
    expect(found("How many men are customers?")).toContain("customers.sex=M");
  });

  it("names a stored singular in the plural and reads '&' as 'and'", () => {
    expect(found("How many EPs are there?")).toContain("albums.album_type=ep");
    expect(found("How many singles are there?")).toContain("albums.album_type=single");
    expect(found("How many drum and bass albums are there?")).toContain("albums.genre=Drum & Bass");
  });

  it("reads a yes/no column's true value where its name is said, and its false value after a negation", () => {
    expect(found("How many items are fragile?")).toContain("items.fragile=Y");
    expect(found("How many items are not fragile?")).toContain("items.fragile=N");
    expect(found("How many returned items are there?")).toContain("items.is_returned=true");
    expect(found("How many items come without warranty?")).toContain("items.hasWarranty=no");
    expect(found("How many items are there?").filter((m) => m.startsWith("items."))).toEqual([]);
  });

  it("reads no codes when told not to", () => {
    for (const q of [
      "How many customers live in Germany?",
      "How many orders were shipped?",
      "How many EPs are there?",
      "How many female customers are there?",
    ]) {
      expect(found(q, false).some((m) => /=(DE|SHP|ep|F)$/.test(m))).toBe(false);
    }
  });
});

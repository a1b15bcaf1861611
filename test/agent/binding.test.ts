import { describe, expect, test } from "vitest";
import { NameBinding } from "../../src/agent/index.js";

const schema = {
  tables: [
    { name: "singer", columns: ["singer_id", "name", "age", "country"] },
    { name: "concert", columns: ["concert_id", "concert_name", "stadium_id", "year"] },
    { name: "stadium", columns: ["stadium_id", "name", "capacity"] },
    { name: "singer_in_concert", columns: ["concert_id", "singer_id"] },
    { name: "città", columns: ["nome", "popolazione"] },
  ],
};
const binding = new NameBinding(schema);
const body = (sql: string): boolean => binding.admits(sql, "final-body");

describe("name binding on partial SQL", () => {
  test("holds the FROM list to tables that have the columns named before it", () => {
    expect(body("SELECT name FROM singer")).toBe(true);
    expect(body("SELECT concert_name FROM singer")).toBe(false);
    expect(body("SELECT concert_name FROM s")).toBe(false);
    expect(body("SELECT concert_name FROM c")).toBe(true);
    expect(body("SELECT T1.capacity FROM singer AS T1")).toBe(false);
    expect(body("SELECT T1.capacity FROM stadium AS T1")).toBe(true);
  });

  test("keeps joins that need two tables possible, but not a FROM list that ends unbound", () => {
    expect(body("SELECT name, year FROM singer")).toBe(true);
    expect(body("SELECT name, year FROM singer W")).toBe(false);
    expect(body("SELECT name, year FROM singer WHERE")).toBe(false);
    expect(body("SELECT name, year FROM singer O")).toBe(true);
    expect(body("SELECT name, year FROM singer JOIN concert ON")).toBe(true);
    expect(body("SELECT name, year FROM singer JOIN concert WHERE year > 2000")).toBe(true);
    expect(body("SELECT T1.name, T2.year FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.concert_id")).toBe(true);
    expect(body("SELECT name FROM singer <")).toBe(true);
    expect(body("SELECT name, year FROM singer <")).toBe(false);
  });

  test("after FROM, names only columns of tables in scope and bound aliases", () => {
    expect(body("SELECT name FROM singer WHERE age > 30")).toBe(true);
    expect(body("SELECT name FROM singer WHERE capacity")).toBe(false);
    expect(body("SELECT name FROM singer WHERE cap")).toBe(false);
    expect(body("SELECT name FROM singer WHERE a")).toBe(true);
    expect(body("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.stadium_id WHERE T2.age")).toBe(false);
    expect(body("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.stadium_id WHERE T2.ye")).toBe(true);
    expect(body("SELECT T1.name FROM singer AS T1 WHERE T3.")).toBe(false);
    expect(body("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.capacity")).toBe(false);
  });

  test("before FROM, an alias's columns must fit one table", () => {
    expect(body("SELECT T1.concert_name, T1.year")).toBe(true);
    expect(body("SELECT T1.concert_name, T1.capacity")).toBe(false);
  });

  test("subqueries see their own FROM list and the enclosing ones", () => {
    expect(body("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)")).toBe(true);
    expect(body("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM conc")).toBe(false);
    expect(body("SELECT name FROM singer AS T1 WHERE EXISTS (SELECT concert_id FROM singer_in_concert WHERE singer_id = T1.singer_id AND age > 3)")).toBe(true);
    expect(body("SELECT name FROM singer WHERE age > (SELECT AVG(capacity) FROM stadium) AND capacity")).toBe(false);
  });

  test("SELECT *, COUNT(*), output aliases and compound selects keep working", () => {
    expect(body("SELECT COUNT(*) FROM concert")).toBe(true);
    expect(body("SELECT * FROM stadium WHERE capacity > 10")).toBe(true);
    expect(body("SELECT country, COUNT(*) AS n FROM singer GROUP BY country ORDER BY n DESC")).toBe(true);
    expect(body("SELECT CAST(age AS REAL) FROM singer")).toBe(true);
    expect(body("SELECT name FROM singer UNION SELECT name FROM stadium")).toBe(true);
    expect(body("SELECT name FROM singer UNION SELECT capacity FROM singer")).toBe(false);
  });

  test("non-ASCII and quoted names bind like any other", () => {
    expect(body("SELECT nome FROM città")).toBe(true);
    expect(body('SELECT "nome" FROM "città" WHERE popolazione > 5')).toBe(true);
    expect(body("SELECT nome FROM singer")).toBe(false);
    expect(body("SELECT popolazione FROM città WHERE nom")).toBe(true);
  });

  test("a name that is no column in scope, or a control character, is refused; a derived table's outputs are not", () => {
    expect(body("SELECT COUNT(*) FROM singer WHERE se x")).toBe(false);
    expect(body("SELECT name FROM singer WHERE \u0000")).toBe(false);
    expect(body("SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM singer GROUP BY country)")).toBe(true);
    expect(body("SELECT MAX(n) FROM singer")).toBe(false);
    expect(body("SELECT name FROM (")).toBe(false);
    expect(body("SELECT COUNT(*) FROM (")).toBe(true);
  });

  test("text outside SQL and an UNANSWERABLE answer are always admitted", () => {
    expect(binding.admits("<think>name FROM singer, capacity</think>", "segment")).toBe(true);
    expect(binding.admits("<think>x</think><intermediate_sql>SELECT concert_name FROM singer", "segment")).toBe(false);
    expect(binding.admits("<think>x</think><intermediate_sql>SELECT concert_name FROM concert", "first")).toBe(true);
    expect(body("UNANSWERABLE: nothing holds the weather")).toBe(true);
    expect(body("SELECT concert_name FROM concert</final_sql>")).toBe(true);
  });
});

describe("name binding in mode from", () => {
  const from = binding.withMode("from");
  test("holds the FROM list to the columns before it but leaves columns after FROM to the rebinding after generation", () => {
    expect(from.mode).toBe("from");
    expect(from.admits("SELECT concert_name FROM singer", "final-body")).toBe(false);
    expect(from.admits("SELECT T1.capacity FROM singer AS T1", "final-body")).toBe(false);
    expect(from.admits("SELECT COUNT(*) FROM singer WHERE capacity > 3", "final-body")).toBe(true);
    expect(from.admits("SELECT T1.name FROM singer AS T1 WHERE T1.capacity > 3", "final-body")).toBe(true);
    expect(from.admits("SELECT T1.name FROM singer AS T1 WHERE T3.", "final-body")).toBe(false);
    expect(from.admits("SELECT COUNT(*) FROM singer WHERE se x", "final-body")).toBe(false);
    // the whole-SQL check stays full
    expect(from.check("SELECT COUNT(*) FROM singer WHERE capacity > 3")).toMatch(/capacity/);
    expect(binding.mode).toBe("full");
  });
});

describe("name binding on whole SQL", () => {
  test("names the first name that does not bind", () => {
    expect(binding.check("SELECT name FROM singer")).toBeUndefined();
    expect(binding.check("SELECT concert_name FROM singer")).toMatch(/concert_name|singer/);
    expect(binding.check("SELECT name, year FROM singer")).toMatch(/year/);
    expect(binding.check("SELECT name")).toMatch(/no FROM/);
    expect(binding.check("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.concert_id WHERE T2.year = 1")).toBeUndefined();
  });
});

describe("a FROM list drawn again (rebind)", () => {
  const from = binding.withMode("from");

  test("a column after FROM in none of its tables sends the decoder back just past FROM, holding the list to every column named after it", () => {
    const sql = "SELECT name FROM singer WHERE year = 2014 AND age > 30";
    const r = from.rebind(sql);
    expect(r).toBeDefined();
    expect(sql.slice(0, r!.at)).toBe("SELECT name FROM");
    expect(new Set(r!.columns)).toEqual(new Set(["year", "age"]));
    const again = from.requiring(r!);
    const prefix = sql.slice(0, r!.at);
    // name and age are singer's, year is concert's: the list must hold both tables before it ends
    expect(again.admits(`${prefix} concert`, "final-body")).toBe(true);
    expect(again.admits(`${prefix} singer WHERE`, "final-body")).toBe(false);
    expect(again.admits(`${prefix} singer_in_concert`, "final-body")).toBe(false);
    expect(again.admits(`${prefix} singer JOIN concert WHERE`, "final-body")).toBe(true);
    // the binding it was made from is unchanged
    expect(from.admits(`${prefix} singer WHERE`, "final-body")).toBe(true);
  });

  test("an alias's column its table lacks holds that alias's table, and the redrawn list's join conditions bind", () => {
    const sql = "SELECT T1.name FROM singer AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id WHERE T2.year = 1";
    const r = from.rebind(sql);
    expect(r?.qualified).toEqual([{ alias: "t2", column: "year" }]);
    const again = from.requiring(r!);
    const prefix = sql.slice(0, r!.at);
    expect(again.admits(`${prefix} singer AS T1 JOIN singer AS T2`, "final-body")).toBe(false);
    expect(again.admits(`${prefix} singer AS T1 JOIN concert AS T2`, "final-body")).toBe(true);
    expect(again.admits(`${prefix} singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id`, "final-body")).toBe(false);
    expect(again.admits(`${prefix} singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.concert_id`, "final-body")).toBe(true);
    // a join condition naming a column its tables lack is reason enough to draw the list again
    expect(from.rebind("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.concert_id = T2.concert_id")).toBeDefined();
  });

  test("SQL that binds, or fails elsewhere, is not drawn again", () => {
    expect(from.rebind("SELECT name FROM singer WHERE age > 30")).toBeUndefined();
    expect(from.rebind("SELECT concert_name FROM singer")).toBeUndefined();
    expect(from.rebind("SELECT name FROM singer WHERE age IN (SELECT capacity FROM concert)")).toBeUndefined();
    expect(from.rebind("SELECT name FROM singer WHERE nonsense = 1")).toBeUndefined();
  });
});

describe("a name that is a table's and another table's column", () => {
  test("binds as a column after FROM", () => {
    const both = new NameBinding({
      tables: [
        { name: "city", columns: ["city_id", "city"] },
        { name: "temperature", columns: ["city_id", "jan"] },
      ],
    });
    expect(both.check("SELECT COUNT(*) FROM temperature WHERE city = 'Sydney'")).toMatch(/city/);
    expect(both.check("SELECT COUNT(*) FROM city WHERE city = 'Sydney'")).toBeUndefined();
    expect(both.withMode("from").rebind("SELECT COUNT(*) FROM temperature WHERE city = 'Sydney'")?.columns).toEqual(["city"]);
  });
});

describe("a FROM list drawn again keeps what its join conditions said", () => {
  test("an alias's column in an ON condition holds that alias's table too", () => {
    const from = binding.withMode("from");
    // singer_in_concert has no name, and T1.singer_id says T1 is a table with singer_id
    const r = from.rebind("SELECT T1.name FROM stadium AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id WHERE T2.concert_id = 1");
    expect(r?.qualified).toEqual(
      expect.arrayContaining([
        { alias: "t1", column: "singer_id" },
        { alias: "t2", column: "singer_id" },
      ]),
    );
    const again = from.requiring(r!);
    expect(again.admits("SELECT T1.name FROM stadium AS T1", "final-body")).toBe(false);
    expect(again.admits("SELECT T1.name FROM singer AS T1", "final-body")).toBe(true);
  });
});

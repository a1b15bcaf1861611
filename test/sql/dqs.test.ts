/**
 * Double-quoted string literals as in stock SQLite: a double-quoted word that names no column is a
 * string; one that names a column (in any scope) is that column. Checked against better-sqlite3
 * without the switch (the behaviour before) and against Debian's Python sqlite3 (stock SQLite).
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutorPool, closeDirectConnections, executeDirect, type ExecResult } from "../../src/sql/index.js";
import { fileHash, removeDir, tempDir } from "./helpers.js";

const PYTHON = "/usr/bin/python3";

let dir: string;
let db: string;
let hashBefore: string;
let pool: ExecutorPool;

/** A Spider-like world: countries, their languages, and a table whose column is literally named "Aruba". */
function makeWorldDb(path: string): string {
  const w = new Database(path);
  w.exec(`
    CREATE TABLE country (Code TEXT PRIMARY KEY, Name TEXT, Continent TEXT, Population INTEGER);
    CREATE TABLE countrylanguage (CountryCode TEXT, Language TEXT, IsOfficial TEXT, Percentage REAL);
    CREATE TABLE quirk (code TEXT, Aruba TEXT);
    INSERT INTO country VALUES ('ABW','Aruba','North America',103000), ('NLD','Netherlands','Europe',15864000),
      ('CHL','Chile','South America',15211000), ('JPN','Japan','Asia',126714000), ('NPL','Nepal','Asia',23930000);
    INSERT INTO countrylanguage VALUES ('ABW','Papiamento','F',76.7), ('ABW','Dutch','T',5.3), ('ABW','English','F',9.5),
      ('NLD','Dutch','T',95.6), ('NLD','Frisian','F',3.7), ('CHL','Spanish','T',89.7), ('JPN','Japanese','T',99.1), ('NPL','Nepali','T',50.4);
    INSERT INTO quirk VALUES ('ABW','Aruba'), ('NLD','Holland'), ('CHL','Chile');
  `);
  w.close();
  return path;
}

beforeAll(async () => {
  dir = tempDir("reex-dqs-");
  db = makeWorldDb(join(dir, "world.sqlite"));
  hashBefore = fileHash(db);
  pool = new ExecutorPool({ workers: 1 });
  await pool.ready();
});

afterAll(async () => {
  await pool.close();
  closeDirectConnections();
  removeDir(dir);
});

function rowsOf(result: ExecResult): unknown[][] {
  if (!result.ok) throw new Error(`query failed: ${result.error.code}: ${result.error.message}`);
  return result.rows;
}

/** Queries with double quotes, each with the rows stock SQLite gives (worked out by hand). */
const DOUBLE_QUOTED: [sql: string, rows: unknown[][], why: string][] = [
  [`SELECT Code FROM country WHERE Name = "Aruba"`, [["ABW"]], "names no column of country: a string"],
  [
    `SELECT T2.Language FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code = T2.CountryCode WHERE T1.Name  =  "Aruba" ORDER BY T2.Percentage DESC LIMIT 1`,
    [["Papiamento"]],
    "Spider's style, in a join with aliases",
  ],
  [`SELECT "nope" FROM country WHERE Code = 'NLD'`, [["nope"]], "a string in the select list"],
  [`SELECT "a""b"`, [['a"b']], "a doubled quote inside"],
  [`SELECT Code FROM country WHERE Name IN ("Chile", "Japan") ORDER BY Code`, [["CHL"], ["JPN"]], "strings in an IN list"],
  [`SELECT "Name" FROM country WHERE Code = 'CHL'`, [["Chile"]], "names a column: the column"],
  [`SELECT "Name" FROM country WHERE "Name" = "Nepal"`, [["Nepal"]], "the same quotes as column and as string"],
  [
    `SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM countrylanguage WHERE Language = "Dutch") ORDER BY Name`,
    [["Aruba"], ["Netherlands"]],
    "a string in a subquery",
  ],
  [
    `SELECT Name FROM country WHERE EXISTS (SELECT 1 FROM countrylanguage WHERE CountryCode = Code AND "Name" = 'Japan')`,
    [["Japan"]],
    "names a column of the outer query: still that column",
  ],
  [
    `SELECT (SELECT count(*) FROM countrylanguage AS l WHERE l.CountryCode = c."Code") FROM country AS c WHERE c.Name = "Netherlands"`,
    [[2]],
    "a qualified quoted column in a correlated subquery",
  ],
  [`SELECT Name AS label FROM country WHERE "label" = "Chile"`, [["Chile"]], "names a result alias: the alias"],
  [`WITH x AS (SELECT Name AS n FROM country) SELECT n FROM x WHERE "n" = "Japan"`, [["Japan"]], "a CTE column and a string"],
  [`SELECT Continent, count(*) FROM country GROUP BY "Continent" HAVING "Continent" = "Asia"`, [["Asia", 2]], "GROUP BY and HAVING"],
  [
    `SELECT c.Name FROM country AS c JOIN quirk AS q ON c.Code = q.code WHERE c.Name = "Aruba" ORDER BY c.Name`,
    [["Aruba"], ["Chile"]],
    "names quirk.Aruba in this join: the column, not a string",
  ],
  [`SELECT "Aruba" FROM quirk ORDER BY code`, [["Aruba"], ["Chile"], ["Holland"]], "a column literally named Aruba"],
];

describe("double-quoted strings behave as in stock SQLite", () => {
  it("reads each double-quoted word as a column when one is named, else as a string, in the pool and in-process", async () => {
    for (const [sql, rows, why] of DOUBLE_QUOTED) {
      expect(rowsOf(await pool.execute(db, sql)), `${why}: ${sql}`).toEqual(rows);
      expect(rowsOf(executeDirect(db, sql)), `${why}: ${sql}`).toEqual(rows);
    }
  });

  it("still fails a quoted name that is qualified, or that names two columns", async () => {
    expect(await pool.execute(db, `SELECT country."nope" FROM country`)).toMatchObject({ ok: false, error: { code: "SQL_NO_SUCH_COLUMN" } });
    expect(await pool.execute(db, `SELECT "code" FROM country JOIN quirk ON 1`)).toMatchObject({
      ok: false,
      error: { code: "SQL_NO_SUCH_COLUMN", message: expect.stringMatching(/ambiguous/) },
    });
  });

  it("reads a view that the user's stock SQLite wrote with a double-quoted string", async () => {
    const viewDb = makeWorldDb(join(dir, "with-view.sqlite"));
    const w = new Database(viewDb);
    // better-sqlite3 itself refuses this DDL; writable_schema is the way to store what stock SQLite would have stored.
    w.unsafeMode(true);
    w.pragma("writable_schema = ON");
    w.prepare("INSERT INTO sqlite_schema (type, name, tbl_name, rootpage, sql) VALUES ('view', 'asia', 'asia', 0, ?)").run(
      `CREATE VIEW asia AS SELECT Name FROM country WHERE Continent = "Asia"`,
    );
    w.pragma("writable_schema = OFF");
    w.close();
    const raw = new Database(viewDb, { readonly: true });
    expect(() => raw.prepare("SELECT * FROM asia").all()).toThrow(/no such column: "Asia"/);
    raw.close();
    expect(rowsOf(await pool.execute(viewDb, "SELECT Name FROM asia ORDER BY Name"))).toEqual([["Japan"], ["Nepal"]]);
  });

  it.skipIf(!existsSync(PYTHON))("gives the rows or the failure that stock SQLite (Python's sqlite3) gives", async () => {
    const sqls = [
      ...DOUBLE_QUOTED.map(([sql]) => sql),
      `SELECT country."nope" FROM country`,
      `SELECT "code" FROM country JOIN quirk ON 1`,
      `SELECT Name FROM country WHERE Name = "Peru"`,
    ];
    const script = [
      "import json, sqlite3, sys",
      "con = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)",
      "out = []",
      "for sql in json.load(sys.stdin):",
      "    try: out.append({'ok': True, 'rows': [list(r) for r in con.execute(sql).fetchall()]})",
      "    except sqlite3.Error as e: out.append({'ok': False, 'message': str(e)})",
      "print(json.dumps(out))",
    ].join("\n");
    const stock = JSON.parse(execFileSync(PYTHON, ["-c", script, db], { input: JSON.stringify(sqls), encoding: "utf8" })) as {
      ok: boolean;
      rows?: unknown[][];
    }[];
    for (const [i, sql] of sqls.entries()) {
      const ours = await pool.execute(db, sql);
      expect(ours.ok, sql).toBe(stock[i]!.ok);
      if (ours.ok) expect(ours.rows, sql).toEqual(stock[i]!.rows);
    }
  });
});

describe("queries valid before are untouched", () => {
  const VALID = [
    "SELECT * FROM country ORDER BY Code",
    "SELECT Name, Population FROM country WHERE Name = 'Aruba'",
    `SELECT "Name", "Population" FROM "country" WHERE "Continent" = 'Asia' ORDER BY "Population" DESC`,
    "SELECT T1.Name, T2.Language, T2.Percentage FROM country AS T1 JOIN countrylanguage AS T2 ON T1.Code = T2.CountryCode ORDER BY 1, 2",
    `SELECT q."Aruba", c."Name" FROM quirk AS q LEFT JOIN country AS c ON c.Code = q.code ORDER BY q.code`,
    "SELECT Continent, avg(Population), count(*) FROM country GROUP BY Continent ORDER BY Continent",
    "WITH big AS (SELECT * FROM country WHERE Population > 1000000) SELECT Name FROM big ORDER BY Name",
    "SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM countrylanguage WHERE IsOfficial = 'T' AND Percentage > 90)",
    "SELECT `Name`, [Code] FROM country ORDER BY 2",
    "VALUES (1, 'one'), (2, 'two')",
    "SELECT * FROM pragma_table_info('country')",
  ];

  it("gives the same rows as better-sqlite3 without double-quoted strings", async () => {
    const before = new Database(db, { readonly: true });
    try {
      for (const sql of VALID) {
        const expected = before.prepare(sql).raw(true).all();
        expect(expected.length, sql).toBeGreaterThan(0);
        expect(rowsOf(await pool.execute(db, sql)), sql).toEqual(expected);
        expect(rowsOf(executeDirect(db, sql)), sql).toEqual(expected);
      }
    } finally {
      before.close();
    }
  });
});

describe("the read-only guard with double quotes", () => {
  const refused = (): string[] => [
    `INSERT INTO country (Code, Name) VALUES ("XXX", "Nowhere")`,
    `UPDATE country SET Name = "Nowhere"`,
    `DELETE FROM country WHERE Name = "Aruba"`,
    `WITH x AS (SELECT "a") DELETE FROM country`,
    `CREATE TABLE "z" ("a")`,
    `CREATE VIEW z AS SELECT "a"`,
    `DROP TABLE "country"`,
    `ATTACH "${join(dir, "attached.db")}" AS x`,
    `ATTACH DATABASE "other.db" AS "o"`,
    `PRAGMA table_info("country")`,
    `PRAGMA "writable_schema" = 1`,
    `SELECT load_extension("x")`,
    `SELECT 1; DROP TABLE "country"`,
    `SELECT "a" FROM country; SELECT "b"`,
  ];

  it("refuses writes, DDL, ATTACH, PRAGMA, load_extension() and several statements", async () => {
    for (const sql of refused()) {
      expect(await pool.execute(db, sql), sql).toMatchObject({ ok: false, error: { code: "SQL_REFUSED", category: "refused" } });
      expect(executeDirect(db, sql), sql).toMatchObject({ ok: false, error: { code: "SQL_REFUSED" } });
    }
    expect(existsSync(join(dir, "attached.db"))).toBe(false);
    expect(existsSync(join(dir, "other.db"))).toBe(false);
  });

  it("leaves the user's file byte for byte as it was", async () => {
    for (const [sql] of DOUBLE_QUOTED) await pool.execute(db, sql);
    for (const sql of refused()) executeDirect(db, sql);
    await pool.close();
    closeDirectConnections();
    pool = new ExecutorPool({ workers: 1 });
    expect(fileHash(db)).toBe(hashBefore);
  });

  it("answers a file that is not SQLite, or a corrupt one, DB_INVALID", async () => {
    const garbage = join(dir, "garbage.sqlite");
    writeFileSync(garbage, Buffer.alloc(8192, 0x5a));
    const corrupt = makeWorldDb(join(dir, "corrupt.sqlite"));
    const bytes = readFileSync(corrupt);
    bytes.fill(0xff, 4096, 8192);
    writeFileSync(corrupt, bytes);
    for (const file of [garbage, corrupt]) {
      const sql = `SELECT * FROM country WHERE Name = "Aruba"`;
      expect(await pool.execute(file, sql), file).toMatchObject({ ok: false, error: { code: "DB_INVALID" } });
      expect(executeDirect(file, sql), file).toMatchObject({ ok: false, error: { code: "DB_INVALID" } });
    }
  });
});

describe("the extension's build script (run by npm install and the Dockerfile)", () => {
  /** A bare package root: the script and its C source, and a node_modules holding only better-sqlite3. */
  function bareRoot(): string {
    const root = join(dir, `root-${Math.random().toString(36).slice(2)}`);
    mkdirSync(join(root, "node_modules"), { recursive: true });
    cpSync("scripts/build-sqlite-dqs.sh", join(root, "scripts", "build-sqlite-dqs.sh"));
    cpSync("scripts/sqlite-dqs", join(root, "scripts", "sqlite-dqs"), { recursive: true });
    const betterSqlite = dirname(createRequire(import.meta.url).resolve("better-sqlite3/package.json"));
    symlinkSync(betterSqlite, join(root, "node_modules", "better-sqlite3"));
    return root;
  }

  it("compiles an extension that turns on double-quoted strings in a plain better-sqlite3 connection", () => {
    const root = bareRoot();
    execFileSync("bash", [join(root, "scripts", "build-sqlite-dqs.sh")], { cwd: root, stdio: "pipe" });
    const built = join(root, "node_modules", ".cache", "reex-sqlite", "reex_dqs.so");
    const plain = new Database(db, { readonly: true });
    try {
      expect(() => plain.prepare(`SELECT Code FROM country WHERE Name = "Japan"`).all()).toThrow(/no such column/);
      plain.loadExtension(built);
      expect(plain.prepare(`SELECT Code FROM country WHERE Name = "Japan"`).raw(true).all()).toEqual([["JPN"]]);
    } finally {
      plain.close();
    }
  });

  it("fails, leaving no file behind, when there is no C compiler", () => {
    const root = bareRoot();
    expect(() =>
      execFileSync("bash", [join(root, "scripts", "build-sqlite-dqs.sh")], { cwd: root, stdio: "pipe", env: { ...process.env, CC: "/nonexistent/cc" } }),
    ).toThrow();
    const cache = join(root, "node_modules", ".cache", "reex-sqlite");
    expect(existsSync(cache) ? readdirSync(cache) : []).toEqual([]);
  });
});

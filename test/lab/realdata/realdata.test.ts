import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatCheck } from "../../../src/agent/index.js";
import { loadDataset } from "../../../src/eval/index.js";
import { generateRealData } from "../../../lab/realdata/index.js";
import {
  advisingSql,
  buildWikiTable,
  checkWikiTable,
  defaultDataDir,
  inferForeignKeys,
  parseWikiSql,
  readAdvisingEntries,
  readSpiderSchemas,
  realDbPath,
  realSecondDrawPath,
  spiderSynthDb,
  wikiColumnName,
  wikiDatabase,
  wikiTableName,
  wikiPools,
  wikiQuestions,
  wikiSecondDraw,
  type RealEntry,
  type RealItem,
} from "../../../lab/realdata/testing.js";
import { closeDirectConnections, executeDirect } from "../../../src/sql/index.js";
import { buildQuestions, writeSynthDb } from "../../../lab/synth/index.js";

const DATA = defaultDataDir();

/** WikiSQL-format entries as the shipped file has them (canonical SQL, placeholders, one table id per sentence). */
const WIKI: RealEntry[] = [
  {
    sql: ['SELECT TABLEalias0.NOTES_FIELD FROM TABLE AS TABLEalias0 WHERE TABLEalias0.CURRENT_SLOGAN_FIELD = "var0" ;'],
    sentences: [
      {
        original: "Tell me what the notes are for South Australia ",
        text: "Tell me what the notes are for South Australia",
        "question-split": "train",
        "table-id": "1-100-1",
        variables: { var0: "SOUTH AUSTRALIA" },
      },
    ],
  },
  {
    sql: [
      "SELECT MAX TABLEalias0.CHAPTERS_FIELD FROM TABLE AS TABLEalias0 WHERE TABLEalias0.COLLEGE/JUNIOR/CLUB_TEAM_FIELD = var0 AND TABLEalias0.2ND_FIELD > var1 ;",
    ],
    sentences: [
      {
        original: "Most chapters for Fraternity with a 2nd above 3?",
        text: "x",
        "question-split": "train",
        "table-id": "1-100-1",
        variables: { var0: "Fraternity", var1: "3" },
      },
      {
        original: "Most chapters for Sorority with a 2nd above 10.5?",
        text: "x",
        "question-split": "test",
        "table-id": "1-200-1",
        variables: { var0: "Sorority", var1: "10.5" },
      },
    ],
  },
  {
    sql: ["SELECT COUNT NO._FIELD FROM TABLE AS TABLEalias0 WHERE TABLEalias0.YEAR_FIELD < var0 AND TABLEalias0.FROM_FIELD = var1 ;"],
    sentences: [
      { original: "How many numbers before 1990 from Leeds?", text: "x", "question-split": "dev", "table-id": "1-300-1", variables: { var0: "1990" } },
    ],
    variables: [
      { name: "var0", example: "1990", type: "unknown", location: "both" },
      { name: "var1", example: "Leeds", type: "unknown", location: "sql-only" },
    ],
  },
  {
    sql: ['SELECT TABLEalias0.X_FIELD FROM TABLE AS TABLEalias0 WHERE TABLEalias0.Y_FIELD = var0 = "var1" ;'],
    sentences: [{ original: "broken", text: "broken", "question-split": "train", "table-id": "1-300-1", variables: { var0: "1", var1: "2" } }],
  },
];

describe("WikiSQL's SQL rewritten to SQLite", () => {
  it("names columns from the headers in snake case, quoting none: leading digits and keywords get col_", () => {
    expect(wikiColumnName("COLLEGE/JUNIOR/CLUB_TEAM")).toBe("college_junior_club_team");
    expect(wikiColumnName("FLEET_SERIES_(QUANTITY)")).toBe("fleet_series_quantity");
    expect(wikiColumnName("2ND")).toBe("col_2nd");
    expect(wikiColumnName("NO.")).toBe("col_no");
    expect(wikiColumnName("FROM")).toBe("col_from");
    expect(wikiColumnName("#")).toBe("num");
    expect(wikiColumnName("WIN_%")).toBe("win_pct");
  });

  it("parses aggregates without parentheses, columns without the alias and placeholders quoted or bare", () => {
    expect(parseWikiSql(WIKI[1]!.sql[0]!, { var0: "Fraternity", var1: "3" })).toEqual({
      agg: "MAX",
      select: "CHAPTERS",
      conds: [
        { column: "COLLEGE/JUNIOR/CLUB_TEAM", op: "=", value: "Fraternity" },
        { column: "2ND", op: ">", value: "3" },
      ],
    });
    expect(parseWikiSql(WIKI[2]!.sql[0]!, { var0: "1990" })).toBe("missing-value");
    expect(parseWikiSql(WIKI[3]!.sql[0]!, { var0: "1", var1: "2" })).toBe("unparsed-sql");
  });

  it("keeps every question whose SQL parses, fills sql-only values from the entry, and counts the rest by reason", () => {
    const { questions, dropped, total } = wikiQuestions(WIKI);
    expect(total).toBe(5);
    expect(questions).toHaveLength(4);
    expect(dropped).toEqual({ "unparsed-sql": 1 });
    expect(questions[0]!.question).toBe("Tell me what the notes are for South Australia");
    expect(questions[3]!.conds[1]).toEqual({ column: "FROM", op: "=", value: "Leeds" });
    expect(questions.map((q) => q.split)).toEqual(["train", "train", "test", "dev"]);
  });

  it("names a table by the noun its headers suggest, never as one of its columns, else records", () => {
    expect(wikiTableName(["DRIVER", "LAPS", "GRID", "TIME/RETIRED"])).toBe("races");
    expect(wikiTableName(["NO._IN_SERIES", "TITLE", "DIRECTED_BY", "U.S._VIEWERS_(MILLIONS)"])).toBe("episodes");
    expect(wikiTableName(["NAME", "NOTES"])).toBe("records");
    // a column already named so: the next choice
    expect(wikiTableName(["GAMES", "OPPONENT", "ATTENDANCE"])).toBe("records");
    expect(wikiTableName(["RECORDS", "NOTES"])).toBe("entries");
  });

  it("builds a typed table with distractor columns on which every gold query runs and returns rows, the same for the same seed", () => {
    const { questions } = wikiQuestions(WIKI);
    const pools = wikiPools(questions);
    for (const id of ["1-100-1", "1-200-1", "1-300-1"]) {
      const qs = questions.filter((q) => q.tableId === id);
      const table = buildWikiTable(id, qs, pools, "seed");
      expect(table.columns.filter((c) => c.distractor).length).toBeGreaterThanOrEqual(2);
      const db = wikiDatabase(table);
      const { items, dropped } = checkWikiTable(db, table);
      expect(dropped).toEqual({});
      expect(items).toHaveLength(qs.length);
      for (const it of items) expect((db.prepare(it.SQL).raw(true).all() as unknown[][]).length).toBeGreaterThan(0);
      const again = wikiDatabase(buildWikiTable(id, qs, pools, "seed"));
      expect(Buffer.compare(db.serialize(), again.serialize())).toBe(0);
      db.close();
      again.close();
    }
    const t = buildWikiTable(
      "1-100-1",
      questions.filter((q) => q.tableId === "1-100-1"),
      pools,
      "seed",
    );
    const types = Object.fromEntries(t.columns.map((c) => [c.name, c.type]));
    expect(types).toMatchObject({ chapters: "INTEGER", col_2nd: "INTEGER", college_junior_club_team: "TEXT", notes: "TEXT" });
    const sqls = checkWikiTable(wikiDatabase(t), t).items.map((i) => i.SQL);
    expect(sqls).toContain(`SELECT MAX(chapters) FROM picks WHERE college_junior_club_team = 'Fraternity' AND col_2nd > 3`);
    expect(sqls).toContain(`SELECT notes FROM picks WHERE current_slogan = 'SOUTH AUSTRALIA'`);
  });
});

describe("WikiSQL's second row draw", () => {
  const { questions } = wikiQuestions(WIKI);
  const pools = wikiPools(questions);
  const table = (id: string) =>
    buildWikiTable(
      id,
      questions.filter((q) => q.tableId === id),
      pools,
      "seed",
    );
  const rows = (db: Database.Database, sql: string): unknown[][] => db.prepare(sql).raw(true).all() as unknown[][];

  it("leaves the first draw as it was before the second existed (its columns, name and rows hashed then)", () => {
    const h = createHash("sha256");
    for (const id of ["1-100-1", "1-200-1", "1-300-1"]) {
      const t = table(id);
      h.update(JSON.stringify([t.name, t.columns, t.rows]));
    }
    expect(h.digest("hex")).toBe("268a43b00af3a216caaf6549efe209291985928e0fa9f157cf172599f6b34cb5");
  });

  it("keeps the schema, the gold SQL and a witness row per question, draws the other rows again, the same for the same seed", () => {
    for (const id of ["1-100-1", "1-200-1", "1-300-1"]) {
      const first = table(id);
      const before = JSON.stringify(first);
      const second = wikiSecondDraw(first, pools, "seed");
      expect(JSON.stringify(first)).toBe(before);
      expect(second.name).toBe(first.name);
      expect(second.columns).toEqual(first.columns);
      expect(second.questions).toEqual(first.questions);
      expect(second.rows).not.toEqual(first.rows);
      // most rows are new: only a few repeat by chance (the fixture's value pools are tiny)
      const seen = new Set(first.rows.map((r) => JSON.stringify(r)));
      expect(second.rows.filter((r) => seen.has(JSON.stringify(r))).length).toBeLessThan(second.rows.length / 2);
      const [db1, db2] = [wikiDatabase(first), wikiDatabase(second)];
      const checked = checkWikiTable(db2, second);
      expect(checked.dropped).toEqual({});
      expect(checked.items).toEqual(checkWikiTable(db1, first).items);
      for (const it of checked.items) expect(rows(db2, it.SQL).length).toBeGreaterThan(0);
      expect(Buffer.compare(db2.serialize(), wikiDatabase(wikiSecondDraw(first, pools, "seed")).serialize())).toBe(0);
      db1.close();
      db2.close();
    }
  });

  it("holds a near miss per question and condition column: its other conditions met, this one missed", () => {
    for (const id of ["1-100-1", "1-200-1", "1-300-1"]) {
      const second = wikiSecondDraw(table(id), pools, "seed");
      const db = wikiDatabase(second);
      for (const it of checkWikiTable(db, second).items) {
        const conds = it.SQL.split(" WHERE ")[1]!.split(" AND ");
        for (const column of new Set(conds.map((c) => c.split(" ")[0]!))) {
          const mine = conds.filter((c) => c.startsWith(`${column} `));
          const others = conds.filter((c) => !c.startsWith(`${column} `));
          const sql = `SELECT COUNT(*) FROM ${second.name} WHERE ${[...others, `NOT (${mine.join(" AND ")})`].join(" AND ")}`;
          expect(rows(db, sql)[0]![0], sql).toBeGreaterThan(0);
        }
      }
      db.close();
    }
  });

  it("tells a query right by luck on the first draw from a right one: a wrong column, a dropped condition, a wrong operator", () => {
    const check = (id: string, gold: string, lucky: string[]) => {
      const first = table(id);
      const [db1, db2] = [wikiDatabase(first), wikiDatabase(wikiSecondDraw(first, pools, "seed"))];
      expect(checkWikiTable(db1, first).items.map((i) => i.SQL)).toContain(gold);
      for (const sql of lucky) {
        expect(rows(db1, sql), sql).toEqual(rows(db1, gold));
        expect(rows(db2, sql), sql).not.toEqual(rows(db2, gold));
      }
      db1.close();
      db2.close();
    };
    // the wrong condition column happens to hold 'Sorority' on the first draw's matching row
    check("1-200-1", "SELECT MAX(chapters) FROM picks WHERE college_junior_club_team = 'Sorority' AND col_2nd > 10.5", [
      "SELECT MAX(chapters) FROM picks WHERE notes = 'Sorority' AND col_2nd > 10",
    ]);
    // the first draw's largest Fraternity row also has col_2nd > 3, so neither the condition nor its bound mattered there
    check("1-100-1", "SELECT MAX(chapters) FROM picks WHERE college_junior_club_team = 'Fraternity' AND col_2nd > 3", [
      "SELECT MAX(chapters) FROM picks WHERE college_junior_club_team = 'Fraternity'",
      "SELECT MAX(chapters) FROM picks WHERE college_junior_club_team = 'Fraternity' AND col_2nd >= 3",
    ]);
  });
});

describe("WikiSQL databases", () => {
  afterAll(() => closeDirectConnections());

  /** Each database's tables (name → CREATE statement), per split, of a build of the first 60 tables. */
  const build = (options: Parameters<typeof generateRealData>[1]) => {
    const out = mkdtempSync(join(tmpdir(), "reex-wikidbs-"));
    generateRealData(out, { seed: 1, sources: ["wikisql"], wikisqlTables: 60, traces: false, ...options });
    const splits = new Map<string, Map<string, { main: string; tables: Map<string, string> }>>();
    for (const split of ["train", "dev", "test"]) {
      const file = join(out, `wikisql_${split}.json`);
      if (!existsSync(file)) continue;
      const dbs = new Map<string, { main: string; tables: Map<string, string> }>();
      for (const q of JSON.parse(readFileSync(file, "utf8")) as { db_id: string; SQL: string }[]) {
        if (dbs.has(q.db_id)) continue;
        const db = new Database(realDbPath(out, q.db_id), { readonly: true });
        const rows = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all() as { name: string; sql: string }[];
        db.close();
        dbs.set(q.db_id, { main: / FROM (\w+)/.exec(q.SQL)![1]!, tables: new Map(rows.map((r) => [r.name, r.sql])) });
      }
      splits.set(split, dbs);
    }
    return splits;
  };

  it("put up to two other tables of the same split beside a table, none sharing a name", () => {
    const splits = build({});
    const counts = new Set<number>();
    for (const dbs of splits.values()) {
      const mains = new Set([...dbs.values()].map((d) => d.tables.get(d.main)!));
      for (const d of dbs.values()) {
        expect(d.tables.has(d.main)).toBe(true);
        expect(d.tables.size).toBeLessThanOrEqual(3);
        counts.add(d.tables.size);
        // every other table is another database's own table of the same split (no test table beside a train one)
        for (const sql of d.tables.values()) expect(mains.has(sql)).toBe(true);
      }
    }
    expect([...counts].sort()).toEqual([1, 2, 3]);
  }, 60_000);

  it("are version 1's one table named table_<id> with wikisqlNames ids and wikisqlOthers 0", () => {
    for (const dbs of build({ wikisqlNames: "ids", wikisqlOthers: 0 }).values())
      for (const [id, d] of dbs) expect([...d.tables.keys()]).toEqual([`table_${id.slice("wikisql_".length)}`]);
  }, 60_000);
});

describe("Advising's SQL rewritten to SQLite", () => {
  it("fills placeholders (bare numbers, quoted text, inside LIKE), single-quotes strings and lower-cases names", () => {
    const sql =
      'SELECT DISTINCT COURSEalias0.NAME , COURSEalias0.NUMBER FROM COURSE AS COURSEalias0 , PROGRAM_COURSE AS PROGRAM_COURSEalias0 WHERE COURSEalias0.DEPARTMENT = "department0" AND COURSEalias0.NUMBER = number0 AND PROGRAM_COURSEalias0.CATEGORY LIKE "%requirement0%" AND COURSEalias0.NAME LIKE "%topic0%" ;';
    expect(
      advisingSql(sql, { department0: "EECS", number0: "281", requirement0: "ULCS", topic0: "Rock 'n' Roll" }, new Set(["course", "program_course"])),
    ).toBe(
      "SELECT DISTINCT coursealias0.name, coursealias0.number FROM course AS coursealias0, program_course AS program_coursealias0 WHERE coursealias0.department = 'EECS' AND coursealias0.number = 281 AND program_coursealias0.category LIKE '%ULCS%' AND coursealias0.name LIKE '%Rock ''n'' Roll%'",
    );
  });
  it("counts distinct tuples as SQLite can: MySQL's COUNT(DISTINCT a, b, …) becomes one concatenated argument", () => {
    const sql = "SELECT COUNT( DISTINCT COURSEalias1.DEPARTMENT , COURSEalias0.NUMBER ) FROM COURSE AS COURSEalias0 , COURSE AS COURSEalias1 ;";
    expect(advisingSql(sql, {}, new Set(["course"]))).toBe(
      "SELECT COUNT(DISTINCT coursealias1.department || ' ' || coursealias0.number) FROM course AS coursealias0, course AS coursealias1",
    );
    expect(
      advisingSql(
        "SELECT COUNT( DISTINCT COURSEalias0.DEPARTMENT , COURSEalias0.NAME , COURSEalias0.NUMBER ) FROM COURSE AS COURSEalias0 ;",
        {},
        new Set(["course"]),
      ),
    ).toBe("SELECT COUNT(DISTINCT coursealias0.department || ' ' || coursealias0.name || ' ' || coursealias0.number) FROM course AS coursealias0");
  });
});

describe("Spider's schemas", () => {
  it("ship 164 databases and neither held-out one (geo, restaurants)", () => {
    const schemas = readSpiderSchemas(DATA);
    expect(schemas).toHaveLength(164);
    const ids = schemas.map((s) => s.dbId);
    expect(ids).not.toContain("geo");
    expect(ids).not.toContain("restaurants");
    expect(readFileSync(join(DATA, "spider-schema.csv"), "utf8")).not.toMatch(/^(geo|restaurants),/im);
  });

  it("get foreign keys from names: a column named like another table's single key references it", () => {
    const s = readSpiderSchemas(DATA).find((x) => x.dbId === "concert_singer")!;
    const fks = inferForeignKeys(s).map((f) => `${f.table}.${f.column}->${f.parent}`);
    expect(fks).toContain("concert.stadium_id->stadium");
    expect(fks).toContain("singer_in_concert.singer_id->singer");
  });
});

describe("template questions on a Spider schema", () => {
  it("are generated on a database whose tables have no numeric measure (the templates that need one are skipped)", () => {
    const schema = {
      dbId: "tiny",
      tables: new Map([
        [
          "person",
          [
            { name: "person_id", type: "number", pk: true },
            { name: "name", type: "text", pk: false },
            { name: "home_town", type: "text", pk: false },
            { name: "is_active", type: "boolean", pk: false },
          ],
        ],
      ]),
    };
    const { db } = spiderSynthDb(schema, "s");
    expect(db.tables[0]!.columns.map((c) => c.template.kind)).toEqual(["label", "city", "bool"]);
    const path = join(mkdtempSync(join(tmpdir(), "reex-spider-")), "tiny.sqlite");
    writeSynthDb(db, path);
    const qs = buildQuestions(db, path, "q", 12);
    expect(qs.length).toBeGreaterThan(3);
    for (const q of qs) expect(executeDirect(path, q.SQL).ok).toBe(true);
    closeDirectConnections();
  });

  it("keep a table's key distinct from a column named id that is not the key (swimming's record)", () => {
    const s = readSpiderSchemas(DATA).find((x) => x.dbId === "swimming")!;
    expect(s.tables.get("record")!.find((c) => c.pk)!.name).toBe("swimmer_id");
    const dir = mkdtempSync(join(tmpdir(), "reex-spider-"));
    try {
      for (let seed = 0; seed < 20; seed++) {
        const { db } = spiderSynthDb(s, `swim-${seed}`);
        const path = join(dir, `swimming-${seed}.sqlite`);
        writeSynthDb(db, path);
        const conn = new Database(path, { readonly: true });
        const rows = conn.prepare("SELECT swimmer_id, id FROM record").all() as { swimmer_id: number; id: number | null }[];
        conn.close();
        expect(new Set(rows.map((r) => r.swimmer_id)).size).toBe(rows.length);
        expect(rows.some((r) => r.id !== null)).toBe(true);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the shipped data", () => {
  it("is in the repository with its licences and attribution", () => {
    for (const f of [
      "wikisql.json.bz2",
      "wikisql-LICENSE.txt",
      "advising.json",
      "advising-schema.csv",
      "advising-LICENSE.txt",
      "spider-schema.csv",
      "spider-LICENSE.txt",
      "README.md",
    ]) {
      expect(existsSync(join(DATA, f)), f).toBe(true);
    }
    const readme = readFileSync(join(DATA, "README.md"), "utf8");
    for (const cite of ["Zhong", "Finegan-Dollak", "Yu", "2017", "2018"]) expect(readme).toContain(cite);
  });
});

/** A small data folder: the WikiSQL entries above, Advising's first entries and two Spider schemas. */
function smallDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "reex-realdata-src-"));
  writeFileSync(join(dir, "wikisql.json"), JSON.stringify(WIKI));
  execFileSync("bzip2", [join(dir, "wikisql.json")]);
  writeFileSync(join(dir, "advising.json"), JSON.stringify(readAdvisingEntries(DATA).slice(0, 12)));
  for (const f of ["advising-schema.csv"]) copyFileSync(join(DATA, f), join(dir, f));
  const lines = readFileSync(join(DATA, "spider-schema.csv"), "utf8").split("\n");
  writeFileSync(join(dir, "spider-schema.csv"), [lines[0], ...lines.filter((l) => /^(concert_singer|pets_1),/.test(l))].join("\n"));
  return dir;
}

describe("generateRealData", () => {
  let src: string;
  let out: string;
  let items: RealItem[];
  let manifest: ReturnType<typeof generateRealData>["manifest"];
  beforeAll(() => {
    src = smallDataDir();
    out = mkdtempSync(join(tmpdir(), "reex-realdata-"));
    ({ items, manifest } = generateRealData(out, { dataDir: src, seed: 3 }));
  }, 120_000);
  afterAll(() => closeDirectConnections());

  it("writes databases on which every kept question runs and returns rows, in split files", () => {
    expect(manifest.sources.wikisql).toMatchObject({
      questions: 5,
      kept: 4,
      dropped: { "unparsed-sql": 1 },
      databases: 3,
      splits: { train: 2, test: 1, dev: 1 },
    });
    expect(manifest.sources.advising!.kept).toBeGreaterThan(0);
    expect(manifest.sources.spider!.databases).toBe(2);
    expect(manifest.sources.spider!.kept).toBeGreaterThan(5);
    for (const [source, s] of Object.entries(manifest.sources)) {
      for (const [split, n] of Object.entries(s.splits)) {
        const file = JSON.parse(readFileSync(join(out, `${source}_${split}.json`), "utf8")) as { db_id: string; SQL: string; question_id: number }[];
        expect(file).toHaveLength(n);
        expect(file.map((q) => q.question_id)).toEqual(file.map((_, i) => i));
        for (const q of file) {
          const r = executeDirect(realDbPath(out, q.db_id), q.SQL);
          expect(r.ok && r.rows.length > 0, `${q.db_id}: ${q.SQL}`).toBe(true);
        }
      }
    }
  });

  it("writes each WikiSQL database's second row draw beside it (same schema, gold returns rows), which the eval loader finds", () => {
    expect(manifest.sources.wikisql!.secondDraw).toEqual({ databases: 3, failing: 0 });
    const schema = (path: string): unknown => {
      const db = new Database(path, { readonly: true });
      const out = db.prepare("SELECT type, name, sql FROM sqlite_master ORDER BY name").all();
      db.close();
      return out;
    };
    for (const split of ["train", "dev", "test"]) {
      const file = join(out, `wikisql_${split}.json`);
      const loaded = loadDataset(file, { dbRoot: join(out, "databases") }).items;
      expect(loaded.length).toBeGreaterThan(0);
      for (const it of loaded) {
        expect(it.dbPath2).toBe(realSecondDrawPath(out, it.dbId));
        expect(realSecondDrawPath(out, it.dbId)).toBe(join(out, "databases", it.dbId, `${it.dbId}.draw2.sqlite`));
        expect(schema(it.dbPath2!)).toEqual(schema(it.dbPath));
        const r = executeDirect(it.dbPath2!, it.goldSql);
        expect(r.ok && r.rows.length > 0, it.goldSql).toBe(true);
        expect(readFileSync(it.dbPath2!)).not.toEqual(readFileSync(it.dbPath));
      }
    }
    for (const it of items.filter((i) => i.source !== "wikisql")) expect(existsSync(realSecondDrawPath(out, it.db_id))).toBe(false);
    const advising = loadDataset(join(out, "advising_train.json"), { dbRoot: join(out, "databases") }).items;
    expect(advising.every((i) => i.dbPath2 === undefined)).toBe(true);
  });

  it("writes no second draw with wikisqlSecondDraw false, and the same first draw", () => {
    const plain = mkdtempSync(join(tmpdir(), "reex-realdata-one-draw-"));
    const built = generateRealData(plain, { dataDir: src, seed: 3, sources: ["wikisql"], wikisqlSecondDraw: false, traces: false });
    expect(built.manifest.sources.wikisql!.secondDraw).toBeUndefined();
    for (const it of built.items) {
      expect(existsSync(realSecondDrawPath(plain, it.db_id))).toBe(false);
      expect(readFileSync(realDbPath(plain, it.db_id))).toEqual(readFileSync(realDbPath(out, it.db_id)));
    }
  });

  it("keeps the Advising database's foreign keys consistent", () => {
    const db = new Database(realDbPath(out, "advising"), { readonly: true });
    expect(db.pragma("foreign_key_check")).toEqual([]);
    expect((db.prepare("SELECT COUNT(*) AS n FROM course").get() as { n: number }).n).toBeGreaterThan(100);
    db.close();
    for (const id of ["spider_concert_singer", "spider_pets_1"]) {
      const s = new Database(realDbPath(out, id), { readonly: true });
      expect(s.pragma("foreign_key_check")).toEqual([]);
      s.close();
    }
  });

  it("writes three well-formed traces per train item and none for dev or test items", () => {
    const lines = readFileSync(join(out, "train_sft.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { db_id: string; family: "execution-aware" | "standard" | "direct"; messages: { content: string }[]; response: string });
    const train = items.filter((i) => i.split === "train");
    expect(lines).toHaveLength(3 * train.length);
    expect(manifest.traces).toBe(lines.length);
    for (const l of lines) expect(formatCheck(l.response, l.family).ok).toBe(true);
    const trainQuestions = new Set(train.map((i) => i.question));
    const held = items.filter((i) => i.split !== "train" && !trainQuestions.has(i.question)).map((i) => i.question);
    expect(held.length).toBeGreaterThan(0);
    for (const l of lines) for (const q of held) expect(l.messages[1]!.content).not.toContain(q);
    const probe = lines.find((l) => l.db_id.startsWith("wikisql_") && l.family === "execution-aware")!;
    expect(probe.response).toMatch(/<intermediate_sql>[^]*<\/intermediate_sql><result>/);
  });

  it("gives the same files for the same seed", () => {
    const again = mkdtempSync(join(tmpdir(), "reex-realdata-"));
    const second = generateRealData(again, { dataDir: src, seed: 3 }).manifest;
    expect(second.files).toEqual(manifest.files);
    for (const it of items.slice(0, 5)) expect(readFileSync(realDbPath(again, it.db_id))).toEqual(readFileSync(realDbPath(out, it.db_id)));
    for (const it of items.filter((i) => i.source === "wikisql"))
      expect(readFileSync(realSecondDrawPath(again, it.db_id))).toEqual(readFileSync(realSecondDrawPath(out, it.db_id)));
  }, 120_000);

  it("refuses a data folder without the files, with a typed error", () => {
    const empty = mkdtempSync(join(tmpdir(), "reex-realdata-none-"));
    mkdirSync(join(empty, "x"), { recursive: true });
    expect(() => generateRealData(join(empty, "out"), { dataDir: empty, sources: ["advising"] })).toThrow(expect.objectContaining({ code: "DATASET_INVALID" }));
  });
});

import { createHash } from "node:crypto";
import { copyFileSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUESTIONS_FILE, buildExamples } from "../../src/examples/index.js";
import { BUILD_MARKER, EXAMPLE_DATABASES, exampleDbPath, type ExampleSet, PAGE_SIZE } from "../../src/examples/testing.js";

type Row = unknown[];

const sha = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
const canonical = (rows: Row[]) => rows.map((r) => JSON.stringify(r)).sort();

function query(path: string, sql: string, setup?: string): Row[] {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    if (setup) db.pragma(setup);
    return db.prepare(sql).raw().all() as Row[];
  } finally {
    db.close();
  }
}

let dirA: string;
let dirB: string;
let sets: ExampleSet[];

beforeAll(async () => {
  dirA = await mkdtemp(join(tmpdir(), "reex-examples-a-"));
  dirB = await mkdtemp(join(tmpdir(), "reex-examples-b-"));
  sets = await buildExamples(dirA);
});

afterAll(async () => {
  await rm(dirA, { recursive: true, force: true });
  await rm(dirB, { recursive: true, force: true });
});

describe("example databases", () => {
  it("writes the BIRD root layout and returns every database with its questions", async () => {
    expect(sets.map((s) => s.dbId)).toEqual(EXAMPLE_DATABASES.map((d) => d.dbId));
    expect(sets.length).toBeGreaterThanOrEqual(3);
    const all = JSON.parse(await readFile(join(dirA, QUESTIONS_FILE), "utf8")) as Record<string, unknown>[];
    expect(all).toEqual(sets.flatMap((s) => s.questions));
    expect(all.map((q) => q.question_id)).toEqual(all.map((_, i) => i));
    for (const q of all) {
      expect(Object.keys(q).sort()).toEqual(["SQL", "db_id", "difficulty", "evidence", "question", "question_id"]);
      expect(["simple", "moderate", "challenging"]).toContain(q.difficulty);
    }
    for (const set of sets) {
      expect(set.path).toBe(exampleDbPath(dirA, set.dbId));
      expect(set.path).toBe(join(dirA, "databases", set.dbId, `${set.dbId}.sqlite`));
      expect(set.questions.length).toBeGreaterThanOrEqual(10);
      expect(set.questions.length).toBeLessThanOrEqual(15);
      expect(new Set(set.questions.map((q) => q.difficulty)).size).toBe(3);
    }
  });

  it("has realistic tables: 100 to 2000 rows each, declared foreign keys that hold", () => {
    for (const set of sets) {
      const copy = join(dirA, `${set.dbId}.copy.sqlite`);
      copyFileSync(set.path, copy);
      const db = new Database(copy);
      try {
        expect(db.pragma("page_size", { simple: true })).toBe(PAGE_SIZE);
        expect(db.pragma("journal_mode", { simple: true })).toBe("delete");
        expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
        expect(db.pragma("foreign_key_check")).toEqual([]);
        const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((t) => t.name);
        expect(tables.length).toBeGreaterThanOrEqual(3);
        let foreignKeys = 0;
        for (const table of tables) {
          const { n } = db.prepare(`SELECT COUNT(*) AS n FROM "${table}"`).get() as { n: number };
          expect(n, `${set.dbId}.${table}`).toBeGreaterThanOrEqual(100);
          expect(n, `${set.dbId}.${table}`).toBeLessThanOrEqual(2000);
          foreignKeys += (db.pragma(`foreign_key_list("${table}")`) as unknown[]).length;
        }
        expect(foreignKeys).toBeGreaterThanOrEqual(2);
      } finally {
        db.close();
      }
    }
  });

  it("runs every gold SQL read-only with a non-empty, meaningful result", () => {
    for (const set of sets) {
      for (const q of set.questions) {
        const rows = query(set.path, q.SQL);
        expect(rows.length, q.question).toBeGreaterThan(0);
        const onlyRow = rows.length === 1 ? rows[0]! : undefined;
        if (onlyRow)
          expect(
            onlyRow.some((v) => v !== null && v !== 0),
            q.question,
          ).toBe(true);
      }
    }
  });

  it("has gold results that do not depend on scan order (no ties cut by LIMIT)", () => {
    for (const set of sets) {
      for (const q of set.questions) {
        const forward = query(set.path, q.SQL);
        const reversed = query(set.path, q.SQL, "reverse_unordered_selects = ON");
        expect(canonical(reversed), q.question).toEqual(canonical(forward));
      }
    }
  });

  it("has no ties at the cut of ORDER BY ... LIMIT", () => {
    const shape = /^SELECT (.+?) FROM (.+) ORDER BY (.+?)( DESC| ASC)? LIMIT (\d+)$/s;
    let checked = 0;
    for (const set of sets) {
      for (const q of set.questions) {
        const m = shape.exec(q.SQL);
        if (!m) continue;
        const [, , from, key, dir = "", limit] = m;
        const n = Number(limit);
        const keys = query(set.path, `SELECT ${key} FROM ${from} ORDER BY ${key}${dir} LIMIT ${n + 1}`).map((r) => r[0]);
        if (keys.length > n) expect(keys[n], q.question).not.toEqual(keys[n - 1]);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(8);
  });

  it("has value-encoding questions whose gold SQL needs the stored encoding", () => {
    for (const def of EXAMPLE_DATABASES) {
      const path = exampleDbPath(dirA, def.dbId);
      const withNaive = def.questions.filter((q) => q.naive);
      expect(withNaive.length, def.dbId).toBeGreaterThanOrEqual(4);
      for (const q of withNaive) {
        expect(canonical(query(path, q.naive!)), q.question).not.toEqual(canonical(query(path, q.SQL)));
      }
    }
    const retail = exampleDbPath(dirA, "retail");
    expect(query(retail, "SELECT COUNT(*) FROM orders WHERE ship_country = 'United Kingdom'")).toEqual([[0]]);
    expect(query(retail, "SELECT COUNT(*) FROM orders WHERE ship_country = 'GB' AND status = 'SHP'")[0]![0] as number).toBeGreaterThan(0);
  });

  it("builds the same bytes every time", async () => {
    await buildExamples(dirB, { force: true });
    for (const set of sets) expect(sha(exampleDbPath(dirB, set.dbId)), set.dbId).toBe(sha(set.path));
    expect(sha(join(dirB, QUESTIONS_FILE))).toBe(sha(join(dirA, QUESTIONS_FILE)));
    expect(readFileSync(join(dirB, BUILD_MARKER), "utf8")).toBe(readFileSync(join(dirA, BUILD_MARKER), "utf8"));
  });

  it("skips a build that is current and rebuilds a damaged one", async () => {
    const path = exampleDbPath(dirB, "retail");
    const before = statSync(path).mtimeMs;
    const digest = sha(path);
    await new Promise((r) => setTimeout(r, 20));
    await buildExamples(dirB);
    expect(statSync(path).mtimeMs).toBe(before);

    writeFileSync(path, "not a database");
    await buildExamples(dirB);
    expect(sha(path)).toBe(digest);
  });
});

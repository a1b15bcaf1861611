import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLE_DATABASES } from "../../../src/examples/testing.js";
import { exBird, executeDirect } from "../../../src/sql/index.js";
import { DEFAULT_DEV_DOMAINS, generateSynth, synthDbPath, type SynthResult } from "../../../lab/synth/index.js";
import { DOMAINS, SYNTH_FILES, formatDate, niceNumber, numberInWords, predicateOf, sqlString, type SynthItem } from "../../../lab/synth/testing.js";

const SEED = 7;
const DBS = 2 * DOMAINS.length; // every domain twice, so both dev domains appear

const dirs: string[] = [];
let dirA: string;
let dirB: string;
let a: SynthResult;
let b: SynthResult;

function hashes(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out[relative(root, path)] = createHash("sha256").update(readFileSync(path)).digest("hex");
    }
  };
  walk(root);
  return out;
}

beforeAll(async () => {
  dirA = await mkdtemp(join(tmpdir(), "reex-synth-a-"));
  dirB = await mkdtemp(join(tmpdir(), "reex-synth-b-"));
  dirs.push(dirA, dirB);
  a = generateSynth(dirA, { seed: SEED, dbs: DBS });
  b = generateSynth(dirB, { seed: SEED, dbs: DBS });
});

afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const all = (): SynthItem[] => [...a.train, ...a.dev];

describe("synthetic data: layout and determinism", () => {
  it("is byte-for-byte identical for the same seed", () => {
    const ha = hashes(dirA);
    const hb = hashes(dirB);
    expect(Object.keys(ha).length).toBe(DBS + 4);
    expect(ha).toEqual(hb);
    expect(a.manifest.files).toEqual(b.manifest.files);
  });

  it("differs for another seed, and database i does not depend on how many are built", async () => {
    const dirC = await mkdtemp(join(tmpdir(), "reex-synth-c-"));
    const dirD = await mkdtemp(join(tmpdir(), "reex-synth-d-"));
    dirs.push(dirC, dirD);
    const c = generateSynth(dirC, { seed: SEED + 1, dbs: 3, traces: false });
    const d = generateSynth(dirD, { seed: SEED, dbs: 3, traces: false });
    const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
    expect(sha(synthDbPath(dirC, c.databases[0]!.dbId))).not.toBe(sha(synthDbPath(dirA, a.databases[0]!.dbId)));
    for (let i = 0; i < 3; i++) {
      expect(sha(synthDbPath(dirD, d.databases[i]!.dbId))).toBe(sha(synthDbPath(dirA, a.databases[i]!.dbId)));
    }
  });

  it("writes the BIRD layout with exactly BIRD's fields", () => {
    for (const [file, items] of [
      [SYNTH_FILES.train, a.train],
      [SYNTH_FILES.dev, a.dev],
    ] as const) {
      const rows = JSON.parse(readFileSync(join(dirA, file), "utf8")) as Record<string, unknown>[];
      expect(rows.length).toBe(items.length);
      expect(rows.length).toBeGreaterThan(0);
      rows.forEach((q, i) => {
        expect(Object.keys(q)).toEqual(["question_id", "db_id", "question", "evidence", "SQL", "difficulty"]);
        expect(q.question_id).toBe(i);
        expect(["simple", "moderate", "challenging"]).toContain(q.difficulty);
        expect(q.SQL).toBe(items[i]!.SQL);
      });
    }
    for (const db of a.databases) {
      expect(db.path).toBe(join(dirA, "databases", db.dbId, `${db.dbId}.sqlite`));
      expect(db.questions).toBeGreaterThanOrEqual(10);
      expect(db.questions).toBeLessThanOrEqual(30);
    }
  });

  it("builds small relational databases: 2-3 tables, 10-200 rows, foreign keys that hold", () => {
    for (const info of a.databases) {
      const db = new Database(info.path, { readonly: true, fileMustExist: true });
      try {
        const tables = (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name);
        expect(tables.length).toBeGreaterThanOrEqual(2);
        expect(tables.length).toBeLessThanOrEqual(3);
        for (const t of tables) {
          const n = (db.prepare(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n;
          expect(n).toBeGreaterThanOrEqual(10);
          expect(n).toBeLessThanOrEqual(200);
        }
        const fks = tables.flatMap((t) => db.prepare(`SELECT * FROM pragma_foreign_key_list('${t}')`).all());
        const refs = DOMAINS.find((d) => d.name === info.domain)!
          .tables.flatMap((t) => t.columns)
          .filter((c) => c.kind === "ref").length;
        expect(fks.length).toBe(refs);
        expect(refs).toBeGreaterThanOrEqual(tables.length - 1);
        expect(db.pragma("foreign_key_check")).toEqual([]);
        // never the schema of an example (demo / eval) database
        for (const ex of EXAMPLE_DATABASES) {
          const exTables = [...ex.ddl.matchAll(/CREATE TABLE (\w+)/g)].map((m) => m[1]!.toLowerCase());
          expect(tables.filter((t) => exTables.includes(t.toLowerCase())).length, `${info.dbId} vs ${ex.dbId}`).toBeLessThanOrEqual(1);
        }
      } finally {
        db.close();
      }
    }
  });

  it("splits by database: dev holds the held-out domains, no db_id is in both splits", () => {
    const trainDbs = new Set(a.train.map((q) => q.db_id));
    const devDbs = new Set(a.dev.map((q) => q.db_id));
    expect([...trainDbs].filter((d) => devDbs.has(d))).toEqual([]);
    const domainOf = new Map(a.databases.map((d) => [d.dbId, d.domain]));
    for (const d of devDbs) expect(DEFAULT_DEV_DOMAINS).toContain(domainOf.get(d));
    for (const d of trainDbs) expect(DEFAULT_DEV_DOMAINS).not.toContain(domainOf.get(d));
    expect(new Set([...devDbs].map((d) => domainOf.get(d)))).toEqual(new Set(DEFAULT_DEV_DOMAINS));
    expect(a.manifest.domains.dev.sort()).toEqual([...DEFAULT_DEV_DOMAINS].sort());
  });

  it("with devEvery also holds out databases of the training domains, each with a schema no train database has", () => {
    const dir = mkdtempSync(join(tmpdir(), "reex-synth-every-"));
    try {
      const r = generateSynth(dir, { seed: SEED, dbs: 24, devEvery: 5, traces: false });
      const held = r.databases.filter((d) => d.split === "dev" && !d.heldOutDomain);
      expect(held.map((d) => d.dbId)).toEqual(
        r.databases.filter((_, i) => i % 5 === 4 && !DEFAULT_DEV_DOMAINS.includes(r.databases[i]!.domain)).map((d) => d.dbId),
      );
      expect(held.length).toBeGreaterThan(0);
      for (const d of held) expect(DEFAULT_DEV_DOMAINS).not.toContain(d.domain);
      const trainDbs = new Set(r.train.map((q) => q.db_id));
      for (const d of held) expect(trainDbs.has(d.dbId)).toBe(false);
      expect(new Set(r.dev.map((q) => q.db_id))).toEqual(new Set(r.databases.filter((d) => d.split === "dev").map((d) => d.dbId)));
      const trainSignatures = new Set(r.databases.filter((d) => d.split === "train").map((d) => d.signature));
      expect(r.manifest.devSchemasSeenInTrain).toBe(r.databases.filter((d) => d.split === "dev" && trainSignatures.has(d.signature)).length);
      expect(r.manifest.devEvery).toBe(5);
      expect(() => generateSynth(dir, { dbs: 2, devEvery: 1 })).toThrow(/devEvery/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("mixes difficulties in every split", () => {
    for (const items of [a.train, a.dev]) {
      const counts = { simple: 0, moderate: 0, challenging: 0 };
      for (const q of items) counts[q.difficulty]++;
      for (const v of Object.values(counts)) expect(v / items.length).toBeGreaterThan(0.15);
    }
  });
});

describe("synthetic data: questions", () => {
  it("every gold SQL runs and returns a non-empty, non-trivial result", () => {
    for (const q of all()) {
      const path = synthDbPath(dirA, q.db_id);
      const r = executeDirect(path, q.SQL);
      expect(r.ok, `${q.db_id}: ${q.SQL}`).toBe(true);
      if (!r.ok) continue;
      expect(r.rows.length, q.SQL).toBeGreaterThan(0);
      expect(r.rows.length === 1 && r.rows[0]!.every((v) => v === null || v === 0 || v === 0n), q.SQL).toBe(false);
    }
  });

  it("encoding questions need probing: the naive natural-value SQL gives a different result", () => {
    let flagged = 0;
    for (const q of all()) {
      const path = synthDbPath(dirA, q.db_id);
      const gold = executeDirect(path, q.SQL);
      const naive = executeDirect(path, q.naive);
      const same = gold.ok && naive.ok && exBird(naive.rows, gold.rows);
      expect(q.encoded, `${q.SQL} vs ${q.naive}`).toBe(!same);
      if (q.encoded) flagged++;
      // a value stored differently from how the question names it always changes the answer
      const hidden = q.lookups.filter(
        (l) =>
          (l.kind === "value" && l.literal !== sqlString(l.text)) || (l.kind === "flag" && l.encoding !== "10") || (l.kind === "date" && l.encoding !== "iso"),
      );
      if (hidden.length > 0) expect(q.encoded, `${q.question} | ${q.SQL}`).toBe(true);
    }
    expect(flagged / all().length).toBeGreaterThan(0.55);
  });

  it("names values as a person would while the data stores the encoding; hints point at columns, not values", () => {
    for (const q of all()) {
      for (const l of q.lookups) {
        if (l.kind === "value" || l.kind === "flag" || l.kind === "date")
          expect(q.evidence).toMatch(new RegExp(`refers to (${l.table}\\.|the \\w+'s )?${l.column}\\b`));
        if (l.kind === "value" && l.literal !== sqlString(l.text)) {
          expect(q.question.toLowerCase()).toContain(l.text.toLowerCase());
          expect(q.question).not.toContain(l.literal);
          expect(q.evidence).not.toContain(l.literal);
        }
      }
    }
  });

  it("writes hints the ways evidence is written: table.column, the row's column, the column alone, the column in a table", () => {
    const forms = { qualified: 0, possessive: 0, bare: 0, inTable: 0 };
    for (const q of all()) {
      for (const clause of q.evidence.split("; ")) {
        const where = clause.slice(clause.lastIndexOf(" refers to ") + 11);
        if (/^\w+\.\w+$/.test(where)) forms.qualified++;
        else if (/^the \w+'s \w+$/.test(where)) forms.possessive++;
        else if (/^\w+ in the \w+ table$/.test(where)) forms.inTable++;
        else if (/^\w+$/.test(where)) forms.bare++;
      }
    }
    const total = forms.qualified + forms.possessive + forms.bare + forms.inTable;
    expect(forms.qualified / total).toBeGreaterThan(0.3);
    for (const n of Object.values(forms)) expect(n / total).toBeGreaterThan(0.08);
  });

  it("asks as people do: the filter as a verb phrase or an adjective, small numbers in words", () => {
    const questions = all().map((q) => q.question);
    // "How many customers come from Germany?", not only "How many customers from Germany are there?"
    expect(questions.filter((q) => /^How many \w+ (come from|live in|were|are|have) [^?]*\?$/.test(q) && !q.endsWith("are there?")).length).toBeGreaterThan(20);
    const adjectival = all().filter(
      (q) => q.template === "count" && q.lookups.some((l) => l.attr === "category" && q.question.startsWith(`How many ${l.text} `)),
    );
    expect(adjectival.length).toBeGreaterThan(0);
    expect(
      questions.some((q) =>
        /\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve) (minutes|kilograms|dollars|pages|nights|units|credits|times)\b/.test(q),
      ),
    ).toBe(true);
  });

  it("converts a duration stored in seconds, minutes or milliseconds to the unit the question asks in", () => {
    const dir = mkdtempSync(join(tmpdir(), "reex-synth-units-"));
    dirs.push(dir);
    const r = generateSynth(dir, { seed: SEED, dbs: 36, lookalikes: 24, traces: false });
    const items = [...r.train, ...r.dev];
    // every duration template spans 1 to 721 minutes a row; a wrong divisor lands outside the band of the asked unit
    const band: Record<string, [number, number]> = { minutes: [1, 721], hours: [1 / 60, 721 / 60], seconds: [60, 721 * 60] };
    const asked = new Set<string>();
    let checked = 0;
    for (const item of items) {
      for (const l of item.lookups) {
        if (l.kind !== "unit" || l.attr !== "duration" || l.purpose !== "scale") continue;
        const unit = /\bin (minutes|hours|seconds)\b/.exec(item.question)?.[1];
        expect(unit, item.question).toBeDefined();
        asked.add(`${l.encoding}>${unit}`);
        expect(item.SQL).toContain(l.literal);
        const res = executeDirect(synthDbPath(dir, item.db_id), `SELECT MIN(${l.column})${l.literal}, MAX(${l.column})${l.literal} FROM ${l.table}`);
        if (!res.ok) throw new Error(res.error.message);
        const [lo, hi] = res.rows[0] as [number, number];
        const [min, max] = band[unit!]!;
        expect(lo, `${item.question} ${l.literal}`).toBeGreaterThanOrEqual(min);
        expect(hi, `${item.question} ${l.literal}`).toBeLessThan(max);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(10);
    for (const pair of ["ms>minutes", "ms>seconds", "seconds>hours", "seconds>minutes"]) expect([...asked], pair).toContain(pair);
    // thresholds in the stored unit: "longer than half an hour" is 1800 where seconds are stored, 1800000 in milliseconds
    const perMinute: Record<string, number> = { minutes: 1, seconds: 60, ms: 60000 };
    const thresholds = items.flatMap((q) => q.lookups.filter((l) => l.kind === "unit" && l.attr === "duration" && l.purpose === "threshold"));
    expect(thresholds.some((l) => l.encoding === "ms")).toBe(true);
    for (const l of thresholds) expect(Number(l.literal) / perMinute[l.encoding]!, l.text).toBe(Number.parseFloat(l.text));
    expect(items.some((q) => /\b(half an hour|an hour)\b/.test(q.question))).toBe(true);
    // "in the 1990s": every date the pattern matches lies in that decade, whatever the stored format
    const decades = items.filter((q) => q.lookups.some((l) => l.kind === "date" && /^the \d{3}0s$/.test(l.text)));
    expect(decades.length).toBeGreaterThan(0);
    for (const q of decades) {
      const l = q.lookups.find((x) => x.kind === "date" && /^the \d{3}0s$/.test(x.text))!;
      const res = executeDirect(synthDbPath(dir, q.db_id), `SELECT ${l.column} FROM ${l.table} WHERE ${l.column} LIKE ${l.literal}`);
      if (!res.ok) throw new Error(res.error.message);
      expect(res.rows.length).toBeGreaterThan(0);
      for (const [d] of res.rows) expect(String(d), `${l.text} ${l.literal}`).toMatch(new RegExp(l.text.slice(4, 7)));
    }
    expect(items.some((q) => /, in (dollars|minutes|hours|seconds|kilograms),/.test(q.question))).toBe(true);
  });

  it("asks for the first few rows by a measure, as many as the question says", () => {
    const words = ["two", "three", "four", "five"];
    const top = all().filter((q) => q.template === "top_list");
    expect(top.length).toBeGreaterThan(0);
    for (const q of top) {
      const n = Number(/LIMIT (\d)$/.exec(q.SQL)![1]);
      expect(q.question).toContain(` ${words[n - 2]} `);
      const res = executeDirect(synthDbPath(dirA, q.db_id), q.SQL);
      expect(res.ok && res.rows.length).toBe(n);
    }
  });

  it("uses the templates' SQL shapes: joins, GROUP BY, HAVING, nesting, ORDER BY LIMIT", () => {
    const sqls = all().map((q) => q.SQL);
    for (const re of [/INNER JOIN/, /GROUP BY/, /HAVING COUNT/, /\(SELECT/, /ORDER BY .* LIMIT 1/, /CAST\(SUM\(CASE WHEN/]) {
      expect(
        sqls.some((s) => re.test(s)),
        String(re),
      ).toBe(true);
    }
  });
});

describe("synthetic data: helpers", () => {
  it("writes dates in every format", () => {
    expect(formatDate("2021-03-04", "iso")).toBe("2021-03-04");
    expect(formatDate("2021-03-04", "dmy")).toBe("04/03/2021");
    expect(formatDate("2021-03-04", "mdy")).toBe("03/04/2021");
    expect(formatDate("2021-03-04", "compact")).toBe("20210304");
    expect(formatDate("2021-03-04", "slash")).toBe("2021/03/04");
  });

  it("turns a filter phrase into the predicate of a question", () => {
    expect(predicateOf("who joined in 2020")).toBe("joined in 2020");
    expect(predicateOf("that were not paid")).toBe("were not paid");
    expect(predicateOf("from France")).toBe("come from France");
    expect(predicateOf("living in Paris")).toBe("live in Paris");
    expect(predicateOf("lasting more than 4 minutes")).toBe("last more than 4 minutes");
    expect(predicateOf("with blood type O-")).toBe("have blood type O-");
    expect(predicateOf("made in March 2021")).toBe("were made in March 2021");
    expect(predicateOf("placed in 2023")).toBe("were placed in 2023");
    expect(predicateOf("formed before 1990")).toBe("were formed before 1990");
    expect(predicateOf("in the Jazz genre")).toBe("are in the Jazz genre");
    expect(predicateOf("of type repair")).toBe("are of type repair");
  });

  it("writes small whole numbers in words", () => {
    expect(numberInWords(4)).toBe("four");
    expect(numberInWords(12)).toBe("twelve");
    expect(numberInWords(1)).toBe("1");
    expect(numberInWords(13)).toBe("13");
    expect(numberInWords(2.5)).toBe("2.5");
  });

  it("rounds thresholds to numbers a person would say", () => {
    expect(niceNumber(23.7, false)).toBe(25);
    expect(niceNumber(4.3, false)).toBe(4);
    expect(niceNumber(740, false)).toBe(750);
    expect(niceNumber(0.34, false)).toBe(0.3);
    expect(niceNumber(0.4, true)).toBe(1);
  });

  it("builds 200 databases well under a minute", async () => {
    const dir = await mkdtemp(join(tmpdir(), "reex-synth-speed-"));
    dirs.push(dir);
    const started = performance.now();
    const r = generateSynth(dir, { seed: 3, dbs: 200 });
    const seconds = (performance.now() - started) / 1000;
    expect(r.databases.length).toBe(200);
    expect(r.train.length + r.dev.length).toBeGreaterThan(2000);
    expect(seconds).toBeLessThan(45);
    // every encoding of every kind shows up in questions of a full-size build
    const encodings = new Set([...r.train, ...r.dev].flatMap((q) => q.lookups.map((l) => `${l.attr}:${l.encoding}`)));
    const expected = {
      country: ["iso2", "iso3", "upper", "lower", "plain"],
      city: ["code", "upper", "lower", "plain"],
      category: ["code", "letter", "upper", "title", "plain"],
      bool: ["YN", "10", "yesno", "TF", "truefalse"],
      money: ["cents", "dollars"],
      weight: ["grams", "kg"],
      duration: ["seconds", "minutes"],
      date: ["iso", "dmy", "mdy", "compact", "slash"],
    };
    for (const [kind, encs] of Object.entries(expected)) for (const e of encs) expect(encodings, `${kind}:${e}`).toContain(`${kind}:${e}`);
  }, 120_000);
});

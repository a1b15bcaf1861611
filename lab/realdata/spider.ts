/**
 * Spider's schemas made executable: each database's tables and columns under their real names
 * (lower case), foreign keys inferred by name, rows drawn per column kind (names, countries,
 * cities, dates, years, counts, yes/no flags, short categories), and questions from the synthetic
 * generator's templates (lab/synth): real names, synthetic questions. Seeded.
 */
import { rmSync } from "node:fs";
import Database from "better-sqlite3";
import { Rng } from "../../src/examples/index.js";
import {
  CITIES,
  COUNTRIES,
  buildQuestions,
  generateRows,
  writeSynthDb,
  type ColumnInst,
  type ColumnTemplate,
  type Encoding,
  type SynthDb,
  type SynthQuestion,
  type TableInst,
  type TableTemplate,
} from "../synth/index.js";
import { readSchemaCsv } from "./source.js";
import { sqlName } from "./wikisql.js";

/** Spider databases that are held out for the team's own evaluation and never built (they are not in the shipped file either). */
export const SPIDER_HELD_OUT: readonly string[] = ["geo", "restaurants"];

/** One Spider column as the schema file gives it, its name lower-cased (a keyword or leading digit gets `col_`, a table `table_`). */
export interface SpiderColumn {
  name: string;
  type: string;
  pk: boolean;
}

/** One Spider database's schema: table → columns, in file order. */
export interface SpiderSchema {
  dbId: string;
  tables: Map<string, SpiderColumn[]>;
}

/** Reads `spider-schema.csv` into one schema per database, in file order; held-out databases are refused. */
export function readSpiderSchemas(dataDir: string): SpiderSchema[] {
  const out = new Map<string, SpiderSchema>();
  for (const [db, table, column, pk, , type] of readSchemaCsv(dataDir, "spider-schema.csv")) {
    if (!db || !table || !column || /^sqlite_/i.test(table)) continue; // SQLite's own bookkeeping tables, listed by the dump
    const id = db.toLowerCase();
    if (SPIDER_HELD_OUT.includes(id)) throw new Error(`spider-schema.csv holds the held-out database ${id}`);
    let s = out.get(id);
    if (!s) out.set(id, (s = { dbId: id, tables: new Map() }));
    const t = sqlName(table, "table_");
    const cols = s.tables.get(t) ?? [];
    const name = sqlName(column, "col_");
    if (!cols.some((c) => c.name === name)) cols.push({ name, type: (type ?? "text").toLowerCase(), pk: pk === "True" });
    s.tables.set(t, cols);
  }
  return [...out.values()];
}

/** Foreign keys inferred by name: a column named like another table's single primary key (a name no third table uses as its key) references it. */
export function inferForeignKeys(schema: SpiderSchema): { table: string; column: string; parent: string; parentColumn: string }[] {
  const pkOwners = new Map<string, string[]>();
  for (const [t, cols] of schema.tables) {
    const pks = cols.filter((c) => c.pk);
    if (pks.length === 1) pkOwners.set(pks[0]!.name, [...(pkOwners.get(pks[0]!.name) ?? []), t]);
  }
  const out: { table: string; column: string; parent: string; parentColumn: string }[] = [];
  for (const [t, cols] of schema.tables) {
    for (const c of cols) {
      const owners = (pkOwners.get(c.name) ?? []).filter((o) => o !== t);
      if (owners.length === 1 && c.name !== "id") out.push({ table: t, column: c.name, parent: owners[0]!, parentColumn: c.name });
    }
  }
  return out;
}

const PERSON =
  /(people|person|singer|student|employee|member|artist|player|customer|staff|teacher|actor|author|driver|pilot|host|manager|director|editor|journalist|musician|owner|instructor|professor|physician|patient|doctor|user|candidate|representative|conductor|architect|gymnast|wrestler|climber|technician|mechanic|captain|coach|people|club_leader|participant|guest|visitor|faculty|entrepreneur|investor|perpetrator|ship_captain|head)/;

function words(name: string): string {
  return name.replace(/_/g, " ").trim();
}

function plural(noun: string): string {
  if (/(s|x|ch|sh)$/.test(noun)) return `${noun}es`.replace(/ses$/, "ses");
  if (/[^aeiou]y$/.test(noun)) return `${noun.slice(0, -1)}ies`;
  return `${noun}s`;
}

const CATEGORY_WORDS = [
  "alpha",
  "beta",
  "gamma",
  "delta",
  "north",
  "south",
  "east",
  "west",
  "gold",
  "silver",
  "bronze",
  "red",
  "blue",
  "green",
  "major",
  "minor",
  "senior",
  "junior",
  "classic",
  "modern",
];
const ENC: Record<string, Record<string, number>> = {
  country: { iso2: 25, iso3: 15, upper: 15, lower: 15, plain: 30 },
  city: { code: 20, upper: 20, lower: 20, plain: 40 },
  category: { code: 30, upper: 20, title: 20, plain: 30 },
  bool: { YN: 30, "10": 30, yesno: 15, TF: 10, truefalse: 15 },
  date: { iso: 40, dmy: 20, mdy: 20, compact: 10, slash: 10 },
};

/** The column template a Spider column gets from its name and type (`year` → a year, `country` → a country, a `name` → a label…). */
function templateOf(rng: Rng, table: string, col: SpiderColumn, labelTaken: boolean, ref: string | undefined): ColumnTemplate {
  const noun = words(col.name);
  const base = { key: col.name, names: [col.name] };
  if (ref) return { ...base, kind: "ref", table: ref, via: "of" };
  if (col.type === "boolean" || col.type === "others" || /^(is|has)_/.test(col.name)) {
    const w = noun.replace(/^(is|has) /, "");
    return { ...base, kind: "bool", word: w, yes: `that are ${w}`, no: `that are not ${w}`, rate: 0.3 + rng.next() * 0.4 };
  }
  if (col.type === "time" || /date|_time$|^time$/.test(col.name))
    return { ...base, kind: "date", from: "1995-01-01", to: "2020-12-31", phrase: `with ${noun} in {v}` };
  if (col.type === "number") {
    const [min, max] = /year/.test(col.name)
      ? [1950, 2020]
      : /age/.test(col.name)
        ? [18, 80]
        : /(rank|position|grade|level|rating)/.test(col.name)
          ? [1, 20]
          : /(price|cost|budget|salary|amount|money|revenue|sales|income|profit|fee)/.test(col.name)
            ? [10, 90000]
            : /(height|weight)/.test(col.name)
              ? [50, 220]
              : [1, 1000];
    return { ...base, kind: "int", noun, min, max, phrase: `with ${noun} {cmp} {n}`, cmp: ["above", "below"] };
  }
  if (/country|nationality|nation/.test(col.name)) return { ...base, kind: "country", phrase: `with ${noun} {v}` };
  if (/city|location|hometown|home_town|town|place/.test(col.name)) return { ...base, kind: "city", phrase: `with ${noun} {v}` };
  if (!labelTaken && /(name|title)$/.test(col.name)) {
    return { ...base, kind: "label", pool: PERSON.test(table) ? "person" : col.name.includes("title") ? "title" : "company", nouns: plural(noun) };
  }
  const values = rng.sample(CATEGORY_WORDS, rng.int(3, 6)).map((w) => ({ word: w, code: w.slice(0, 3).toUpperCase() }));
  return { ...base, kind: "category", values, phrase: `with ${noun} {v}`, noun };
}

function sqlTypeOf(t: ColumnTemplate, enc: Encoding): ColumnInst["sqlType"] {
  if (t.kind === "ref" || t.kind === "int") return "INTEGER";
  if (t.kind === "bool") return enc === "10" ? "INTEGER" : "TEXT";
  return "TEXT";
}

/**
 * The synthetic-generator view of a Spider schema: tables with one numeric primary key, parents
 * before children (a reference that would close a cycle is kept as a plain number). Tables without
 * one (composite or text keys) are left to {@link spiderDatabase} and get no template questions.
 */
export function spiderSynthDb(schema: SpiderSchema, seed: string): { db: SynthDb; others: string[] } {
  const rng = new Rng(seed);
  const fks = inferForeignKeys(schema);
  const keyed = [...schema.tables].filter(([, cols]) => cols.filter((c) => c.pk).length === 1 && cols.find((c) => c.pk)!.type === "number").map(([t]) => t);
  const order: string[] = [];
  const visiting = new Set<string>();
  const visit = (t: string): void => {
    if (order.includes(t) || visiting.has(t)) return;
    visiting.add(t);
    for (const f of fks) if (f.table === t && keyed.includes(f.parent)) visit(f.parent);
    visiting.delete(t);
    order.push(t);
  };
  for (const t of keyed) visit(t);
  const tables: TableInst[] = [];
  for (const t of order) {
    const cols = schema.tables.get(t)!;
    const pk = cols.find((c) => c.pk)!;
    let labelTaken = false;
    const columns: ColumnInst[] = [];
    for (const c of cols) {
      if (c.pk) continue;
      const fk = fks.find((f) => f.table === t && f.column === c.name && keyed.includes(f.parent) && order.indexOf(f.parent) < order.indexOf(t));
      const tpl = templateOf(rng, t, c, labelTaken, fk?.parent);
      if (tpl.kind === "label") labelTaken = true;
      const weights = ENC[tpl.kind];
      const encoding = (weights ? rng.weighted(weights) : "none") as Encoding;
      const inst: ColumnInst = { key: c.name, name: c.name, template: tpl, encoding, sqlType: sqlTypeOf(tpl, encoding) };
      if (tpl.kind === "country") inst.choices = rng.sample(COUNTRIES, rng.int(4, 7)).map((x) => ({ value: x.name, weight: rng.int(1, 9) }));
      if (tpl.kind === "city") inst.choices = rng.sample(CITIES, rng.int(4, 7)).map((x) => ({ value: x.name, weight: rng.int(1, 9) }));
      if (tpl.kind === "category") inst.choices = tpl.values.map((v) => ({ value: v.word, weight: rng.int(1, 9) }));
      columns.push(inst);
    }
    const noun = words(t);
    const template: TableTemplate = { key: t, names: [[t, t]], singular: noun, plural: plural(noun), rows: [12, 40], columns: columns.map((c) => c.template) };
    tables.push({ key: t, name: t, singular: noun, plural: plural(noun), pk: pk.name, refName: t, columns, template });
  }
  const shape = { dbId: `spider_${schema.dbId}`, domain: `spider:${schema.dbId}`, style: "snake" as const, tables };
  return { db: { ...shape, rows: generateRows(rng, shape) }, others: [...schema.tables.keys()].filter((t) => !order.includes(t)) };
}

/** Adds the tables the generator does not model (composite or text keys), rows drawn per column, references pointing at existing rows. */
function addOtherTables(path: string, schema: SpiderSchema, others: string[], rng: Rng): void {
  const fks = inferForeignKeys(schema);
  const conn = new Database(path);
  try {
    conn.pragma("synchronous = OFF");
    conn.pragma("foreign_keys = OFF");
    const idsOf = (table: string, column: string): (string | number)[] => {
      try {
        return (conn.prepare(`SELECT ${column} FROM ${table}`).raw(true).all() as (string | number)[][]).map((r) => r[0]!);
      } catch {
        return [];
      }
    };
    for (const t of others) {
      const cols = schema.tables.get(t)!;
      const pks = cols.filter((c) => c.pk).map((c) => c.name);
      const defs = cols.map((c) => `${c.name} ${c.type === "number" ? "INTEGER" : "TEXT"}`);
      if (pks.length) defs.push(`PRIMARY KEY (${pks.join(", ")})`);
      for (const f of fks.filter((f) => f.table === t)) defs.push(`FOREIGN KEY (${f.column}) REFERENCES ${f.parent} (${f.parentColumn})`);
      conn.exec(`CREATE TABLE ${t} (\n  ${defs.join(",\n  ")}\n)`);
    }
    const sorted: string[] = [];
    const visit = (t: string, seen: Set<string>): void => {
      if (sorted.includes(t) || seen.has(t)) return;
      seen.add(t);
      for (const f of fks) if (f.table === t && others.includes(f.parent)) visit(f.parent, seen);
      sorted.push(t);
    };
    for (const t of others) visit(t, new Set());
    conn.transaction(() => {
      for (const t of sorted) {
        const cols = schema.tables.get(t)!;
        const insert = conn.prepare(`INSERT OR IGNORE INTO ${t} VALUES (${cols.map(() => "?").join(", ")})`);
        const n = rng.int(10, 30);
        for (let i = 1; i <= n; i++) {
          insert.run(
            ...cols.map((c) => {
              const f = fks.find((x) => x.table === t && x.column === c.name);
              const ids = f ? idsOf(f.parent, f.parentColumn) : [];
              if (ids.length) return rng.pick(ids);
              if (c.pk && c.type !== "number") return `${words(c.name)} ${i}`;
              if (c.type === "number") return c.pk ? i : rng.int(1, 100);
              return `${words(c.name)} ${rng.pick(["A", "B", "C", "D"])}`;
            }),
          );
        }
      }
    })();
    // a reference drawn before its parent table had rows, or into a column that is not unique: drop the row
    for (let pass = 0; pass < 4; pass++) {
      const broken = conn.pragma("foreign_key_check") as { table: string; rowid: number | null }[];
      if (broken.length === 0) break;
      for (const b of broken) if (b.rowid !== null) conn.prepare(`DELETE FROM ${b.table} WHERE rowid = ?`).run(b.rowid);
    }
    const left = conn.pragma("foreign_key_check") as unknown[];
    if (left.length > 0) throw new Error(`${schema.dbId}: ${left.length} rows break a foreign key`);
  } finally {
    conn.close();
  }
}

/** A Spider question from the templates, with the split its database belongs to. */
export interface SpiderItem extends SynthQuestion {
  split: "train" | "dev";
  question_id: number;
  source: "spider";
}

/** Every `devEvery`-th Spider database (in file order) is held out as dev. */
export const SPIDER_DEV_EVERY = 8;

/** Builds the first `limit` Spider databases and their template questions; `pathOf` gives the path to write each file at (its folder made). */
export function buildSpider(
  dataDir: string,
  seed: number,
  limit: number | undefined,
  pathOf: (dbId: string) => string,
): {
  items: SpiderItem[];
  stats: { questions: number; kept: number; dropped: Record<string, number>; databases: number; splits: Record<string, number>; seconds: number };
} {
  const schemas = readSpiderSchemas(dataDir).slice(0, limit);
  const items: SpiderItem[] = [];
  const dropped: Record<string, number> = {};
  let built = 0;
  schemas.forEach((schema, i) => {
    const base = `reex-real:${seed}:spider:${schema.dbId}`;
    const { db, others } = spiderSynthDb(schema, base);
    const path = pathOf(db.dbId);
    rmSync(path, { force: true });
    writeSynthDb(db, path);
    addOtherTables(path, schema, others, new Rng(`${base}:others`));
    built++;
    if (db.tables.length === 0) {
      dropped["no-keyed-table"] = (dropped["no-keyed-table"] ?? 0) + 1;
      return;
    }
    const split = i % SPIDER_DEV_EVERY === SPIDER_DEV_EVERY - 1 ? "dev" : "train";
    for (const q of buildQuestions(db, path, `${base}:q`, new Rng(`${base}:n`).int(10, 20))) items.push({ ...q, split, question_id: 0, source: "spider" });
  });
  return { items, stats: { questions: items.length, kept: items.length, dropped, databases: built, splits: {}, seconds: 0 } };
}

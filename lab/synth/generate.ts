/**
 * One synthetic database from a domain template: naming variations, value encodings, rows drawn
 * from a seeded PRNG, and the SQLite file. Rows are kept in their natural form (country names,
 * booleans, cents, grams, seconds, milliseconds, ISO dates) so that question templates can reason about them;
 * {@link storedValue} turns a natural value into what the file stores under a column's encoding.
 */
import Database from "better-sqlite3";
import { Rng } from "../../src/examples/index.js";
import {
  CITIES,
  COUNTRIES,
  FIRST_NAMES,
  LAST_NAMES,
  TITLE_ADJECTIVES,
  TITLE_NOUNS,
  type City,
  type ColumnTemplate,
  type Country,
  type DomainTemplate,
  type LabelPool,
  type TableTemplate,
} from "./domains.js";

/** How a column's values are stored. */
export type Encoding =
  // country / city / category
  | "plain"
  | "iso2"
  | "iso3"
  | "code"
  | "letter"
  | "upper"
  | "lower"
  | "title"
  // bool
  | "YN"
  | "10"
  | "yesno"
  | "TF"
  | "truefalse"
  // measures
  | "cents"
  | "dollars"
  | "grams"
  | "kg"
  | "seconds"
  | "minutes"
  | "ms"
  // dates
  | "iso"
  | "dmy"
  | "mdy"
  | "compact"
  | "slash"
  // labels, refs, plain counts
  | "none";

/** A natural value: label text, country / city name, category word, boolean, cents, grams, seconds, count, ISO date or parent id. */
export type NatValue = string | number | boolean | null;

/** One row in natural form, keyed by column key; its primary key under {@link ROW_KEY}. */
export type NatRow = Record<string, NatValue>;

/** Where a {@link NatRow} keeps its primary key: not a SQL name, so no column key (a Spider column named `id`) can overwrite it. */
const ROW_KEY = "#key";

/** A column as instantiated in one database. */
export interface ColumnInst {
  key: string;
  /** The column's name in this database. */
  name: string;
  template: ColumnTemplate;
  encoding: Encoding;
  /** Declared SQLite type. */
  sqlType: "INTEGER" | "REAL" | "TEXT";
  /** Natural values this database draws from (countries, cities, category words), with weights. */
  choices?: { value: string; weight: number }[];
}

/** A table as instantiated in one database. */
export interface TableInst {
  key: string;
  name: string;
  singular: string;
  plural: string;
  /** Primary key column name. */
  pk: string;
  /** The singular used for foreign-key names pointing here (`<ref>_id`). */
  refName: string;
  /** Non-key columns in declaration order (references included). */
  columns: ColumnInst[];
  template: TableTemplate;
}

/** A generated database: its schema choices and rows. */
export interface SynthDb {
  dbId: string;
  domain: string;
  /** Naming style of identifiers. */
  style: "snake" | "camel";
  tables: TableInst[];
  /** Natural rows per table key, parents first. */
  rows: Record<string, NatRow[]>;
}

/** SQLite page size of every synthetic file. */
export const SYNTH_PAGE_SIZE = 4096;

const ENCODINGS: Record<string, Readonly<Record<string, number>>> = {
  country: { iso2: 35, iso3: 20, upper: 15, lower: 15, plain: 15 },
  city: { code: 30, upper: 25, lower: 25, plain: 20 },
  category: { code: 40, letter: 10, upper: 15, title: 15, plain: 20 },
  bool: { YN: 30, "10": 25, yesno: 15, TF: 15, truefalse: 15 },
  money: { cents: 60, dollars: 40 },
  weight: { grams: 55, kg: 45 },
  duration: { seconds: 40, minutes: 35, ms: 25 },
  date: { iso: 30, dmy: 25, mdy: 20, compact: 10, slash: 15 },
};

function styled(name: string, style: SynthDb["style"]): string {
  if (style === "snake") return name;
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

const titleCase = (s: string): string => s.replace(/\b([a-z])/g, (c) => c.toUpperCase());

function pickEncoding(rng: Rng, col: ColumnTemplate): Encoding {
  const table = col.kind === "int" || col.kind === "label" || col.kind === "ref" ? undefined : ENCODINGS[col.kind];
  if (!table) return "none";
  let enc = rng.weighted(table) as Encoding;
  if (enc === "letter" && col.kind === "category") {
    const initials = new Set(col.values.map((v) => v.word[0]!.toLowerCase()));
    if (initials.size !== col.values.length) enc = "code";
  }
  return enc;
}

function sqlTypeOf(col: ColumnTemplate, enc: Encoding): ColumnInst["sqlType"] {
  switch (col.kind) {
    case "ref":
    case "int":
      return "INTEGER";
    case "bool":
      return enc === "10" ? "INTEGER" : "TEXT";
    case "money":
    case "weight":
    case "duration":
      return enc === "dollars" || enc === "kg" ? "REAL" : "INTEGER";
    default:
      return "TEXT";
  }
}

function weightsFor(rng: Rng, values: string[]): { value: string; weight: number }[] {
  return values.map((value) => ({ value, weight: 1 + Math.floor(rng.next() * 9) }));
}

/** The five singular table names of the domains that SQLite will not take bare (no keyword fallback); such a table takes its plural. Not the whole keyword list (src/sql SQLITE_KEYWORDS): "release" is a keyword SQLite takes as a name, and the seeded databases keep it. */
const SQL_KEYWORDS = new Set(["order", "group", "table", "index", "select"]);

/** Chooses names, encodings and value sets for one database of a domain. */
export function instantiate(rng: Rng, domain: DomainTemplate, dbId: string): Omit<SynthDb, "rows"> {
  const style: SynthDb["style"] = rng.chance(0.25) ? "camel" : "snake";
  const tables: TableInst[] = [];
  const byKey = new Map<string, TableInst>();
  for (const t of domain.tables) {
    const [plural, singular] = rng.pick(t.names);
    const name = styled(rng.chance(0.7) || SQL_KEYWORDS.has(singular) ? plural : singular, style);
    const pk = rng.chance(0.4) ? "id" : styled(`${singular}_id`, style);
    const used = new Set<string>([pk.toLowerCase()]);
    const labelCols = t.columns.filter((c) => c.kind === "label" || c.kind === "ref");
    const other = rng.shuffle(t.columns.filter((c) => c.kind !== "label" && c.kind !== "ref" && !(c.optional && rng.chance(0.25))));
    const columns: ColumnInst[] = [];
    for (const col of [...labelCols, ...other]) {
      let base: string;
      if (col.kind === "ref") {
        const parent = byKey.get(col.table);
        if (!parent) throw new Error(`${domain.name}.${t.key}: reference to unknown or later table ${col.table}`);
        base = styled(`${parent.refName}_id`, style);
      } else {
        base = styled(rng.pick(col.names), style);
      }
      let cname = base;
      for (let k = 2; used.has(cname.toLowerCase()); k++) cname = `${base}${k}`;
      used.add(cname.toLowerCase());
      const encoding = pickEncoding(rng, col);
      const inst: ColumnInst = { key: col.key, name: cname, template: col, encoding, sqlType: sqlTypeOf(col, encoding) };
      if (col.kind === "country")
        inst.choices = weightsFor(
          rng,
          rng.sample(COUNTRIES, rng.int(5, 8)).map((c) => c.name),
        );
      if (col.kind === "city")
        inst.choices = weightsFor(
          rng,
          rng.sample(CITIES, rng.int(5, 8)).map((c) => c.name),
        );
      if (col.kind === "category") {
        const n = Math.max(3, rng.int(col.values.length - 2, col.values.length));
        inst.choices = weightsFor(
          rng,
          rng.sample(col.values, Math.min(n, col.values.length)).map((v) => v.word),
        );
      }
      columns.push(inst);
    }
    const inst: TableInst = { key: t.key, name, singular: t.singular, plural: t.plural, pk, refName: singular, columns, template: t };
    tables.push(inst);
    byKey.set(t.key, inst);
  }
  return { dbId, domain: domain.name, style, tables };
}

function weightedChoice(rng: Rng, choices: { value: string; weight: number }[]): string {
  const total = choices.reduce((s, c) => s + c.weight, 0);
  let r = rng.next() * total;
  for (const c of choices) {
    r -= c.weight;
    if (r < 0) return c.value;
  }
  return choices[choices.length - 1]!.value;
}

const FLIGHT_PREFIX = ["BA", "LH", "AF", "IB", "KL", "SK", "AZ", "TP"];
const COURSE_SUBJECTS = [
  "Algebra",
  "Mechanics",
  "Genetics",
  "Ancient Rome",
  "Painting",
  "Harmony",
  "Statistics",
  "Optics",
  "Ecology",
  "Sculpture",
  "Geometry",
  "Chemistry",
];
const COMPANY_SUFFIX = ["Supply", "Trading", "Goods", "Works", "Partners"];
const PRODUCT_ITEMS = ["Lamp", "Chair", "Kettle", "Hammer", "Rake", "Shelf", "Drill", "Vase", "Teapot", "Bench"];
const SESSION_TIMES = ["Morning", "Lunch", "Evening", "Weekend", "Early"];
const SESSION_WORDS = ["Flow", "Burn", "Power", "Stretch", "Core", "Cardio", "Balance", "Strength", "Spirit", "Energy"];
const ANIMAL_NAMES = [
  "Leo",
  "Kira",
  "Bruno",
  "Nala",
  "Max",
  "Luna",
  "Oscar",
  "Zara",
  "Rex",
  "Mila",
  "Simba",
  "Coco",
  "Bella",
  "Tiko",
  "Juno",
  "Rocky",
  "Pip",
  "Nemo",
  "Ziggy",
  "Olive",
  "Boris",
  "Daisy",
  "Kofi",
  "Suki",
  "Hugo",
  "Polly",
  "Ringo",
  "Toby",
  "Indi",
  "Yara",
];
const DISH_ADJ = ["Lemon", "Spicy", "Garlic", "Smoked", "Roast", "Honey", "Green", "Wild"];
const DISH_FOOD = ["Tart", "Noodles", "Soup", "Salad", "Chicken", "Risotto", "Curry", "Pie", "Burger", "Tacos"];
const LETTERS = "ABCDEFGHJKLMNPRSTVWXYZ";

function labelValue(rng: Rng, pool: LabelPool): string {
  switch (pool) {
    case "person":
      return `${rng.pick(FIRST_NAMES)} ${rng.pick(LAST_NAMES)}`;
    case "title":
      return `${rng.pick(TITLE_ADJECTIVES)} ${rng.pick(TITLE_NOUNS)}`;
    case "flight":
      return `${rng.pick(FLIGHT_PREFIX)}${rng.int(100, 999)}`;
    case "course":
      return `${rng.pick(COURSE_SUBJECTS)} ${rng.pick(["101", "201", "301", "401"])}`;
    case "company":
      return `${rng.pick(TITLE_NOUNS)} ${rng.pick(COMPANY_SUFFIX)}`;
    case "product":
      return `${rng.pick(TITLE_ADJECTIVES)} ${rng.pick(PRODUCT_ITEMS)}`;
    case "room":
      return `${rng.int(1, 6)}${String(rng.int(1, 20)).padStart(2, "0")}`;
    case "session":
      return `${rng.pick(SESSION_TIMES)} ${rng.pick(SESSION_WORDS)}`;
    case "animal":
      return rng.pick(ANIMAL_NAMES);
    case "plate":
      return `${rng.pick([...LETTERS])}${rng.pick([...LETTERS])}${rng.int(10, 99)} ${rng.pick([...LETTERS])}${rng.pick([...LETTERS])}${rng.pick([...LETTERS])}`;
    case "dish":
      return `${rng.pick(DISH_ADJ)} ${rng.pick(DISH_FOOD)}`;
  }
}

/** A random value in [min, max] skewed towards the low end (prices, weights, durations). */
function skewed(rng: Rng, min: number, max: number): number {
  return min + (max - min) * rng.next() ** 1.7;
}

function naturalValue(rng: Rng, col: ColumnInst, used: Set<string>): NatValue {
  const t = col.template;
  switch (t.kind) {
    case "label": {
      let v = labelValue(rng, t.pool);
      for (let i = 0; i < 30 && used.has(v); i++) v = labelValue(rng, t.pool);
      for (let k = 2; used.has(v); k++) v = `${labelValue(rng, t.pool)} ${k}`;
      used.add(v);
      return v;
    }
    case "country":
    case "city":
    case "category":
      return weightedChoice(rng, col.choices!);
    case "bool":
      return rng.chance(t.rate);
    case "money": {
      const dollars = skewed(rng, t.min, t.max);
      const cents = dollars >= 100 ? Math.round(dollars) * 100 : Math.round((dollars * 100) / 5) * 5;
      return Math.max(5, cents);
    }
    case "weight": {
      const kg = skewed(rng, t.min, t.max);
      const grams = kg >= 50 ? Math.round(kg) * 1000 : Math.round(kg * 100) * 10;
      return Math.max(10, grams);
    }
    case "duration": {
      const minutes = Math.round(skewed(rng, t.min, t.max));
      return Math.max(1, minutes) * 60 + rng.int(0, 59);
    }
    case "int":
      return rng.int(t.min, t.max);
    case "date":
      return rng.date(t.from, t.to);
    case "ref":
      return null; // filled by the caller
  }
}

/** Draws every table's rows (natural form). Parents come first; a child's references skew towards a subset of parents. */
export function generateRows(rng: Rng, db: Omit<SynthDb, "rows">): Record<string, NatRow[]> {
  const rows: Record<string, NatRow[]> = {};
  for (const t of db.tables) {
    const n = rng.int(t.template.rows[0], t.template.rows[1]);
    const refs = new Map<string, number[]>();
    for (const c of t.columns) {
      if (c.template.kind !== "ref") continue;
      const parent = rows[c.template.table]!;
      const active = rng.shuffle(parent.map((r) => r[ROW_KEY] as number)).slice(0, Math.max(1, Math.round(parent.length * (0.75 + 0.2 * rng.next()))));
      refs.set(c.key, active);
    }
    const usedLabels = new Set<string>();
    const out: NatRow[] = [];
    for (let id = 1; id <= n; id++) {
      const row: NatRow = { [ROW_KEY]: id };
      for (const c of t.columns) {
        if (c.template.kind === "ref") {
          const active = refs.get(c.key)!;
          row[c.key] = active[Math.floor(rng.next() ** 1.4 * active.length)]!;
        } else {
          row[c.key] = naturalValue(rng, c, usedLabels);
        }
      }
      out.push(row);
    }
    rows[t.key] = out;
  }
  return rows;
}

function countryOf(name: string): Country {
  return COUNTRIES.find((c) => c.name === name)!;
}

function cityOf(name: string): City {
  return CITIES.find((c) => c.name === name)!;
}

const pad2 = (n: string | number): string => String(n).padStart(2, "0");

/** Writes an ISO 'YYYY-MM-DD' date in a date encoding. */
export function formatDate(iso: string, enc: Encoding): string {
  const [y, m, d] = iso.split("-") as [string, string, string];
  switch (enc) {
    case "dmy":
      return `${pad2(d)}/${pad2(m)}/${y}`;
    case "mdy":
      return `${pad2(m)}/${pad2(d)}/${y}`;
    case "compact":
      return `${y}${m}${d}`;
    case "slash":
      return `${y}/${m}/${d}`;
    default:
      return iso;
  }
}

/** The stored form of a natural value under a column's encoding. */
export function storedValue(col: ColumnInst, value: NatValue): string | number | null {
  if (value === null) return null;
  const t = col.template;
  switch (t.kind) {
    case "country": {
      const c = countryOf(String(value));
      return { iso2: c.iso2, iso3: c.iso3, upper: c.name.toUpperCase(), lower: c.name.toLowerCase() }[col.encoding as string] ?? c.name;
    }
    case "city": {
      const c = cityOf(String(value));
      return { code: c.code, upper: c.name.toUpperCase(), lower: c.name.toLowerCase() }[col.encoding as string] ?? c.name;
    }
    case "category": {
      const v = t.values.find((x) => x.word === value)!;
      switch (col.encoding) {
        case "code":
          return v.code;
        case "letter":
          return v.word[0]!.toUpperCase();
        case "upper":
          return v.word.toUpperCase();
        case "title":
          return titleCase(v.word);
        default:
          return v.word;
      }
    }
    case "bool": {
      const [yes, no] = boolPair(col.encoding);
      return value ? yes : no;
    }
    case "money":
      return col.encoding === "dollars" ? Number(value) / 100 : Number(value);
    case "weight":
      return col.encoding === "kg" ? Number(value) / 1000 : Number(value);
    case "duration":
      if (col.encoding === "minutes") return Math.floor(Number(value) / 60);
      // milliseconds with a deterministic sub-second part, as a media library stores them
      return col.encoding === "ms" ? Number(value) * 1000 + ((Number(value) * 379) % 1000) : Number(value);
    case "date":
      return formatDate(String(value), col.encoding);
    default:
      return typeof value === "boolean" ? (value ? 1 : 0) : value;
  }
}

/** The stored [true, false] pair of a boolean encoding. */
export function boolPair(enc: Encoding): [string | number, string | number] {
  switch (enc) {
    case "YN":
      return ["Y", "N"];
    case "yesno":
      return ["yes", "no"];
    case "TF":
      return ["T", "F"];
    case "truefalse":
      return ["true", "false"];
    default:
      return [1, 0];
  }
}

/** The CREATE TABLE statements of a database, parents first. */
export function ddlOf(db: Pick<SynthDb, "tables">): string {
  const byKey = new Map(db.tables.map((t) => [t.key, t]));
  return db.tables
    .map((t) => {
      const lines = [`  ${t.pk} INTEGER PRIMARY KEY`];
      const fks: string[] = [];
      for (const c of t.columns) {
        lines.push(`  ${c.name} ${c.sqlType}`);
        if (c.template.kind === "ref") {
          const parent = byKey.get(c.template.table)!;
          fks.push(`  FOREIGN KEY (${c.name}) REFERENCES ${parent.name} (${parent.pk})`);
        }
      }
      return `CREATE TABLE ${t.name} (\n${[...lines, ...fks].join(",\n")}\n);`;
    })
    .join("\n");
}

/** Writes a database file at `path` (which must not exist): DDL, rows in stored form, foreign-key check, VACUUM. */
export function writeSynthDb(db: SynthDb, path: string): void {
  const conn = new Database(path);
  try {
    conn.pragma(`page_size = ${SYNTH_PAGE_SIZE}`);
    conn.pragma("journal_mode = DELETE");
    conn.pragma("synchronous = OFF"); // a fresh file that is rebuilt on failure: no fsyncs (same bytes, much faster)
    conn.pragma("foreign_keys = ON");
    conn.exec(ddlOf(db));
    conn.transaction(() => {
      for (const t of db.tables) {
        const cols = [t.pk, ...t.columns.map((c) => c.name)];
        const insert = conn.prepare(`INSERT INTO ${t.name} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`);
        for (const row of db.rows[t.key]!) {
          insert.run(row[ROW_KEY] as number, ...t.columns.map((c) => storedValue(c, row[c.key] ?? null)));
        }
      }
    })();
    const violations = conn.pragma("foreign_key_check") as unknown[];
    if (violations.length > 0) throw new Error(`${db.dbId}: ${violations.length} foreign key violations`);
    conn.exec("VACUUM");
  } finally {
    conn.close();
  }
}

/** Builds one database in memory (schema choices and rows) from its own seed string. */
export function generateDatabase(domain: DomainTemplate, dbId: string, seed: string, options: { renameShare?: number; exactNames?: boolean } = {}): SynthDb {
  const rng = new Rng(seed);
  const shape = instantiate(rng, domain, dbId);
  const db = { ...shape, rows: generateRows(rng, shape) };
  if (options.exactNames) useFirstNames(db);
  const share = options.renameShare ?? 0;
  if (share > 0) renameIdentifiers(db, new Rng(`${seed}:rename`), share);
  return db;
}

/**
 * Names every table, key and column by its template's first variant, snake_case, plural tables
 * and `<singular>_id` keys: for look-alike domains, the example database's own names. Rows and
 * encodings are untouched (they were drawn before and do not depend on names).
 */
function useFirstNames(db: SynthDb): void {
  db.style = "snake";
  const byKey = new Map(db.tables.map((t) => [t.key, t]));
  for (const t of db.tables) {
    const [plural, singular] = t.template.names[0]!;
    t.name = plural;
    t.refName = singular;
    t.pk = `${singular}_id`;
  }
  for (const t of db.tables) {
    for (const c of t.columns) {
      c.name = c.template.kind === "ref" ? `${byKey.get(c.template.table)!.refName}_id` : c.template.names[0]!;
    }
  }
}

const PREFIX_LETTERS = "bcdfghjkmnpqrstvwxz";

/**
 * Gives a share of a database's table names and non-key column names a random two- or three-letter
 * prefix (`qk_country`), so that a model trained on it cannot recall identifiers from other
 * databases and has to copy them from the schema. Draws from its own PRNG: the rest of the database
 * is the same with or without it.
 */
function renameIdentifiers(db: SynthDb, rng: Rng, share: number): void {
  const prefix = (): string => `${Array.from({ length: rng.int(2, 3) }, () => rng.pick([...PREFIX_LETTERS])).join("")}_`;
  const tables = new Set(db.tables.map((t) => t.name.toLowerCase()));
  for (const t of db.tables) {
    if (rng.chance(share)) {
      const name = `${prefix()}${t.name}`;
      if (!tables.has(name.toLowerCase())) {
        tables.add(name.toLowerCase());
        t.name = name;
      }
    }
    const used = new Set([t.pk.toLowerCase(), ...t.columns.map((c) => c.name.toLowerCase())]);
    for (const c of t.columns) {
      if (c.template.kind === "ref" || !rng.chance(share)) continue;
      const name = `${prefix()}${c.name}`;
      if (used.has(name.toLowerCase())) continue;
      used.add(name.toLowerCase());
      c.name = name;
    }
  }
}

/**
 * Question templates over a generated database. A question names values the way a person would
 * ("from France", "made in March 2021", "above 20 dollars") while the gold SQL uses what the file
 * stores ('FR', '%/03/2021', 2000); the hint points at the column, never at the stored value.
 * Every candidate is executed: the gold SQL must run and return a non-trivial result (and a unique
 * top row for ORDER BY … LIMIT 1), and the "naive" SQL — the same query written with the natural
 * values and units — is run to record whether the question really needs probing.
 */
import { Rng, type Difficulty } from "../../src/examples/index.js";
import { exBird, executeDirect, type ExecResult, type SqlValue } from "../../src/sql/index.js";
import { COUNTRIES, type ColumnTemplate, type MeasureColumn } from "./domains.js";
import { storedValue, type ColumnInst, type Encoding, type SynthDb, type TableInst } from "./generate.js";

/** The question templates, by difficulty: simple (single-table filter), moderate (join, aggregate, group), challenging (nesting, ORDER BY LIMIT, HAVING, ratios, 3-table joins). */
export type TemplateKind =
  | "count"
  | "list"
  | "count2"
  | "agg"
  | "join_count"
  | "join_list"
  | "join_agg"
  | "group_count"
  | "top_measure"
  | "top_list"
  | "top_parent"
  | "having"
  | "above_avg"
  | "percent"
  | "not_in"
  | "join3_count";

export const TEMPLATE_DIFFICULTY: Readonly<Record<TemplateKind, Difficulty>> = {
  count: "simple",
  list: "simple",
  count2: "moderate",
  agg: "moderate",
  join_count: "moderate",
  join_list: "moderate",
  join_agg: "moderate",
  group_count: "moderate",
  top_measure: "challenging",
  top_list: "moderate",
  top_parent: "challenging",
  having: "challenging",
  above_avg: "challenging",
  percent: "challenging",
  not_in: "challenging",
  join3_count: "challenging",
};

const TEMPLATE_WEIGHTS: Readonly<Record<TemplateKind, number>> = {
  count: 18,
  list: 14,
  count2: 8,
  agg: 10,
  join_count: 9,
  join_list: 8,
  join_agg: 5,
  group_count: 5,
  top_measure: 5,
  top_list: 5,
  top_parent: 5,
  having: 4,
  above_avg: 4,
  percent: 4,
  not_in: 4,
  join3_count: 3,
};

/**
 * Something the question names that the model has to look up in the data: a value's stored form
 * (`value`), a yes/no flag's stored form (`flag`), a unit (`unit`: a threshold or an aggregate's
 * conversion) or a date format (`date`).
 */
export interface Lookup {
  kind: "value" | "flag" | "unit" | "date";
  table: string;
  column: string;
  /** The column template's kind (country, city, category, bool, money, weight, duration, date). */
  attr: ColumnTemplate["kind"];
  encoding: Encoding;
  /** What the question says: "France", "returned", "20 dollars", "March 2021"; for a conversion, the measure noun. */
  text: string;
  /** What the gold SQL uses: "'FR'", "'Y'", "2000", "'%/03/2021'"; for a conversion, " / 100.0" or "". */
  literal: string;
  /** flag: the question asks for the true side. */
  positive?: boolean;
  /** date: the question names a month (day/month order matters). */
  month?: boolean;
  /** unit: "threshold" (a comparison) or "scale" (an aggregate converted to the asked unit). */
  purpose?: "threshold" | "scale";
  /** unit: the unit the question asks in, where it is not the kind's usual one ("hours", "seconds"). */
  asked?: string;
}

/** A generated question before ids are assigned. */
export interface SynthQuestion {
  db_id: string;
  question: string;
  evidence: string;
  SQL: string;
  difficulty: Difficulty;
  template: TemplateKind;
  /** The same query written with the values and units as the question states them. */
  naive: string;
  /** The naive SQL's result differs from the gold result (the question needs probing). */
  encoded: boolean;
  /** What has to be looked up, in question order. */
  lookups: Lookup[];
  /** Tables the gold SQL reads, by their names in the database. */
  tables: string[];
  /** A short plan in words: "count loans by members from France". */
  goal: string;
}

/** A filter condition as a question states it and as the gold and naive SQL write it. */
interface Cond {
  table: TableInst;
  col: ColumnInst;
  /** After the noun: "from France", "that were returned". */
  phrase: string;
  /** Before the noun, where the filter reads as an adjective: "Electronic", "returned". */
  pre?: string;
  hint: string;
  gold: (q: string) => string;
  naive: (q: string) => string;
  lookup?: Lookup;
}

/** A measured column aggregated in the asked unit. */
interface Measure {
  table: TableInst;
  col: ColumnInst;
  template: MeasureColumn;
  noun: string;
  /** " in dollars" / " in kilograms" / " in minutes" / "". */
  unitText: string;
  /** " / 100.0" etc. when the stored unit differs from the asked one. */
  scale: string;
  hint: string;
  lookup?: Lookup;
}

interface Candidate {
  template: TemplateKind;
  question: string;
  goal: string;
  conds: Cond[];
  measure?: Measure;
  SQL: string;
  naive: string;
  tables: string[];
  /** SQL whose first two rows must differ (the ORDER BY … LIMIT 1 key), when a single top row is asked for. */
  tieCheck?: string;
  /** Most rows the gold may return. Default 30. */
  maxRows?: number;
  /** The gold's single value must lie strictly between 0 and 100 (percentages). */
  percent?: boolean;
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/** A SQL string literal. */
export function sqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

function sqlLiteral(v: string | number | null): string {
  if (v === null) return "NULL";
  return typeof v === "number" ? String(v) : sqlString(v);
}

const fill = (template: string, vars: Record<string, string>): string => template.replace(/\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);

function singularNoun(nouns: string): string {
  return nouns.endsWith("s") ? nouns.slice(0, -1) : nouns;
}

/**
 * A hint's column in one of the ways people write evidence (BIRD's and the examples'): `t.c` (40%),
 * `the <t's singular>'s c` (25%), `c` alone (20%), `c in the t table` (15%). Drawn from its own
 * generator, so the rest of the data is the same whatever is drawn here.
 */
function phraseHints(hints: readonly string[], rng: Rng): string[] {
  return hints.map((hint) => {
    const m = / refers to ([^\s.]+)\.([^\s.]+)$/.exec(hint);
    if (!m) return hint;
    const [, table, column] = m as unknown as [string, string, string];
    const r = rng.next();
    const where = r < 0.4 ? `${table}.${column}` : r < 0.65 ? `the ${singularNoun(table)}'s ${column}` : r < 0.85 ? column : `${column} in the ${table} table`;
    return `${hint.slice(0, m.index)} refers to ${where}`;
  });
}

const ING_VERBS: Readonly<Record<string, string>> = {
  living: "live",
  lasting: "last",
  weighing: "weigh",
  taking: "take",
  departing: "depart",
  running: "run",
};
const IRREGULAR_PARTICIPLES = new Set(["made", "born", "done", "sent", "held", "paid", "run", "shipped", "served", "formed"]);

/**
 * A filter phrase as the predicate of "How many {plural} …?", the way people ask:
 * "who joined in 2020" → "joined in 2020", "living in Paris" → "live in Paris", "from France" →
 * "come from France", "with a price above 5 dollars" → "have a price above 5 dollars", "made in 2021" →
 * "were made in 2021", "in the Jazz genre" → "are in the Jazz genre".
 */
export function predicateOf(phrase: string): string {
  const [first = "", ...rest] = phrase.split(" ");
  const tail = rest.join(" ");
  if (first === "who" || first === "that") return tail;
  if (first === "from") return `come from ${tail}`;
  if (first === "with") return `have ${tail}`;
  const verb = ING_VERBS[first];
  if (verb) return `${verb} ${tail}`;
  if (first.endsWith("ed") || IRREGULAR_PARTICIPLES.has(first)) return `were ${phrase}`;
  return `are ${phrase}`;
}

const NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];

/** A whole number from 2 to 12 in words ("four"), else in digits. */
export function numberInWords(n: number): string {
  return Number.isInteger(n) && n >= 2 && n <= 12 ? NUMBER_WORDS[n]! : String(n);
}

/** A round number near `v` for a question ("25 dollars", "4.5 kilograms", "90 minutes"). */
export function niceNumber(v: number, integer: boolean): number {
  if (!(v > 0)) return integer ? 1 : 0.1;
  const mag = 10 ** Math.floor(Math.log10(v));
  let step = mag >= 10 ? mag / 2 : mag;
  if (integer) step = Math.max(1, step);
  const n = Number((Math.round(v / step) * step).toFixed(2));
  return n > 0 ? n : Number(step.toFixed(2));
}

/** A natural measure value in the unit questions use. */
function askedUnit(kind: MeasureColumn["kind"], natural: number): number {
  switch (kind) {
    case "money":
      return natural / 100;
    case "weight":
      return natural / 1000;
    case "duration":
      return natural / 60;
    default:
      return natural;
  }
}

/** A threshold in the asked unit, as the column stores it. */
function storedThreshold(col: ColumnInst, n: number): number {
  switch (col.encoding) {
    case "cents":
      return Math.round(n * 100);
    case "grams":
      return Math.round(n * 1000);
    case "seconds":
      return Math.round(n * 60);
    case "ms":
      return Math.round(n * 60000);
    default:
      return n;
  }
}

const UNIT_WORD: Record<string, string> = { money: "dollars", weight: "kilograms", duration: "minutes" };
const SCALE: Partial<Record<Encoding, string>> = { cents: " / 100.0", grams: " / 1000.0", seconds: " / 60.0", ms: " / 60000.0" };

/** Other units a duration aggregate is asked in, by stored encoding: [unit, the gold's conversion]. */
const DURATION_UNITS: Partial<Record<Encoding, { sum: readonly [string, string]; other?: readonly [string, string] }>> = {
  seconds: { sum: ["hours", " / 3600.0"] },
  minutes: { sum: ["hours", " / 60.0"] },
  ms: { sum: ["hours", " / 3600000.0"], other: ["seconds", " / 1000.0"] },
};

/** A duration threshold in minutes as people say it ("half an hour"), or undefined. */
function spokenMinutes(n: number): string | undefined {
  return n === 30 ? "half an hour" : n === 60 ? "an hour" : n === 90 ? "an hour and a half" : n === 120 ? "two hours" : undefined;
}

/** A LIKE pattern for a year, a month of a year, or a decade (`year` of three digits, "199"). */
function datePattern(enc: Encoding, year: string, month?: string): string {
  if (year.length === 3) return enc === "dmy" || enc === "mdy" ? `%/${year}_` : `${year}%`;
  switch (enc) {
    case "dmy":
      return month ? `%/${month}/${year}` : `%/${year}`;
    case "mdy":
      return month ? `${month}/%/${year}` : `%/${year}`;
    case "compact":
      return month ? `${year}${month}%` : `${year}%`;
    case "slash":
      return month ? `${year}/${month}/%` : `${year}/%`;
    default:
      return month ? `${year}-${month}-%` : `${year}-%`;
  }
}

const FILTERABLE = new Set<ColumnTemplate["kind"]>(["country", "city", "category", "bool", "money", "weight", "duration", "int", "date"]);
const MEASURES = new Set<ColumnTemplate["kind"]>(["money", "weight", "duration", "int"]);

/** Builds questions for one database; needs the written file to execute candidates. */
export class QuestionBuilder {
  private readonly byKey: Map<string, TableInst>;

  constructor(
    private readonly db: SynthDb,
    private readonly dbPath: string,
    private readonly rng: Rng,
  ) {
    this.byKey = new Map(db.tables.map((t) => [t.key, t]));
  }

  private rows(t: TableInst) {
    return this.db.rows[t.key]!;
  }

  private label(t: TableInst): ColumnInst | undefined {
    return t.columns.find((c) => c.template.kind === "label");
  }

  private filterable(t: TableInst): ColumnInst[] {
    return t.columns.filter((c) => FILTERABLE.has(c.template.kind));
  }

  private measures(t: TableInst): ColumnInst[] {
    return t.columns.filter((c) => MEASURES.has(c.template.kind));
  }

  /** Every (child, parent, reference column) link. */
  private links(): { child: TableInst; parent: TableInst; fk: ColumnInst }[] {
    const out: { child: TableInst; parent: TableInst; fk: ColumnInst }[] = [];
    for (const t of this.db.tables) {
      for (const c of t.columns) if (c.template.kind === "ref") out.push({ child: t, parent: this.byKey.get(c.template.table)!, fk: c });
    }
    return out;
  }

  /** A filter on one column with a value drawn from the table's rows. */
  private cond(t: TableInst, col: ColumnInst): Cond | null {
    const rng = this.rng;
    const rows = this.rows(t);
    const where = `${t.name}.${col.name}`;
    const tpl = col.template;
    const row = rng.pick(rows);
    const value = row[col.key];
    if (value === null || value === undefined) return null;
    switch (tpl.kind) {
      case "country":
      case "city":
      case "category": {
        const natural = String(value);
        const display = tpl.kind === "country" ? COUNTRIES.find((c) => c.name === natural)!.text : natural;
        const hintName = natural;
        const stored = sqlLiteral(storedValue(col, value));
        return {
          table: t,
          col,
          phrase: fill(tpl.phrase, { v: display }),
          ...(tpl.kind === "category" ? { pre: display } : {}),
          hint: `${hintName} refers to ${where}`,
          gold: (q) => `${q}${col.name} = ${stored}`,
          naive: (q) => `${q}${col.name} = ${sqlString(natural)}`,
          lookup: { kind: "value", table: t.name, column: col.name, attr: tpl.kind, encoding: col.encoding, text: hintName, literal: stored },
        };
      }
      case "bool": {
        const positive = rng.chance(0.7);
        const stored = sqlLiteral(storedValue(col, positive));
        return {
          table: t,
          col,
          phrase: positive ? tpl.yes : tpl.no,
          ...(positive ? { pre: tpl.word } : {}),
          hint: `${tpl.word} refers to ${where}`,
          gold: (q) => `${q}${col.name} = ${stored}`,
          naive: (q) => `${q}${col.name} = ${positive ? 1 : 0}`,
          lookup: { kind: "flag", table: t.name, column: col.name, attr: "bool", encoding: col.encoding, text: tpl.word, literal: stored, positive },
        };
      }
      case "money":
      case "weight":
      case "duration":
      case "int": {
        const values = rows.map((r) => askedUnit(tpl.kind, Number(r[col.key]))).sort((a, b) => a - b);
        const v = values[Math.floor(values.length * (0.25 + 0.5 * rng.next()))]!;
        const n = niceNumber(v, tpl.kind === "int" || tpl.kind === "duration");
        const greater = rng.chance(0.65);
        const op = greater ? ">" : "<";
        const stored = storedThreshold(col, n);
        const unit = UNIT_WORD[tpl.kind];
        const lookup: Lookup | undefined =
          tpl.kind === "int"
            ? undefined
            : {
                kind: "unit",
                table: t.name,
                column: col.name,
                attr: tpl.kind,
                encoding: col.encoding,
                text: `${n} ${unit}`,
                literal: String(stored),
                purpose: "threshold",
              };
        const spoken = tpl.kind === "duration" ? spokenMinutes(n) : undefined;
        const phrase = spoken && rng.chance(0.6) ? tpl.phrase.replace("{n} minutes", spoken) : tpl.phrase;
        return {
          table: t,
          col,
          phrase: fill(phrase, { n: rng.chance(0.4) ? numberInWords(n) : String(n), cmp: greater ? tpl.cmp[0] : tpl.cmp[1] }),
          hint: `${tpl.noun} refers to ${where}`,
          gold: (q) => `${q}${col.name} ${op} ${stored}`,
          naive: (q) => `${q}${col.name} ${op} ${n}`,
          ...(lookup ? { lookup } : {}),
        };
      }
      case "date": {
        const iso = String(value);
        const [year, month] = iso.split("-") as [string, string];
        const byMonth = rng.chance(0.3);
        if (byMonth && col.encoding === "dmy" && !rows.some((r) => Number(String(r[col.key]).slice(8, 10)) > 12)) return null;
        // "in the 1990s" where the dates span decades
        const span = rows.map((r) => String(r[col.key]).slice(0, 3));
        const byDecade = !byMonth && new Set(span).size > 1 && rng.chance(0.2);
        const text = byMonth ? `${MONTHS[Number(month) - 1]} ${year}` : byDecade ? `the ${year.slice(0, 3)}0s` : year;
        const pattern = sqlString(datePattern(col.encoding, byDecade ? year.slice(0, 3) : year, byMonth ? month : undefined));
        return {
          table: t,
          col,
          phrase: fill(tpl.phrase, { v: text }),
          hint: `${text} refers to ${where}`,
          gold: (q) => `${q}${col.name} LIKE ${pattern}`,
          naive: (q) =>
            byMonth
              ? `STRFTIME('%Y-%m', ${q}${col.name}) = '${year}-${month}'`
              : byDecade
                ? `STRFTIME('%Y', ${q}${col.name}) BETWEEN '${year.slice(0, 3)}0' AND '${year.slice(0, 3)}9'`
                : `STRFTIME('%Y', ${q}${col.name}) = '${year}'`,
          lookup: { kind: "date", table: t.name, column: col.name, attr: "date", encoding: col.encoding, text, literal: pattern, month: byMonth },
        };
      }
      default:
        return null;
    }
  }

  private randomCond(t: TableInst, except?: ColumnInst): Cond | null {
    const cols = this.filterable(t).filter((c) => c !== except);
    if (cols.length === 0) return null;
    return this.cond(t, this.rng.pick(cols));
  }

  private measure(t: TableInst, col?: ColumnInst): Measure | null {
    const cols = this.measures(t);
    if (cols.length === 0) return null;
    const c = col ?? this.rng.pick(cols);
    const tpl = c.template as MeasureColumn;
    const unit = UNIT_WORD[tpl.kind];
    const scale = SCALE[c.encoding] ?? "";
    const where = `${t.name}.${c.name}`;
    return {
      table: t,
      col: c,
      template: tpl,
      noun: tpl.noun,
      unitText: unit ? ` in ${unit}` : "",
      scale,
      hint: `${tpl.noun} refers to ${where}`,
      ...(unit
        ? {
            lookup: {
              kind: "unit" as const,
              table: t.name,
              column: c.name,
              attr: tpl.kind,
              encoding: c.encoding,
              text: tpl.noun,
              literal: scale,
              purpose: "scale" as const,
            },
          }
        : {}),
    };
  }

  /** The measure asked in another unit where its kind has one for this aggregate (a duration's total in hours, milliseconds in seconds), else as it is. */
  private askedIn(m: Measure, fn: string): Measure {
    const units = m.template.kind === "duration" ? DURATION_UNITS[m.col.encoding] : undefined;
    const pick = !units ? undefined : fn === "SUM" && this.rng.chance(0.6) ? units.sum : units.other && this.rng.chance(0.5) ? units.other : undefined;
    if (!pick || !m.lookup) return m;
    const [unit, scale] = pick;
    return { ...m, unitText: ` in ${unit}`, scale, lookup: { ...m.lookup, literal: scale, asked: unit } };
  }

  private variant(options: string[]): string {
    return this.rng.pick(options);
  }

  /** One candidate of a template, or null when the database has no fitting tables. */
  private candidate(kind: TemplateKind): Candidate | null {
    return this.templates[kind](kind);
  }

  /** Each template's candidate builder: one draw of tables, columns and filters, in a fixed order of random draws. */
  private readonly templates: Record<TemplateKind, (kind: TemplateKind) => Candidate | null> = {
    count: (kind) => this.countCandidate(kind),
    list: (kind) => this.listCandidate(kind),
    count2: (kind) => this.count2Candidate(kind),
    agg: (kind) => this.aggCandidate(kind),
    join_count: (kind) => this.joinCountCandidate(kind),
    join_list: (kind) => this.joinListCandidate(kind),
    join_agg: (kind) => this.joinAggCandidate(kind),
    group_count: (kind) => this.groupCountCandidate(kind),
    top_measure: (kind) => this.topMeasureCandidate(kind),
    top_list: (kind) => this.topListCandidate(kind),
    top_parent: (kind) => this.topParentCandidate(kind),
    having: (kind) => this.havingCandidate(kind),
    above_avg: (kind) => this.aboveAvgCandidate(kind),
    percent: (kind) => this.percentCandidate(kind),
    not_in: (kind) => this.notInCandidate(kind),
    join3_count: (kind) => this.join3CountCandidate(kind),
  };

  private countCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const t = rng.pick(tables);
    const f = this.randomCond(t);
    if (!f) return null;
    return {
      template: kind,
      question: fill(
        this.variant([
          "How many {p} {f} are there?",
          "Count the {p} {f}.",
          "What is the number of {p} {f}?",
          // the predicate frame two or three times in six: the way the examples' hand-written questions mostly ask
          "How many {p} {pred}?",
          "How many {p} {pred}?",
          f.pre ? "How many {pre} {p} are there?" : "How many {p} {pred}?",
        ]),
        { p: t.plural, f: f.phrase, pred: predicateOf(f.phrase), pre: f.pre ?? "" },
      ),
      goal: `count ${t.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT COUNT(*) FROM ${t.name} WHERE ${f.gold("")}`,
      naive: `SELECT COUNT(*) FROM ${t.name} WHERE ${f.naive("")}`,
      tables: [t.name],
    };
  }

  private listCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const withLabel = this.db.tables.filter((t) => this.label(t));
    if (withLabel.length === 0) return null;
    const t = rng.pick(withLabel);
    const label = this.label(t)!;
    const f = this.randomCond(t);
    if (!f) return null;
    const nouns = (label.template as { nouns: string }).nouns;
    return {
      template: kind,
      question: fill(
        this.variant([
          "List the {n} of {p} {f}.",
          "Give the {n} of the {p} {f}.",
          "What are the {n} of {p} {f}?",
          "List the {n} of the {p} that {pred}.",
          f.pre ? "List the {n} of the {pre} {p}." : "What are the {n} of the {p} that {pred}?",
        ]),
        { n: nouns, p: t.plural, f: f.phrase, pred: predicateOf(f.phrase), pre: f.pre ?? "" },
      ),
      goal: `list the ${nouns} of ${t.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT ${label.name} FROM ${t.name} WHERE ${f.gold("")}`,
      naive: `SELECT ${label.name} FROM ${t.name} WHERE ${f.naive("")}`,
      tables: [t.name],
      maxRows: 20,
    };
  }

  private count2Candidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const t = rng.pick(tables);
    const f1 = this.randomCond(t);
    if (!f1) return null;
    const f2 = this.randomCond(t, f1.col);
    if (!f2) return null;
    return {
      template: kind,
      question: fill(
        this.variant([
          "How many {p} {a} {b} are there?",
          "Count the {p} {a} {b}.",
          "How many {p} {a} {predb}?",
          f1.pre ? "How many {prea} {p} {predb}?" : "How many {p} {a} {predb}?",
        ]),
        { p: t.plural, a: f1.phrase, b: f2.phrase, predb: predicateOf(f2.phrase), prea: f1.pre ?? "" },
      ),
      goal: `count ${t.plural} ${f1.phrase} ${f2.phrase}`,
      conds: [f1, f2],
      SQL: `SELECT COUNT(*) FROM ${t.name} WHERE ${f1.gold("")} AND ${f2.gold("")}`,
      naive: `SELECT COUNT(*) FROM ${t.name} WHERE ${f1.naive("")} AND ${f2.naive("")}`,
      tables: [t.name],
    };
  }

  private aggCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const measured = tables.filter((x) => this.measures(x).length > 0);
    const t = measured.length > 0 ? rng.pick(measured) : undefined; // same draw as before when some table has a measure
    if (!t) return null;
    const base = this.measure(t);
    if (!base) return null;
    const f = this.randomCond(t, base.col);
    if (!f) return null;
    const [word, fn] = rng.pick(summable(base) ? AGGS : AGGS.filter((a) => a[1] !== "SUM"));
    const m = this.askedIn(base, fn);
    // "the average fee, in dollars, of …": the commas hand-written questions put around the unit
    const unitText = m.unitText && rng.chance(0.3) ? `,${m.unitText},` : m.unitText;
    return {
      template: kind,
      question:
        f.pre && rng.chance(0.4)
          ? `What is the ${word} ${m.noun}${unitText} of ${f.pre} ${t.plural}?`
          : `What is the ${word} ${m.noun}${unitText} of ${t.plural} ${f.phrase}?`,
      goal: `the ${word} ${m.noun}${m.unitText} of ${t.plural} ${f.phrase}`,
      conds: [f],
      measure: m,
      SQL: `SELECT ${fn}(${m.col.name})${m.scale} FROM ${t.name} WHERE ${f.gold("")}`,
      naive: `SELECT ${fn}(${m.col.name}) FROM ${t.name} WHERE ${f.naive("")}`,
      tables: [t.name],
    };
  }

  private joinCountCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    if (links.length === 0) return null;
    const { child, parent, fk } = rng.pick(links);
    const f = this.randomCond(parent);
    if (!f) return null;
    const via = (fk.template as { via: string }).via;
    const on = `T1.${fk.name} = T2.${parent.pk}`;
    return {
      template: kind,
      question: fill(this.variant(["How many {c} {via} {p} {f} are there?", "Count the {c} {via} {p} {f}."]), {
        c: child.plural,
        via,
        p: parent.plural,
        f: f.phrase,
      }),
      goal: `count ${child.plural} ${via} ${parent.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT COUNT(*) FROM ${child.name} AS T1 INNER JOIN ${parent.name} AS T2 ON ${on} WHERE ${f.gold("T2.")}`,
      naive: `SELECT COUNT(*) FROM ${child.name} AS T1 INNER JOIN ${parent.name} AS T2 ON ${on} WHERE ${f.naive("T2.")}`,
      tables: [child.name, parent.name],
    };
  }

  private joinListCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    const ok = links.filter((l) => this.label(l.parent));
    if (ok.length === 0) return null;
    const { child, parent, fk } = rng.pick(ok);
    const label = this.label(parent)!;
    const nouns = (label.template as { nouns: string }).nouns;
    const f = this.randomCond(child);
    if (!f) return null;
    const on = `T1.${parent.pk} = T2.${fk.name}`;
    return {
      template: kind,
      question: fill(this.variant(["List the {n} of {p} with {c} {f}.", "What are the {n} of {p} with {c} {f}?"]), {
        n: nouns,
        p: parent.plural,
        c: child.plural,
        f: f.phrase,
      }),
      goal: `list the ${nouns} of ${parent.plural} with ${child.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT DISTINCT T1.${label.name} FROM ${parent.name} AS T1 INNER JOIN ${child.name} AS T2 ON ${on} WHERE ${f.gold("T2.")}`,
      naive: `SELECT DISTINCT T1.${label.name} FROM ${parent.name} AS T1 INNER JOIN ${child.name} AS T2 ON ${on} WHERE ${f.naive("T2.")}`,
      tables: [parent.name, child.name],
      maxRows: 20,
    };
  }

  private joinAggCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    const ok = links.filter((l) => this.measures(l.child).length > 0);
    if (ok.length === 0) return null;
    const { child, parent, fk } = rng.pick(ok);
    const base = this.measure(child);
    const f = this.randomCond(parent);
    if (!base || !f) return null;
    const [word, fn] = rng.pick(summable(base) ? AGGS : AGGS.filter((a) => a[1] !== "SUM"));
    const m = this.askedIn(base, fn);
    const via = (fk.template as { via: string }).via;
    const on = `T1.${fk.name} = T2.${parent.pk}`;
    return {
      template: kind,
      question: `What is the ${word} ${m.noun}${m.unitText} of ${child.plural} ${via} ${parent.plural} ${f.phrase}?`,
      goal: `the ${word} ${m.noun}${m.unitText} of ${child.plural} ${via} ${parent.plural} ${f.phrase}`,
      conds: [f],
      measure: m,
      SQL: `SELECT ${fn}(T1.${m.col.name})${m.scale} FROM ${child.name} AS T1 INNER JOIN ${parent.name} AS T2 ON ${on} WHERE ${f.gold("T2.")}`,
      naive: `SELECT ${fn}(T1.${m.col.name}) FROM ${child.name} AS T1 INNER JOIN ${parent.name} AS T2 ON ${on} WHERE ${f.naive("T2.")}`,
      tables: [child.name, parent.name],
    };
  }

  private groupCountCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const ok = tables.filter((t) => t.columns.some((c) => c.template.kind === "category"));
    if (ok.length === 0) return null;
    const t = rng.pick(ok);
    const g = rng.pick(t.columns.filter((c) => c.template.kind === "category"));
    const noun = (g.template as { noun: string }).noun;
    const f = this.randomCond(t, g);
    if (!f) return null;
    return {
      template: kind,
      question: `For each ${noun}, how many ${t.plural} ${f.phrase} are there?`,
      goal: `count ${t.plural} ${f.phrase} per ${noun}`,
      conds: [f],
      SQL: `SELECT ${g.name}, COUNT(*) FROM ${t.name} WHERE ${f.gold("")} GROUP BY ${g.name}`,
      naive: `SELECT ${g.name}, COUNT(*) FROM ${t.name} WHERE ${f.naive("")} GROUP BY ${g.name}`,
      tables: [t.name],
    };
  }

  /** A table with a label and a measure, its label, a measure and a filter on another column: the draws of the top-row templates. */
  private rankedDraw(): { t: TableInst; label: ColumnInst; m: Measure; f: Cond } | null {
    const ok = this.db.tables.filter((t) => this.label(t) && this.measures(t).length > 0);
    if (ok.length === 0) return null;
    const t = this.rng.pick(ok);
    const m = this.measure(t)!;
    const f = this.randomCond(t, m.col);
    return f ? { t, label: this.label(t)!, m, f } : null;
  }

  private topMeasureCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const draw = this.rankedDraw();
    if (!draw) return null;
    const { t, label, m, f } = draw;
    const high = rng.chance(0.65);
    const dir = high ? "DESC" : "ASC";
    const noun = singularNoun((label.template as { nouns: string }).nouns);
    return {
      template: kind,
      question: `Which ${t.singular} ${f.phrase} has the ${high ? "highest" : "lowest"} ${m.noun}? Give its ${noun}.`,
      goal: `the ${noun} of the ${t.singular} ${f.phrase} with the ${high ? "highest" : "lowest"} ${m.noun}`,
      conds: [f],
      SQL: `SELECT ${label.name} FROM ${t.name} WHERE ${f.gold("")} ORDER BY ${m.col.name} ${dir} LIMIT 1`,
      naive: `SELECT ${label.name} FROM ${t.name} WHERE ${f.naive("")} ORDER BY ${m.col.name} ${dir} LIMIT 1`,
      tables: [t.name],
      tieCheck: `SELECT ${m.col.name} FROM ${t.name} WHERE ${f.gold("")} ORDER BY ${m.col.name} ${dir} LIMIT 2`,
    };
  }

  /** "List the titles of the three most played explicit tracks": the first n rows by a measure, n from 2 to 5. */
  private topListCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const draw = this.rankedDraw();
    if (!draw) return null;
    const { t, label, m, f } = draw;
    const high = rng.chance(0.7);
    const dir = high ? "DESC" : "ASC";
    const n = rng.int(2, 5);
    const nouns = (label.template as { nouns: string }).nouns;
    const most = `${high ? "highest" : "lowest"} ${m.noun}`;
    const question = fill(
      this.variant([
        "List the {ns} of the {n} {p} {f} with the {most}.",
        "What are the {ns} of the {n} {p} {f} with the {most}?",
        "Which {n} {p} {f} have the {most}? Give their {ns}.",
        f.pre ? "List the {ns} of the {n} {pre} {p} with the {most}." : "List the {ns} of the {n} {p} that {pred} with the {most}.",
      ]),
      { ns: nouns, n: numberInWords(n), p: t.plural, f: f.phrase, pred: predicateOf(f.phrase), pre: f.pre ?? "", most },
    );
    const order = `ORDER BY ${m.col.name} ${dir}`;
    return {
      template: kind,
      question,
      goal: `list the ${nouns} of the ${n} ${t.plural} ${f.phrase} with the ${most}`,
      conds: [f],
      // the measure's hint without its unit lookup: an order needs no conversion
      ...(rng.chance(0.6) ? { measure: { ...m, lookup: undefined } } : {}),
      SQL: `SELECT ${label.name} FROM ${t.name} WHERE ${f.gold("")} ${order} LIMIT ${n}`,
      naive: `SELECT ${label.name} FROM ${t.name} WHERE ${f.naive("")} ${order} LIMIT ${n}`,
      tables: [t.name],
      // the n-th and the next row must differ, so that the n rows are well defined
      tieCheck: `SELECT ${m.col.name} FROM ${t.name} WHERE ${f.gold("")} ${order} LIMIT 2 OFFSET ${n - 1}`,
    };
  }

  private topParentCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    const ok = links.filter((l) => this.label(l.parent));
    if (ok.length === 0) return null;
    const { child, parent, fk } = rng.pick(ok);
    const label = this.label(parent)!;
    const noun = singularNoun((label.template as { nouns: string }).nouns);
    const onParent = rng.chance(0.5);
    const f = this.randomCond(onParent ? parent : child);
    if (!f) return null;
    const q = onParent ? "T1." : "T2.";
    const on = `T1.${parent.pk} = T2.${fk.name}`;
    const from = `FROM ${parent.name} AS T1 INNER JOIN ${child.name} AS T2 ON ${on}`;
    const question = onParent
      ? `Which ${parent.singular} ${f.phrase} has the most ${child.plural}? Give the ${noun}.`
      : `Which ${parent.singular} has the most ${child.plural} ${f.phrase}? Give the ${noun}.`;
    return {
      template: kind,
      question,
      goal: onParent ? `the ${parent.singular} ${f.phrase} with the most ${child.plural}` : `the ${parent.singular} with the most ${child.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT T1.${label.name} ${from} WHERE ${f.gold(q)} GROUP BY T1.${parent.pk} ORDER BY COUNT(*) DESC LIMIT 1`,
      naive: `SELECT T1.${label.name} ${from} WHERE ${f.naive(q)} GROUP BY T1.${parent.pk} ORDER BY COUNT(*) DESC LIMIT 1`,
      tables: [parent.name, child.name],
      tieCheck: `SELECT COUNT(*) ${from} WHERE ${f.gold(q)} GROUP BY T1.${parent.pk} ORDER BY COUNT(*) DESC LIMIT 2`,
    };
  }

  private havingCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    const ok = links.filter((l) => this.label(l.parent));
    if (ok.length === 0) return null;
    const { child, parent, fk } = rng.pick(ok);
    const label = this.label(parent)!;
    const nouns = (label.template as { nouns: string }).nouns;
    const f = this.randomCond(child);
    if (!f) return null;
    const on = `T1.${parent.pk} = T2.${fk.name}`;
    const from = `FROM ${parent.name} AS T1 INNER JOIN ${child.name} AS T2 ON ${on}`;
    const n = this.havingThreshold(`SELECT COUNT(*) ${from} WHERE ${f.gold("T2.")} GROUP BY T1.${parent.pk}`);
    if (n === null) return null;
    return {
      template: kind,
      question: `List the ${nouns} of ${parent.plural} with more than ${n} ${child.plural} ${f.phrase}.`,
      goal: `list the ${nouns} of ${parent.plural} with more than ${n} ${child.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT T1.${label.name} ${from} WHERE ${f.gold("T2.")} GROUP BY T1.${parent.pk} HAVING COUNT(*) > ${n}`,
      naive: `SELECT T1.${label.name} ${from} WHERE ${f.naive("T2.")} GROUP BY T1.${parent.pk} HAVING COUNT(*) > ${n}`,
      tables: [parent.name, child.name],
      maxRows: 20,
    };
  }

  private aboveAvgCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const measured = tables.filter((x) => this.measures(x).length > 0);
    const t = measured.length > 0 ? rng.pick(measured) : undefined; // same draw as before when some table has a measure
    if (!t) return null;
    const m = this.measure(t)!;
    const f = this.randomCond(t, m.col);
    if (!f) return null;
    const c = m.col.name;
    return {
      template: kind,
      question: `How many ${t.plural} ${f.phrase} have a ${m.noun} above the average ${m.noun} of all ${t.plural}?`,
      goal: `count ${t.plural} ${f.phrase} whose ${m.noun} is above the average of all ${t.plural}`,
      conds: [f],
      SQL: `SELECT COUNT(*) FROM ${t.name} WHERE ${f.gold("")} AND ${c} > (SELECT AVG(${c}) FROM ${t.name})`,
      naive: `SELECT COUNT(*) FROM ${t.name} WHERE ${f.naive("")} AND ${c} > (SELECT AVG(${c}) FROM ${t.name})`,
      tables: [t.name],
    };
  }

  private percentCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const tables = this.db.tables;
    const t = rng.pick(tables);
    const f = this.randomCond(t);
    if (!f) return null;
    const sql = (cond: string) => `SELECT CAST(SUM(CASE WHEN ${cond} THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(*) FROM ${t.name}`;
    return {
      template: kind,
      question: `What is the percentage of ${t.plural} ${f.phrase} among all ${t.plural}?`,
      goal: `the share of ${t.plural} ${f.phrase} among all ${t.plural}, times 100`,
      conds: [f],
      SQL: sql(f.gold("")),
      naive: sql(f.naive("")),
      tables: [t.name],
      percent: true,
    };
  }

  private notInCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    if (links.length === 0) return null;
    const { child, parent, fk } = rng.pick(links);
    const f = this.randomCond(child);
    if (!f) return null;
    return {
      template: kind,
      question: `How many ${parent.plural} have no ${child.plural} ${f.phrase}?`,
      goal: `count ${parent.plural} that have no ${child.plural} ${f.phrase}`,
      conds: [f],
      SQL: `SELECT COUNT(*) FROM ${parent.name} WHERE ${parent.pk} NOT IN (SELECT ${fk.name} FROM ${child.name} WHERE ${f.gold("")})`,
      naive: `SELECT COUNT(*) FROM ${parent.name} WHERE ${parent.pk} NOT IN (SELECT ${fk.name} FROM ${child.name} WHERE ${f.naive("")})`,
      tables: [parent.name, child.name],
    };
  }

  private join3CountCandidate(kind: TemplateKind): Candidate | null {
    const rng = this.rng;
    const links = this.links();
    const byChild = new Map<TableInst, typeof links>();
    for (const l of links) byChild.set(l.child, [...(byChild.get(l.child) ?? []), l]);
    const ok = [...byChild.values()].filter((ls) => ls.length >= 2);
    if (ok.length === 0) return null;
    const [a, b] = rng.pick(ok) as [(typeof links)[number], (typeof links)[number]];
    const fa = this.randomCond(a.parent);
    const fb = this.randomCond(b.parent);
    if (!fa || !fb) return null;
    const via = (l: (typeof links)[number]) => (l.fk.template as { via: string }).via;
    const from = `FROM ${a.child.name} AS T1 INNER JOIN ${a.parent.name} AS T2 ON T1.${a.fk.name} = T2.${a.parent.pk} INNER JOIN ${b.parent.name} AS T3 ON T1.${b.fk.name} = T3.${b.parent.pk}`;
    const c = a.child;
    return {
      template: kind,
      question: `How many ${c.plural} ${via(a)} ${a.parent.plural} ${fa.phrase} ${via(b)} ${b.parent.plural} ${fb.phrase} are there?`,
      goal: `count ${c.plural} ${via(a)} ${a.parent.plural} ${fa.phrase} ${via(b)} ${b.parent.plural} ${fb.phrase}`,
      conds: [fa, fb],
      SQL: `SELECT COUNT(*) ${from} WHERE ${fa.gold("T2.")} AND ${fb.gold("T3.")}`,
      naive: `SELECT COUNT(*) ${from} WHERE ${fa.naive("T2.")} AND ${fb.naive("T3.")}`,
      tables: [c.name, a.parent.name, b.parent.name],
    };
  }
  /** The largest n in 3..1 for which some group has more than n rows (and at most 20 groups do). */
  private havingThreshold(groupSql: string): number | null {
    const r = executeDirect(this.dbPath, groupSql);
    if (!r.ok) return null;
    const counts = r.rows.map((row) => Number(row[0]));
    for (const n of [3, 2, 1]) {
      const k = counts.filter((c) => c > n).length;
      if (k > 0 && k <= 20) return n;
    }
    return null;
  }

  /** Executes a candidate and turns it into a question, or null when it fails a check. */
  private check(c: Candidate): SynthQuestion | null {
    const gold = executeDirect(this.dbPath, c.SQL);
    if (!nonTrivial(gold, c.maxRows ?? 30)) return null;
    if (c.percent) {
      const v = Number((gold as { rows: SqlValue[][] }).rows[0]![0]);
      if (!(v > 0 && v < 100)) return null;
    }
    if (c.tieCheck) {
      const tie = executeDirect(this.dbPath, c.tieCheck);
      if (!tie.ok || tie.rows.length === 0) return null;
      if (tie.rows.length > 1 && String(tie.rows[0]![0]) === String(tie.rows[1]![0])) return null;
    }
    const naive = executeDirect(this.dbPath, c.naive);
    const encoded = !(naive.ok && gold.ok && exBird(naive.rows, gold.rows));
    const hints = [...c.conds.map((f) => f.hint), ...(c.measure ? [c.measure.hint] : [])];
    const lookups = [...c.conds.flatMap((f) => (f.lookup ? [f.lookup] : [])), ...(c.measure?.lookup ? [c.measure.lookup] : [])];
    return {
      db_id: this.db.dbId,
      question: c.question,
      evidence: phraseHints([...new Set(hints)], new Rng(`hint:${this.db.dbId}:${c.SQL}`)).join("; "),
      SQL: c.SQL,
      difficulty: TEMPLATE_DIFFICULTY[c.template],
      template: c.template,
      naive: c.naive,
      encoded,
      lookups,
      tables: c.tables,
      goal: c.goal,
    };
  }

  /** Draws templates until `target` questions pass their checks (or attempts run out). */
  build(target: number): SynthQuestion[] {
    const out: SynthQuestion[] = [];
    const seenSql = new Set<string>();
    const seenQuestion = new Set<string>();
    for (let attempt = 0; attempt < target * 8 && out.length < target; attempt++) {
      const kind = this.rng.weighted(TEMPLATE_WEIGHTS);
      const c = this.candidate(kind);
      if (!c || seenSql.has(c.SQL) || seenQuestion.has(c.question)) continue;
      const q = this.check(c);
      if (!q) continue;
      seenSql.add(c.SQL);
      seenQuestion.add(c.question);
      out.push(q);
    }
    return out;
  }
}

/** A total makes sense of money and durations ("the total running time"), not of weights or counts. */
function summable(m: Measure): boolean {
  return m.template.kind === "money" || m.template.kind === "duration";
}

const AGGS: readonly (readonly [string, string])[] = [
  ["average", "AVG"],
  ["total", "SUM"],
  ["highest", "MAX"],
  ["lowest", "MIN"],
];

/** The gold result is usable: it ran, has 1..maxRows rows, and is not a lone zero / NULL. */
export function nonTrivial(result: ExecResult, maxRows: number): boolean {
  if (!result.ok || result.rows.length === 0 || result.rows.length > maxRows || result.truncated) return false;
  if (result.rows.length === 1 && result.rows[0]!.every((v) => v === null || v === 0 || v === 0n || v === "")) return false;
  return true;
}

/** Generates the questions of one written database. */
export function buildQuestions(db: SynthDb, dbPath: string, seed: string, target: number): SynthQuestion[] {
  return new QuestionBuilder(db, dbPath, new Rng(seed)).build(target);
}

/**
 * WikiSQL made executable: its canonical SQL parsed, one SQLite table built per WikiSQL table
 * (columns named from the SQL, typed from the values, distractor columns from tables that share a
 * column, rows drawn so that every question's gold SQL returns rows) and the SQL rewritten to valid
 * SQLite. Seeded: the same seed gives the same tables, rows and SQL.
 */
import Database from "better-sqlite3";
import { Rng } from "../../src/examples/index.js";
import { AGGREGATES, SQLITE_KEYWORDS } from "../../src/sql/index.js";
import type { Lookup } from "../synth/index.js";
import type { RealEntry, RealItem, RealSplit } from "./source.js";

/** A WikiSQL aggregate, or "" for a plain column. */
export type WikiAgg = "" | "COUNT" | "MAX" | "MIN" | "SUM" | "AVG";

/** A comparison in a WikiSQL condition. */
export type WikiOp = "=" | ">" | "<";

/** One WikiSQL question with its SQL parsed and its placeholders filled. */
export interface WikiQuestion {
  /** Position in the file, counting sentences in order. */
  index: number;
  tableId: string;
  split: RealSplit;
  question: string;
  agg: WikiAgg;
  /** Canonical column names (`STATE/TERRITORY`), without `_FIELD`. */
  select: string;
  conds: { column: string; op: WikiOp; value: string }[];
}

/** Why a WikiSQL question was left out. */
export type WikiDropReason = "unparsed-sql" | "missing-value" | "sql-error" | "no-rows";

/** A column of a rebuilt table. */
export interface WikiColumn {
  /** The canonical header (`FLEET_SERIES_(QUANTITY)`). */
  canonical: string;
  /** The SQLite name (`fleet_series_quantity`). */
  name: string;
  type: "INTEGER" | "REAL" | "TEXT";
  /** Not used by any of the table's questions. */
  distractor: boolean;
}

/** One rebuilt WikiSQL table. */
export interface WikiTable {
  tableId: string;
  dbId: string;
  /** SQLite table name: a plural noun its headers suggest (`episodes`, `races`; {@link wikiTableName}), or `table_<id>` where names are "ids". */
  name: string;
  split: RealSplit;
  columns: WikiColumn[];
  rows: (string | number)[][];
  questions: WikiQuestion[];
}

/**
 * How rebuilt WikiSQL tables are named: "nouns", by what their headers suggest ({@link wikiTableName},
 * real-data version 2), or "ids", `table_<id>` (`table_1_1000181_1`, version 1: the v3 starter's training data).
 */
export type WikiTableNames = "nouns" | "ids";

/** A WikiSQL question that runs on its rebuilt table and returns rows. */
export type WikiItem = RealItem;

const NUMBER = /^-?\d+(\.\d+)?$/;

/**
 * The SQLite name of a WikiSQL header: lower case, `#` as `num` and `%` as `pct`, other runs of
 * non-alphanumerics as `_`; a name that starts with a digit or is an SQL keyword gets `col_`.
 */
export function wikiColumnName(canonical: string): string {
  return sqlName(canonical, "col_");
}

/**
 * Plural nouns for a WikiSQL table, each with the header words that suggest it (a table of
 * `driver`, `laps` and `grid` lists races). The data has no titles, and WikiSQL's own ids as names
 * (`table_1_1000181_1`) were recalled: v3, trained on them, wrote `FROM table_2_11233` for a
 * question on a one-table `artists` database.
 */
const TABLE_NOUNS: readonly [string, readonly string[]][] = [
  ["episodes", ["episode", "viewers", "directed", "written", "airdate", "production", "aired"]],
  ["races", ["driver", "laps", "grid", "constructor", "chassis", "circuit", "race", "pole", "entrant"]],
  ["medals", ["gold", "silver", "bronze", "medal", "medals"]],
  ["elections", ["party", "candidate", "candidates", "incumbent", "elected", "votes", "vote", "district"]],
  ["picks", ["pick", "draft", "college", "overall"]],
  ["games", ["opponent", "attendance", "venue", "week", "home", "away", "game", "result"]],
  ["standings", ["wins", "losses", "lost", "drawn", "draws", "points", "played", "goals", "against"]],
  ["tournaments", ["tournament", "winner", "runner", "par", "purse", "margin", "championship"]],
  ["songs", ["song", "artist", "album", "chart", "single", "label", "release"]],
  ["schools", ["school", "mascot", "enrollment", "founded", "institution"]],
  ["stations", ["frequency", "station", "call", "erp", "license", "network", "channel"]],
  ["models", ["model", "engine", "power", "torque", "displacement", "cylinders", "chassis"]],
  ["places", ["population", "area", "county", "region", "municipality", "census", "density", "province"]],
  ["films", ["film", "director", "actor", "award", "nominee", "category", "movie"]],
  ["players", ["player", "position", "nationality", "height", "club", "caps"]],
  ["seasons", ["season", "series", "league", "cup", "competition"]],
  ["matches", ["surface", "partner", "doubles", "singles", "opponents", "outcome"]],
  ["ships", ["ship", "builder", "built", "launched", "commissioned", "fate"]],
  ["airports", ["airport", "iata", "icao", "passengers"]],
  ["transfers", ["transfer", "moving", "fee"]],
  ["athletes", ["athlete", "lane", "heat", "mark"]],
  ["stadiums", ["stadium", "capacity"]],
];

/**
 * A table's name from the headers its questions use (distractors say nothing of it): the noun of
 * {@link TABLE_NOUNS} most of their words suggest (the first on a tie), else `records`; never one
 * of `taken` (its column names; default the headers' own).
 */
export function wikiTableName(headers: readonly string[], taken: readonly string[] = headers.map(wikiColumnName)): string {
  const words = new Set(headers.flatMap((h) => h.toLowerCase().split(/[^a-z0-9]+/)).filter((w) => w.length > 0));
  let best = "records";
  let most = 0;
  for (const [noun, cues] of TABLE_NOUNS) {
    const n = cues.filter((w) => words.has(w)).length;
    if (n > most) [best, most] = [noun, n];
  }
  const columns = new Set(taken);
  for (const name of [best, "records", "entries"]) if (!columns.has(name)) return name;
  return `${best}_table`;
}

/** A name SQLite reads unquoted: lower case, `#` → `num`, `%` → `pct`, other runs of non-alphanumerics → `_`; `prefix` before a leading digit or an SQL keyword. */
export function sqlName(raw: string, prefix: string): string {
  let s = raw
    .toLowerCase()
    .replace(/#/g, "_num_")
    .replace(/%/g, "_pct_")
    .replace(/[^a-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "");
  if (s === "") s = prefix.replace(/_$/, "");
  if (/^\d/.test(s) || SQLITE_KEYWORDS.has(s.toUpperCase())) s = `${prefix}${s}`;
  return s;
}

function columnToken(tok: string): string | undefined {
  if (!tok.endsWith("_FIELD")) return undefined;
  const bare = tok.startsWith("TABLEalias0.") ? tok.slice("TABLEalias0.".length) : tok;
  const name = bare.slice(0, -"_FIELD".length);
  return name.length > 0 ? name : undefined;
}

/**
 * Parses WikiSQL's canonical SQL (`SELECT MAX TABLEalias0.X_FIELD FROM TABLE AS TABLEalias0 WHERE
 * … = "var0" AND … > var1 ;`) and fills its placeholders from `variables`; a string names the problem.
 */
export function parseWikiSql(
  sql: string,
  variables: Record<string, string>,
): Pick<WikiQuestion, "agg" | "select" | "conds"> | "unparsed-sql" | "missing-value" {
  const toks = sql.trim().split(/\s+/);
  let i = 0;
  if (toks[i++] !== "SELECT") return "unparsed-sql";
  let agg: WikiAgg = "";
  if (AGGREGATES.has(toks[i]!) && toks[i + 1] !== "FROM") agg = toks[i++] as WikiAgg;
  const select = columnToken(toks[i++] ?? "");
  if (!select) return "unparsed-sql";
  if (toks.slice(i, i + 4).join(" ") !== "FROM TABLE AS TABLEalias0") return "unparsed-sql";
  i += 4;
  const conds: WikiQuestion["conds"] = [];
  if (toks[i] === "WHERE") {
    i++;
    for (;;) {
      const column = columnToken(toks[i] ?? "");
      const op = toks[i + 1];
      const raw = toks[i + 2];
      if (!column || (op !== "=" && op !== ">" && op !== "<") || raw === undefined) return "unparsed-sql";
      const name = raw.replace(/^"(.*)"$/, "$1");
      const value = variables[name];
      if (value === undefined) return /^(var|number)\d+$/.test(name) ? "missing-value" : "unparsed-sql";
      if (value.trim() === "") return "missing-value";
      conds.push({ column, op, value: value.trim() });
      i += 3;
      if (toks[i] === "AND") i++;
      else break;
    }
  }
  if (toks[i] !== ";" || i !== toks.length - 1) return "unparsed-sql";
  return { agg, select, conds };
}

/** The questions of WikiSQL's entries in file order, parsed; the rest counted by reason. */
export function wikiQuestions(entries: readonly RealEntry[]): { questions: WikiQuestion[]; dropped: Partial<Record<WikiDropReason, number>>; total: number } {
  const questions: WikiQuestion[] = [];
  const dropped: Partial<Record<WikiDropReason, number>> = {};
  let index = 0;
  for (const e of entries) {
    for (const s of e.sentences) {
      const at = index++;
      const parsed = parseWikiSql(e.sql[0] ?? "", { ...sqlOnlyExamples(e), ...s.variables });
      if (typeof parsed === "string") {
        dropped[parsed] = (dropped[parsed] ?? 0) + 1;
        continue;
      }
      const question = (s.original ?? fillText(s.text, s.variables)).trim().replace(/\s+/g, " ");
      questions.push({ index: at, tableId: s["table-id"] ?? "", split: s["question-split"], question, ...parsed });
    }
  }
  return { questions, dropped, total: index };
}

/** Values of the entry's `sql-only` variables (absent from its question), from the entry's example: some sentences do not list them. */
function sqlOnlyExamples(e: RealEntry): Record<string, string> {
  const out: Record<string, string> = {};
  for (const v of e.variables ?? []) if (v.location === "sql-only") out[v.name] = v.example;
  return out;
}

/** `text` with each placeholder replaced by its value. */
export function fillText(text: string, variables: Record<string, string>): string {
  return text.replace(/\b[a-z]+\d+\b/g, (w) => variables[w] ?? w);
}

interface Pool {
  values: string[];
  numeric: number;
  total: number;
}

function addToPool(pools: Map<string, Pool>, column: string, value: string): void {
  let p = pools.get(column);
  if (!p) pools.set(column, (p = { values: [], numeric: 0, total: 0 }));
  p.total++;
  if (NUMBER.test(value)) p.numeric++;
  if (p.values.length < 64 && !p.values.includes(value)) p.values.push(value);
}

/** What every table's rows draw from: values seen per header across WikiSQL, and which headers occur together. */
export interface WikiPools {
  values: Map<string, Pool>;
  /** Header → tables using it (at most 40). */
  tablesOf: Map<string, string[]>;
  /** Table id → its headers. */
  columnsOf: Map<string, string[]>;
  /** The 300 headers most tables use, most first: distractors when a table shares no header with another. */
  common: string[];
  /** Text values seen anywhere (at most 5,000), for headers with none of their own. */
  anyText: string[];
}

/** Pools over all parsed questions (every split: only header names and values, never a question or its SQL). */
export function wikiPools(questions: readonly WikiQuestion[]): WikiPools {
  const values = new Map<string, Pool>();
  const columnsOf = new Map<string, string[]>();
  const anyText: string[] = [];
  for (const q of questions) {
    let cols = columnsOf.get(q.tableId);
    if (!cols) columnsOf.set(q.tableId, (cols = []));
    for (const c of [q.select, ...q.conds.map((x) => x.column)]) if (!cols.includes(c)) cols.push(c);
    for (const c of q.conds) {
      addToPool(values, c.column, c.value);
      if (!NUMBER.test(c.value) && anyText.length < 5000) anyText.push(c.value);
    }
  }
  const tablesOf = new Map<string, string[]>();
  const counts = new Map<string, number>();
  for (const [t, cols] of columnsOf) {
    for (const c of cols) {
      counts.set(c, (counts.get(c) ?? 0) + 1);
      const list = tablesOf.get(c) ?? [];
      if (list.length < 40) list.push(t);
      tablesOf.set(c, list);
    }
  }
  const common = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, 300)
    .map(([c]) => c);
  return { values, tablesOf, columnsOf, common, anyText };
}

function isNumericColumn(canonical: string, own: string[], aggs: WikiAgg[], compared: boolean, pools: WikiPools): boolean {
  if (own.length > 0) return own.every((v) => NUMBER.test(v));
  if (aggs.some((a) => a === "MAX" || a === "MIN" || a === "SUM" || a === "AVG") || compared) return true;
  const p = pools.values.get(canonical);
  return !!p && p.total > 0 && p.numeric / p.total > 0.8;
}

function numberLike(rng: Rng, seen: number[], integer: boolean): number {
  let lo = 1;
  let hi = 100;
  if (seen.length > 0) {
    lo = Math.min(...seen);
    hi = Math.max(...seen);
    const span = Math.max(1, hi - lo);
    lo -= span * 0.5;
    hi += span * 0.5;
    if (Math.min(...seen) >= 0) lo = Math.max(0, lo);
  }
  const v = lo + rng.next() * (hi - lo);
  return integer ? Math.round(v) : Math.round(v * 100) / 100;
}

/** Rows per table that no question asked for, inclusive range. */
export const WIKI_OTHER_ROWS: readonly [number, number] = [4, 12];

/** Columns a table gets at least (distractors fill up to a number drawn in this range, and at least 2 are added). */
export const WIKI_COLUMNS: readonly [number, number] = [5, 9];

/** Builds the table of one WikiSQL table id from its questions; deterministic for `seed`. */
export function buildWikiTable(
  tableId: string,
  questions: readonly WikiQuestion[],
  pools: WikiPools,
  seed: string,
  names: WikiTableNames = "nouns",
): WikiTable {
  const rng = new Rng(`${seed}:${tableId}`);
  const known: string[] = [];
  for (const q of questions) for (const c of [q.select, ...q.conds.map((x) => x.column)]) if (!known.includes(c)) known.push(c);
  const want = Math.max(known.length + 2, rng.int(WIKI_COLUMNS[0], WIKI_COLUMNS[1]));
  const candidateSet = new Set<string>();
  for (const c of known) {
    for (const t of pools.tablesOf.get(c) ?? []) {
      if (t === tableId) continue;
      for (const d of pools.columnsOf.get(t) ?? []) candidateSet.add(d);
    }
  }
  const ownNames = new Set(known.map(wikiColumnName));
  const candidates = [...candidateSet];
  const distractors: string[] = [];
  const taken = new Set(ownNames);
  const draw = (from: string[]): void => {
    for (const d of rng.shuffle(from)) {
      if (known.length + distractors.length >= want) return;
      const n = wikiColumnName(d);
      if (taken.has(n)) continue;
      taken.add(n);
      distractors.push(d);
    }
  };
  draw(candidates);
  draw(pools.common);

  const columns: WikiColumn[] = [];
  const used = new Set<string>();
  for (const canonical of [...known, ...distractors]) {
    const own = questions.flatMap((q) => q.conds.filter((c) => c.column === canonical).map((c) => c.value));
    const aggs = questions.filter((q) => q.select === canonical).map((q) => q.agg);
    const compared = questions.some((q) => q.conds.some((c) => c.column === canonical && c.op !== "="));
    const numeric = isNumericColumn(canonical, own, aggs, compared, pools);
    const pool = pools.values.get(canonical)?.values ?? [];
    const integer = numeric && (own.length > 0 ? own : pool.filter((v) => NUMBER.test(v))).every((v) => !v.includes("."));
    let name = wikiColumnName(canonical);
    for (let k = 2; used.has(name); k++) name = `${wikiColumnName(canonical)}_${k}`;
    used.add(name);
    columns.push({ canonical, name, type: numeric ? (integer ? "INTEGER" : "REAL") : "TEXT", distractor: !known.includes(canonical) });
  }
  const order = rng.shuffle(columns.map((_, i) => i));
  const ordered = order.map((i) => columns[i]!);
  const rows = drawWikiRows(ordered, questions, pools, rng);
  const split = questions[0]?.split ?? "train";
  const id = tableId.replace(/[^A-Za-z0-9]+/g, "_");
  return {
    tableId,
    dbId: `wikisql_${id}`,
    name:
      names === "ids"
        ? `table_${id}`
        : wikiTableName(
            ordered.filter((c) => !c.distractor).map((c) => c.canonical),
            ordered.map((c) => c.name),
          ),
    split,
    columns: ordered,
    rows,
    questions: [...questions],
  };
}

/**
 * The table's second row draw: the same columns, order, types, name and questions (so the same gold
 * SQL), rows drawn again from their own stream (`<seed>:<table id>:rows2`): a witness row per question
 * as in the first draw (its condition columns satisfy the question, its other columns are new), a
 * near miss per question and condition column (every other condition met, this one missed at its
 * bound), and {@link WIKI_OTHER_ROWS} random rows. EX on both draws tells a right query from one that
 * hit the first draw's matching row by luck, or that dropped a condition the first draw did not need.
 */
export function wikiSecondDraw(table: WikiTable, pools: WikiPools, seed: string): WikiTable {
  return { ...table, rows: drawWikiRows(table.columns, table.questions, pools, new Rng(`${seed}:${table.tableId}:rows2`), true) };
}

/**
 * A table's rows, shuffled: per question a random row whose condition columns satisfy it (its
 * witness), with `nearMisses` its near misses, then {@link WIKI_OTHER_ROWS} random ones. The first
 * draw (no near misses) continues the stream that drew the columns, in the order it always has, so
 * its rows stay byte-identical.
 */
function drawWikiRows(
  ordered: readonly WikiColumn[],
  questions: readonly WikiQuestion[],
  pools: WikiPools,
  rng: Rng,
  nearMisses = false,
): (string | number)[][] {
  const ownValues = new Map<string, string[]>();
  const seenNumbers = new Map<string, number[]>();
  for (const col of ordered) {
    const own = questions.flatMap((q) => q.conds.filter((c) => c.column === col.canonical).map((c) => c.value));
    ownValues.set(col.canonical, own);
    seenNumbers.set(col.canonical, [...own, ...(pools.values.get(col.canonical)?.values ?? [])].filter((v) => NUMBER.test(v)).map(Number));
  }
  const valueFor = (col: WikiColumn): string | number => {
    const own = ownValues.get(col.canonical)!;
    const pool = pools.values.get(col.canonical)?.values ?? [];
    if (col.type === "TEXT") {
      if (own.length > 0 && rng.chance(0.3)) return rng.pick(own);
      if (pool.length > 0) return rng.pick(pool);
      return pools.anyText.length > 0 ? rng.pick(pools.anyText) : `value ${rng.int(1, 99)}`;
    }
    return numberLike(rng, seenNumbers.get(col.canonical)!, col.type === "INTEGER");
  };
  const randomRow = (): (string | number)[] => ordered.map(valueFor);

  const rows: (string | number)[][] = [];
  for (const q of questions) {
    const row = randomRow();
    const byColumn = new Map<string, WikiQuestion["conds"]>();
    for (const c of q.conds) byColumn.set(c.column, [...(byColumn.get(c.column) ?? []), c]);
    for (const [canonical, conds] of byColumn) {
      const at = ordered.findIndex((c) => c.canonical === canonical);
      row[at] = witnessValue(ordered[at]!, conds, rng);
    }
    rows.push(row);
    if (!nearMisses) continue;
    for (const missed of byColumn.keys()) {
      const near = randomRow();
      for (const [canonical, conds] of byColumn) {
        const at = ordered.findIndex((c) => c.canonical === canonical);
        near[at] = canonical === missed ? missValue(ordered[at]!, conds, pools, rng) : witnessValue(ordered[at]!, conds, rng);
      }
      rows.push(near);
    }
  }
  const others = rng.int(WIKI_OTHER_ROWS[0], WIKI_OTHER_ROWS[1]);
  for (let k = 0; k < others; k++) rows.push(randomRow());
  return rng.shuffle(rows);
}

/** A value of `col` that misses its conditions at their bound: another value than an `=` one, the bound itself of `>` or `<`. */
function missValue(col: WikiColumn, conds: WikiQuestion["conds"], pools: WikiPools, rng: Rng): string | number {
  const eq = conds.find((c) => c.op === "=");
  if (eq) {
    if (col.type !== "TEXT") return Number(eq.value) + (col.type === "INTEGER" ? 1 : 0.5);
    const others = (pools.values.get(col.canonical)?.values ?? []).filter((v) => v.toLowerCase() !== eq.value.toLowerCase());
    return others.length > 0 ? rng.pick(others) : `${eq.value} (other)`;
  }
  const bound = (conds.find((c) => c.op === ">") ?? conds.find((c) => c.op === "<"))!.value;
  return col.type === "TEXT" ? bound : Number(bound);
}

function witnessValue(col: WikiColumn, conds: WikiQuestion["conds"], rng: Rng): string | number {
  const eq = conds.find((c) => c.op === "=");
  if (col.type === "TEXT") {
    if (eq) return eq.value;
    const gt = conds.find((c) => c.op === ">");
    const lt = conds.find((c) => c.op === "<");
    if (gt) return `${gt.value}${rng.pick(["a", "m", "z"])}`;
    return lt && lt.value.length > 1 ? lt.value.slice(0, -1) : " ";
  }
  if (eq) return Number(eq.value);
  const integer = col.type === "INTEGER";
  const los = conds.filter((c) => c.op === ">").map((c) => Number(c.value));
  const his = conds.filter((c) => c.op === "<").map((c) => Number(c.value));
  const lo = los.length ? Math.max(...los) : undefined;
  const hi = his.length ? Math.min(...his) : undefined;
  const step = (ref: number): number => {
    const d = Math.max(1, Math.abs(ref) * 0.3) * (0.2 + rng.next());
    return integer ? Math.max(1, Math.round(d)) : Math.max(0.01, Math.round(d * 100) / 100);
  };
  if (lo !== undefined && hi !== undefined) {
    if (integer) return Math.floor(lo) + 1 <= Math.ceil(hi) - 1 ? rng.int(Math.floor(lo) + 1, Math.ceil(hi) - 1) : Math.floor(lo) + 1;
    return Math.round((lo + (hi - lo) * (0.25 + rng.next() * 0.5)) * 10000) / 10000;
  }
  if (lo !== undefined) return (integer ? Math.floor(lo) : lo) + step(lo);
  return (integer ? Math.ceil(hi!) : hi!) - step(hi!);
}

/** `s` as an SQL string literal. */
export function quoteText(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

/** A condition's value as a typed SQLite literal: a bare number for a numeric column, a quoted string otherwise. */
export function typedLiteral(col: WikiColumn, value: string): string {
  if (col.type !== "TEXT" && NUMBER.test(value)) return String(Number(value));
  return quoteText(value);
}

/** WikiSQL's SQL for a question, rewritten to SQLite over the rebuilt table: `SELECT MAX(col) FROM table_… WHERE col = 'v' AND num > 3`. */
export function wikiGoldSql(table: WikiTable, q: WikiQuestion): string {
  const col = (canonical: string): WikiColumn => {
    const c = table.columns.find((x) => x.canonical === canonical);
    if (!c) throw new Error(`${table.tableId}: no column ${canonical}`);
    return c;
  };
  const sel = col(q.select).name;
  const head = q.agg ? `${q.agg}(${sel})` : sel;
  const where = q.conds.map((c) => `${col(c.column).name} ${c.op} ${typedLiteral(col(c.column), c.value)}`).join(" AND ");
  return `SELECT ${head} FROM ${table.name}${where ? ` WHERE ${where}` : ""}`;
}

/** The table, and `others` beside it, as an in-memory SQLite database (page size 4096); `serialize()` gives the file's bytes. */
export function wikiDatabase(table: WikiTable, others: readonly WikiTable[] = []): Database.Database {
  const db = new Database(":memory:");
  db.pragma("page_size = 4096");
  for (const t of [table, ...others]) {
    db.exec(`CREATE TABLE ${t.name} (\n  ${t.columns.map((c) => `${c.name} ${c.type}`).join(",\n  ")}\n)`);
    const insert = db.prepare(`INSERT INTO ${t.name} VALUES (${t.columns.map(() => "?").join(", ")})`);
    db.transaction(() => {
      for (const r of t.rows) insert.run(...r);
    })();
  }
  return db;
}

/**
 * Up to `most` other tables of `table`'s split to put beside it in its database (0 to `most`,
 * seeded by `seed` and the table), none named as it or as another one: a question written for one
 * table, asked over several, must pick its table by name.
 */
export function wikiNeighbours(table: WikiTable, sameSplit: readonly WikiTable[], most: number, seed: string): WikiTable[] {
  if (most <= 0 || sameSplit.length < 2) return [];
  const rng = new Rng(`${seed}:${table.tableId}:neighbours`);
  const want = rng.int(0, most);
  const out: WikiTable[] = [];
  const names = new Set([table.name]);
  for (let tries = 0; out.length < want && tries < 8 * most; tries++) {
    const other = rng.pick(sameSplit);
    if (names.has(other.name)) continue;
    names.add(other.name);
    out.push(other);
  }
  return out;
}

const AGG_WORD: Record<WikiAgg, string> = { "": "", COUNT: "count of ", MAX: "largest ", MIN: "smallest ", SUM: "total ", AVG: "average " };

/**
 * Runs each question's gold SQL on the open database; returns the items that return rows (a
 * non-NULL value for an aggregate) and counts the others by reason.
 */
export function checkWikiTable(db: Database.Database, table: WikiTable): { items: WikiItem[]; dropped: Partial<Record<WikiDropReason, number>> } {
  const items: WikiItem[] = [];
  const dropped: Partial<Record<WikiDropReason, number>> = {};
  for (const q of table.questions) {
    const sql = wikiGoldSql(table, q);
    let rows: unknown[][];
    try {
      rows = db.prepare(sql).raw(true).all() as unknown[][];
    } catch {
      dropped["sql-error"] = (dropped["sql-error"] ?? 0) + 1;
      continue;
    }
    if (rows.length === 0 || (q.agg !== "" && rows[0]![0] === null)) {
      dropped["no-rows"] = (dropped["no-rows"] ?? 0) + 1;
      continue;
    }
    const colOf = (canonical: string): WikiColumn => table.columns.find((c) => c.canonical === canonical)!;
    const lookups: Lookup[] = [];
    for (const c of q.conds) {
      const col = colOf(c.column);
      if (col.type !== "TEXT" || c.op !== "=") continue;
      const at = q.question.toLowerCase().indexOf(c.value.toLowerCase());
      const text = at >= 0 ? q.question.slice(at, at + c.value.length) : c.value;
      lookups.push({ kind: "value", table: table.name, column: col.name, attr: "label", encoding: "plain", text, literal: quoteText(c.value) });
    }
    const filters = q.conds.map((c) => `${colOf(c.column).name} ${c.op} ${c.value}`).join(" and ");
    items.push({
      db_id: table.dbId,
      split: q.split,
      question: q.question,
      SQL: sql,
      difficulty: q.agg === "" && q.conds.length <= 1 ? "simple" : "moderate",
      lookups,
      tables: [table.name],
      goal: `${AGG_WORD[q.agg]}${colOf(q.select).name}${filters ? ` where ${filters}` : ""}`,
    });
  }
  return { items, dropped };
}

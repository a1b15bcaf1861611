/**
 * The schema section of a prompt under a token budget: tables and columns ranked by relevance to
 * the question, the keys needed to join kept tables, and a note naming what was left out.
 */
import { quoteIdent } from "./schema-db.js";
import {
  promptName,
  renderForeignKey,
  renderSchema,
  renderTableCodes,
  renderTableDdl,
  type DatabaseSchema,
  type ForeignKey,
  type SchemaFormat,
  type TableInfo,
} from "./schema.js";

/** Counts tokens of a text; the policy's tokenizer can be passed in. Default ≈ characters / 4. */
export type TokenCounter = (text: string) => number;

/** Options of {@link schemaPrompt}. */
export interface SchemaPromptOptions {
  /** The question; its words rank tables and columns. Default none (schema order). */
  question?: string;
  /** Most tokens the text may take. Default no limit. */
  tokenBudget?: number;
  /** Token counter. Default ≈ characters / 4. */
  countTokens?: TokenCounter;
  /** Default "codes". */
  format?: SchemaFormat;
  /** Values matched in the question (see ValueIndex.match); their columns rank higher. Default none. */
  matches?: ReadonlyArray<{ table: string; column: string; score: number }>;
}

/** The schema text and what it keeps and leaves out (`table` and `table.column` names). */
export interface SchemaPrompt {
  text: string;
  tables: string[];
  omittedTables: string[];
  omittedColumns: string[];
}

/** Default token counter: about four characters per token. */
export const approxTokens: TokenCounter = (text) => Math.ceil(text.length / 4);

const STOPWORDS = new Set(
  (
    "a an the of in on at to for from by with and or not no nor is are was were be been being do does did have has had " +
    "what which who whom whose when where why how many much list show give find return tell me us all each every any " +
    "their there this that these those it its as than then more most less least number count total please also only " +
    "into over under between about after before during same different per them they he she his her i you your our we " +
    "can could would should will shall may might must if else one two both either neither other others"
  ).split(" "),
);

function stem(word: string): string {
  if (word.length > 4 && word.endsWith("ies")) return `${word.slice(0, -3)}y`;
  if (word.length > 4 && /(ss|x|ch|sh)es$/.test(word)) return word.slice(0, -2);
  if (word.length > 3 && word.endsWith("s") && !word.endsWith("ss")) return word.slice(0, -1);
  return word;
}

/** Lower-cased, stemmed word tokens of a name or sentence (splits snake_case and camelCase). */
export function relevanceTokens(text: string): string[] {
  const spaced = text.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2");
  return spaced
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0 && !STOPWORDS.has(w))
    .map(stem);
}

interface Ranked {
  index: number;
  table: TableInfo;
  score: number;
  columnScores: number[];
}

function rank(schema: DatabaseSchema, options: SchemaPromptOptions): Ranked[] {
  const q = new Set(relevanceTokens(options.question ?? ""));
  const nameTok = schema.tables.map((t) => new Set(relevanceTokens(t.name)));
  const colTok = schema.tables.map((t) => t.columns.map((c) => new Set(relevanceTokens(c.name))));
  const comTok = schema.tables.map((t) => t.columns.map((c) => new Set(relevanceTokens(c.comment ?? ""))));
  const df = new Map<string, number>();
  schema.tables.forEach((_, i) => {
    const all = new Set([...nameTok[i]!, ...colTok[i]!.flatMap((s) => [...s]), ...comTok[i]!.flatMap((s) => [...s])]);
    for (const w of all) df.set(w, (df.get(w) ?? 0) + 1);
  });
  const n = schema.tables.length;
  const idf = (w: string): number => Math.log(1 + n / (df.get(w) ?? 1));
  const overlap = (s: Set<string>): number => {
    let sum = 0;
    for (const w of s) if (q.has(w)) sum += idf(w);
    return sum;
  };
  const matchScore = new Map<string, number>();
  for (const m of options.matches ?? []) {
    const k = `${m.table.toLowerCase()}\0${m.column.toLowerCase()}`;
    matchScore.set(k, Math.max(matchScore.get(k) ?? 0, m.score));
  }
  const referencing = new Set(schema.foreignKeys.map((fk) => `${fk.table}\0${fk.column}`));
  return schema.tables.map((table, index) => {
    const columnScores = table.columns.map((c, ci) => {
      const nameScore = overlap(colTok[index]![ci]!);
      const comment = [...comTok[index]![ci]!].filter((w) => !colTok[index]![ci]!.has(w));
      const commentScore = 0.5 * overlap(new Set(comment));
      const valueScore = 2 * (matchScore.get(`${table.name.toLowerCase()}\0${c.name.toLowerCase()}`) ?? 0);
      return nameScore + commentScore + valueScore;
    });
    // A column referencing another table names that table; it makes the other table relevant, not this one.
    const own = columnScores.filter((_, ci) => !referencing.has(`${table.name}\0${table.columns[ci]!.name}`));
    const best = own.length > 0 ? Math.max(...own) : 0;
    const sum = own.reduce((a, b) => a + b, 0);
    return { index, table, score: 2 * overlap(nameTok[index]!) + best + 0.1 * sum, columnScores };
  });
}

/**
 * The schema text for a prompt. Without a budget (or when everything fits) it is the whole schema.
 * Otherwise tables are ranked by relevance to the question (name and comment words, weighted by
 * rarity across tables, plus matched values). Tables scoring at least 30% of the best first get
 * their keys and related columns (with the tables on the foreign-key path to kept ones), then are
 * widened to all columns or as many as fit; weaker related tables follow the same way, then the
 * bridging tables are widened, then unrelated tables fill what is left whole, in schema order.
 * Keys joining kept tables are always kept, and a last line names what was left out. A budget
 * smaller than that line leaves only the line.
 */
export function schemaPrompt(schema: DatabaseSchema, options: SchemaPromptOptions = {}): SchemaPrompt {
  const format = options.format ?? "codes";
  const count = options.countTokens ?? approxTokens;
  const allNames = schema.tables.map((t) => t.name);
  const full = renderSchema(schema, { format });
  const budget = options.tokenBudget;
  if (budget === undefined || count(full) <= budget) {
    return { text: full, tables: allNames, omittedTables: [], omittedColumns: [] };
  }
  const ranked = rank(schema, options);
  const hasQuestion = (options.question ?? "").trim() !== "";
  const note = (keep: ReadonlyMap<number, Set<number>>): string => omissionNote(schema, keep, hasQuestion);
  const plan = new Planner(schema, format, count, budget, note);

  const relevant = ranked.filter((r) => r.score > 0).sort((a, b) => b.score - a.score || a.index - b.index);
  const top = relevant[0]?.score ?? 0;
  const strong = relevant.filter((r) => r.score >= STRONG * top);
  const weak = relevant.filter((r) => r.score < STRONG * top);
  for (const r of strong) plan.addCore(r);
  for (const r of strong) plan.widen(r);
  for (const r of weak) if (plan.addCore(r)) plan.widen(r);
  for (const ti of [...plan.order]) plan.widen(ranked[ti]!);
  for (const r of ranked) if (!plan.keep.has(r.index)) plan.addWhole(r.index);

  // Costs were estimated table by table; a tokenizer that is not additive may overshoot a little.
  let text = plan.render();
  while (count(text) > budget && plan.order.length > 0) {
    plan.drop(plan.order[plan.order.length - 1]!);
    text = plan.render();
  }
  const keptNames = schema.tables.filter((_, i) => plan.keep.has(i)).map((t) => t.name);
  const { omittedTables, omittedColumns } = omitted(schema, plan.keep);
  return { text, tables: keptNames, omittedTables, omittedColumns };
}

function omitted(schema: DatabaseSchema, keep: Map<number, Set<number>>): { omittedTables: string[]; omittedColumns: string[] } {
  const omittedTables: string[] = [];
  const omittedColumns: string[] = [];
  schema.tables.forEach((t, ti) => {
    const cols = keep.get(ti);
    if (!cols) omittedTables.push(t.name);
    else t.columns.forEach((c, ci) => !cols.has(ci) && omittedColumns.push(`${t.name}.${c.name}`));
  });
  return { omittedTables, omittedColumns };
}

const NOTE_NAMES = 10;
/** Tables scoring at least this share of the best score get their keys in before any table is widened. */
const STRONG = 0.3;

function omissionNote(schema: DatabaseSchema, keep: ReadonlyMap<number, Set<number>>, hasQuestion: boolean): string {
  const names: string[] = [];
  let columns = 0;
  for (const [ti, cols] of keep) columns += schema.tables[ti]!.columns.length - cols.size;
  const tables = schema.tables.length - keep.size;
  if (tables === 0 && columns === 0) return "";
  for (let ti = 0; ti < schema.tables.length && names.length <= NOTE_NAMES; ti++) {
    if (!keep.has(ti)) names.push(promptName(schema.tables[ti]!.name));
  }
  for (let ti = 0; ti < schema.tables.length && names.length <= NOTE_NAMES; ti++) {
    const cols = keep.get(ti);
    if (!cols) continue;
    const t = schema.tables[ti]!;
    t.columns.forEach((c, ci) => !cols.has(ci) && names.push(`${promptName(t.name)}.${promptName(c.name)}`));
  }
  return noteText(tables, columns, names, hasQuestion);
}

function noteText(tables: number, columns: number, names: string[], hasQuestion: boolean): string {
  const what = [tables > 0 ? `${tables} table${tables === 1 ? "" : "s"}` : "", columns > 0 ? `${columns} column${columns === 1 ? "" : "s"}` : ""]
    .filter(Boolean)
    .join(" and ");
  const why = hasQuestion ? "not related to the question" : "to fit the token budget";
  const shown = names.slice(0, NOTE_NAMES).join(", ") + (names.length > NOTE_NAMES ? ", ..." : "");
  return `-- omitted ${what} ${why}: ${shown}`;
}

interface Link {
  fk: ForeignKey;
  /** Referencing table and column indices. */
  a: number;
  ca: number;
  /** Referenced table and column indices. */
  b: number;
  cb: number;
  /** Tokens the link adds to the text once both ends are shown. */
  cost: number;
}

class Planner {
  readonly keep = new Map<number, Set<number>>();
  /** Tables in the order they were added, for trimming from the end. */
  readonly order: number[] = [];
  /** Estimated tokens of the kept tables and links, without the note. */
  private body = 0;
  private linkCount = 0;
  private readonly lineCost = new Map<number, number>();
  private readonly wholeCost: number[];
  private readonly links: Link[][];
  private readonly adjacency: number[][];

  constructor(
    private readonly schema: DatabaseSchema,
    private readonly format: SchemaFormat,
    private readonly count: (text: string) => number,
    private readonly budget: number,
    private readonly note: (keep: ReadonlyMap<number, Set<number>>) => string,
  ) {
    const byName = new Map(schema.tables.map((t, i) => [t.name, i]));
    const colIndex = schema.tables.map((t) => new Map(t.columns.map((c, i) => [c.name, i])));
    this.links = schema.tables.map(() => []);
    const adjacent = schema.tables.map(() => new Set<number>());
    for (const fk of schema.foreignKeys) {
      const a = byName.get(fk.table)!;
      const b = byName.get(fk.refTable)!;
      const text =
        format === "codes"
          ? renderForeignKey(fk)
          : `  FOREIGN KEY (${quoteIdent(fk.column)}) REFERENCES ${quoteIdent(fk.refTable)} (${quoteIdent(fk.refColumn)}),`;
      const link: Link = { fk, a, ca: colIndex[a]!.get(fk.column)!, b, cb: colIndex[b]!.get(fk.refColumn)!, cost: count(text) + 1 };
      this.links[a]!.push(link);
      if (b !== a) {
        this.links[b]!.push(link);
        adjacent[a]!.add(b);
        adjacent[b]!.add(a);
      }
    }
    this.adjacency = adjacent.map((s) => [...s].sort((x, y) => x - y));
    this.wholeCost = schema.tables.map((_, i) => this.tableCost(i, new Set(schema.tables[i]!.columns.map((_, c) => c))));
  }

  private tableCost(ti: number, cols: Set<number>): number {
    const t = this.schema.tables[ti]!;
    return this.count(this.format === "codes" ? renderTableCodes(t, cols) : renderTableDdl(t, cols, [])) + 1;
  }

  /** Primary-key columns of a table plus its foreign-key columns towards kept tables. */
  keyColumns(ti: number): Set<number> {
    const cols = new Set<number>();
    this.schema.tables[ti]!.columns.forEach((c, i) => c.primaryKey && cols.add(i));
    for (const l of this.links[ti]!) {
      if (l.a === ti && this.keep.has(l.b)) cols.add(l.ca);
      if (l.b === ti && this.keep.has(l.a)) cols.add(l.cb);
    }
    return cols;
  }

  /** Adds a table's keys and question-related columns, with the tables bridging it to kept ones when they fit too. */
  addCore(r: Ranked): boolean {
    if (this.keep.has(r.index)) return true;
    const core = this.keyColumns(r.index);
    r.columnScores.forEach((s, i) => {
      if (s > 0) core.add(i);
    });
    const bridge = this.bridgePath(r.index);
    if (bridge.length > 0 && this.tryAdd([[r.index, core], ...bridge.map((b): [number, Set<number>] => [b, this.keyColumns(b)])])) return true;
    return this.tryAdd([[r.index, core]]);
  }

  /** Shows all of a kept table when it fits, else adds its other columns one by one, most related first. */
  widen(r: Ranked): void {
    const kept = this.keep.get(r.index);
    if (!kept || kept.size === r.table.columns.length) return;
    if (this.addWhole(r.index)) return;
    const optional = r.table.columns
      .map((_, i) => i)
      .filter((i) => !kept.has(i))
      .sort((a, b) => r.columnScores[b]! - r.columnScores[a]! || a - b);
    for (const i of optional) this.tryAdd([[r.index, new Set([...this.keep.get(r.index)!, i])]]);
  }

  /** Adds (or completes) a table with all its columns when it fits. */
  addWhole(ti: number): boolean {
    if (this.body + this.wholeCost[ti]! - (this.lineCost.get(ti) ?? 0) > this.budget) return false;
    return this.tryAdd([[ti, new Set(this.schema.tables[ti]!.columns.map((_, i) => i))]]);
  }

  /** Tables between `ti` and the nearest kept table over foreign keys (at most two), when `ti` is not adjacent to one. */
  bridgePath(ti: number): number[] {
    if (this.keep.size === 0) return [];
    const prev = new Map<number, number>([[ti, -1]]);
    let frontier = [ti];
    for (let depth = 0; depth < 3 && frontier.length > 0; depth++) {
      const next: number[] = [];
      for (const u of frontier) {
        for (const v of this.adjacency[u]!) {
          if (prev.has(v)) continue;
          prev.set(v, u);
          if (this.keep.has(v)) {
            const path: number[] = [];
            for (let w = u; w !== ti; w = prev.get(w)!) path.push(w);
            return path;
          }
          next.push(v);
        }
      }
      frontier = next;
    }
    return [];
  }

  /**
   * Adds tables (or widens kept ones) with the given columns, plus the join keys they need on both
   * sides, when the added text fits in what is left of the budget.
   */
  tryAdd(items: [number, Set<number>][]): boolean {
    const next = new Map<number, Set<number>>();
    for (const [ti, cols] of items) next.set(ti, new Set([...(this.keep.get(ti) ?? []), ...(next.get(ti) ?? []), ...cols]));
    const shown = (ti: number): Set<number> | undefined => next.get(ti) ?? this.keep.get(ti);
    const touched = new Set<Link>();
    for (const ti of [...next.keys()]) for (const l of this.links[ti]!) touched.add(l);
    for (const l of touched) {
      if (!shown(l.a) || !shown(l.b)) continue;
      for (const [ti, ci] of [
        [l.a, l.ca],
        [l.b, l.cb],
      ] as const) {
        const cur = shown(ti)!;
        if (!cur.has(ci)) next.set(ti, new Set([...cur, ci]));
      }
    }
    let delta = 0;
    const costs = new Map<number, number>();
    for (const [ti, cols] of next) {
      const cost = cols.size === this.schema.tables[ti]!.columns.length ? this.wholeCost[ti]! : this.tableCost(ti, cols);
      costs.set(ti, cost);
      delta += cost - (this.lineCost.get(ti) ?? 0);
    }
    const linked = (l: Link, view: (ti: number) => Set<number> | undefined): boolean => !!view(l.a)?.has(l.ca) && !!view(l.b)?.has(l.cb);
    let newLinks = 0;
    for (const l of touched) {
      if (linked(l, shown) && !linked(l, (ti) => this.keep.get(ti))) {
        delta += l.cost;
        newLinks++;
      }
    }
    if (newLinks > 0 && this.linkCount === 0 && this.format === "codes") delta += this.count("foreign keys :") + 1;
    if (this.body + delta > this.budget) return false;
    const trial = new Map(this.keep);
    for (const [ti, cols] of next) trial.set(ti, cols);
    if (this.body + delta + this.count(this.note(trial)) > this.budget) return false;
    for (const [ti, cols] of next) {
      if (!this.keep.has(ti)) this.order.push(ti);
      this.keep.set(ti, cols);
      this.lineCost.set(ti, costs.get(ti)!);
    }
    this.body += delta;
    this.linkCount += newLinks;
    return true;
  }

  /** Columns kept in all, to tell whether a pass added anything. */
  size(): number {
    let n = 0;
    for (const cols of this.keep.values()) n += cols.size;
    return n;
  }

  drop(ti: number): void {
    this.keep.delete(ti);
    this.lineCost.delete(ti);
    this.order.splice(this.order.indexOf(ti), 1);
  }

  render(): string {
    const keepByName = new Map<string, ReadonlySet<number> | undefined>();
    this.schema.tables.forEach((t, i) => {
      const cols = this.keep.get(i);
      if (cols) keepByName.set(t.name, cols.size === t.columns.length ? undefined : cols);
    });
    const body = this.keep.size > 0 ? renderSchema(this.schema, { format: this.format, keep: keepByName }) : "";
    const tail = this.note(this.keep);
    return [body, tail].filter(Boolean).join(this.format === "ddl" ? "\n\n" : "\n");
  }
}

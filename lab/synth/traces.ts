/**
 * Cold-start SFT traces for the three prompt families, in exactly the text a server rollout
 * produces: the model writes `<think>`, `<intermediate_sql>` and `<final_sql>` blocks; after each
 * `</intermediate_sql>` comes the `<result>` block the server would inject (the probe really
 * executed with `executeDirect` and rendered by `formatFeedback` + `resultBlock`, full mode, 3 rows).
 *
 * - execution-aware: a plan, 1–3 probes that discover the encodings the question needs (the
 *   column's format, then a count to confirm a guessed code; a unit's range; a date's layout), or a
 *   run of the query itself, each read in a short think, then the gold SQL; in some traces one
 *   probe is first written with a misnamed column and corrected from the error's column list;
 * - standard: one think that states the plan and the stored forms, then the gold SQL (the model
 *   has to infer them from the schema's example values — the same target as the probing family,
 *   so the two are comparable as an ablation);
 * - direct: the gold SQL only.
 *
 * The prompt is `buildPrompt` with the whole schema (`schemaPrompt` without a budget, the text the
 * server shows by default, example values included) and, given them, the matched values the server
 * shows for the question ({@link ServerPromptParts}).
 */
import { PROMPT_FAMILIES, buildPrompt, formatCheck, formatFeedback, identifiersIn, normalizeSql, resultBlock } from "../../src/agent/index.js";
import { DEFAULT_MATCH_LIMIT, type PromptFamily } from "../../src/decoding/index.js";
import { Rng } from "../../src/examples/index.js";
import type { ChatMessage } from "../../src/policy/index.js";
import { rmSync } from "node:fs";
import { executeDirect, formatMatchedValues, loadSchema, schemaPrompt, ValueIndex, type ExecResult, type SqlValue } from "../../src/sql/index.js";
import { boolPair, type Encoding } from "./generate.js";
import type { Lookup, SynthQuestion } from "./questions.js";

/** A generated question with its id in its split. */
export interface SynthItem extends SynthQuestion {
  question_id: number;
}

/** What a trace needs of an item: synthetic items and real questions made executable (lab/realdata) both fit. */
export type TraceItem = Pick<SynthItem, "db_id" | "question_id" | "question" | "evidence" | "SQL" | "lookups" | "tables" | "goal">;

/** One SFT record: the chat prompt of a family and the response to learn. */
export interface SftRecord {
  db_id: string;
  question_id: number;
  family: PromptFamily;
  /** `[system, user]` from `buildPrompt`. */
  messages: ChatMessage[];
  /** The assistant turn, `<result>` blocks included (mask them out of the loss). */
  response: string;
}

/** Probes one execution-aware trace runs at most. */
export const MAX_TRACE_PROBES = 3;

/** Feedback the traces show, as the server's defaults: full mode, 3 rows. */
export const TRACE_FEEDBACK = { mode: "full", rows: 3 } as const;

/** The families, in record order. */
export const TRACE_FAMILIES: readonly PromptFamily[] = PROMPT_FAMILIES;

/**
 * What the server's prompt holds for a question beside the question itself: the database's whole
 * schema text ({@link schemaText}) and the "Matched values" lines of its value index for the question
 * and evidence (`DEFAULT_MATCH_LIMIT` at most, as the prompt builder). Questions come database by
 * database: one schema and one index are kept, the index built under `indexDir`, which `close` removes.
 */
export class ServerPromptParts {
  private current: { dbPath: string; schema: string; index: ValueIndex } | undefined;

  constructor(private readonly indexDir: string) {}

  /** The schema text and matched-value lines (undefined when nothing matches) for `question` over `dbPath`. */
  for(dbPath: string, question: string, evidence: string): { schema: string; matchedValues?: string } {
    if (this.current?.dbPath !== dbPath) {
      this.closeIndex();
      this.current = { dbPath, schema: schemaText(dbPath), index: ValueIndex.open(dbPath, { indexDir: this.indexDir }) };
    }
    const matches = this.current.index.match(evidence ? `${question} ${evidence}` : question, { limit: DEFAULT_MATCH_LIMIT });
    return { schema: this.current.schema, ...(matches.length > 0 ? { matchedValues: formatMatchedValues(matches) } : {}) };
  }

  /** Closes the open index and removes `indexDir`. */
  close(): void {
    this.closeIndex();
    rmSync(this.indexDir, { recursive: true, force: true });
  }

  private closeIndex(): void {
    if (!this.current) return;
    const file = this.current.index.file;
    this.current.index.close();
    this.current = undefined;
    rmSync(file, { force: true });
  }
}

/** The schema text a prompt carries for a database: the whole schema, as `preparePrompt` renders it without a budget. */
export function schemaText(dbPath: string): string {
  return schemaPrompt(loadSchema(dbPath)).text;
}

function cellText(v: SqlValue): string {
  if (v === null) return "NULL";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(12)));
  if (v instanceof Uint8Array) return "blob";
  return String(v);
}

function firstCells(result: ExecResult, k: number): string[] {
  if (!result.ok) return [];
  return result.rows.slice(0, k).map((r) => cellText(r[0] ?? null));
}

function quoteList(values: string[]): string {
  return values.join(", ");
}

const VALUE_DESC: Record<string, Partial<Record<Encoding, string>>> = {
  country: {
    iso2: "two-letter country codes",
    iso3: "three-letter country codes",
    upper: "country names in capitals",
    lower: "country names in lower case",
    plain: "full country names",
  },
  city: { code: "three-letter city codes", upper: "city names in capitals", lower: "city names in lower case", plain: "city names" },
  category: { code: "short codes", letter: "one-letter codes", upper: "words in capitals", title: "capitalised words", plain: "plain words" },
};

const UNIT_NAME: Partial<Record<Encoding, string>> = {
  cents: "cents",
  dollars: "dollars",
  grams: "grams",
  kg: "kilograms",
  seconds: "seconds",
  minutes: "minutes",
  ms: "milliseconds",
};
const ASKED_UNIT: Record<string, string> = { money: "dollars", weight: "kilograms", duration: "minutes" };
const DATE_DESC: Partial<Record<Encoding, string>> = {
  iso: "year-month-day with dashes",
  dmy: "two numbers and then the year, with slashes",
  mdy: "two numbers and then the year, with slashes",
  compact: "year, month and day with no separators",
  slash: "year/month/day with slashes",
};

function where(l: Lookup): string {
  return `${l.table}.${l.column}`;
}

/** What a think says the plan checks first. */
function checkText(l: Lookup): string {
  switch (l.kind) {
    case "value":
      return `how ${where(l)} stores ${l.text}`;
    case "flag":
      return `the values of ${where(l)}`;
    case "unit":
      return `the unit of ${where(l)}`;
    case "date":
      return `the date format of ${where(l)}`;
  }
}

/** A one-sentence statement of a lookup's stored form (the standard family's reasoning, and unprobed lookups). */
export function mappingText(l: Lookup): string {
  switch (l.kind) {
    case "value":
      return `${l.text} is ${l.literal} in ${where(l)}.`;
    case "flag": {
      const [yes] = boolPair(l.encoding);
      const yesLit = typeof yes === "number" ? String(yes) : `'${yes}'`;
      return l.positive ? `${l.text} is ${l.literal} in ${where(l)}.` : `${l.text} is ${yesLit} in ${where(l)}, so use ${l.literal}.`;
    }
    case "unit": {
      const unit = UNIT_NAME[l.encoding] ?? "the asked unit";
      if (l.purpose === "threshold") return `${where(l)} is in ${unit}, so ${l.text} is ${l.literal}.`;
      const asked = l.asked ?? ASKED_UNIT[l.attr] ?? unit;
      return l.literal ? `${where(l)} is in ${unit}; divide by ${divisor(l.literal)} for ${asked}.` : `${where(l)} is already in ${asked}.`;
    }
    case "date":
      return `${l.text} matches ${l.literal} in ${where(l)}.`;
  }
}

function divisor(scale: string): string {
  return scale.replace(/^\s*\/\s*/, "").replace(/\.0$/, "");
}

interface Probe {
  sql: string;
  result: ExecResult;
  feedback: string;
  read: string;
}

function run(dbPath: string, sql: string): { result: ExecResult; feedback: string } {
  const result = executeDirect(dbPath, sql);
  return { result, feedback: formatFeedback(result, { ...TRACE_FEEDBACK, schema: () => loadSchema(dbPath, { examples: 0 }) }, sql) };
}

/** Share of execution-aware traces with lookups that also run the gold query before answering (when the probe budget allows). */
export const CHECK_RUN_SHARE = 0.5;

/** Share of execution-aware traces with one misnamed probe that the next probe corrects from the error's column list. */
export const RECOVERY_SHARE = 0.35;

const SUFFIXES = ["code", "name", "type", "id", "date", "value"];

function words(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .split("_")
    .filter(Boolean)
    .map((w) => w.toLowerCase());
}

function styled(parts: string[], camel: boolean): string {
  return camel ? parts.map((w, i) => (i === 0 ? w : w[0]!.toUpperCase() + w.slice(1))).join("") : parts.join("_");
}

/** Names a model confuses with `name`: a word dropped, a suffix swapped or added, in the database's style; none that exists. */
function misnamings(name: string, taken: Set<string>): string[] {
  const parts = words(name);
  const camel = /[a-z][A-Z]/.test(name);
  const out: string[][] = [];
  if (parts.length >= 2) {
    out.push(parts.slice(1), parts.slice(0, -1));
    for (const s of SUFFIXES) if (s !== parts.at(-1)) out.push([...parts.slice(0, -1), s]);
  } else {
    for (const s of SUFFIXES) out.push([...parts, s]);
    out.push([`${parts[0]}s`]);
  }
  return [...new Set(out.map((p) => styled(p, camel)))].filter((n) => n.length > 0 && !taken.has(n.toLowerCase()));
}

/** `sql` with every use of column `from` (outside string literals) renamed to `to`. */
function renameColumn(sql: string, from: string, to: string): string {
  const word = new RegExp(`(?<![\\w$])${from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w$])`, "g");
  return sql
    .split(/('(?:[^']|'')*')/)
    .map((part, i) => (i % 2 === 1 ? part : part.replace(word, to)))
    .join("");
}

/**
 * A probe that names one of `probe`'s columns wrongly, really executed (a missing-column error whose
 * feedback lists the real columns), and the reading that corrects it; undefined when no column of
 * the probe can be misnamed into an error.
 */
function misnamedProbe(dbPath: string, probe: Probe, rng: Rng): Probe | undefined {
  const schema = loadSchema(dbPath, { examples: 0 });
  const tableNames = new Set(schema.tables.map((t) => t.name.toLowerCase()));
  const taken = new Set([...tableNames, ...schema.tables.flatMap((t) => t.columns.map((c) => c.name.toLowerCase()))]);
  const idents = new Set(identifiersIn(probe.sql));
  const used = schema.tables
    .filter((t) => idents.has(t.name.toLowerCase()))
    .flatMap((t) =>
      t.columns.filter((c) => idents.has(c.name.toLowerCase()) && !tableNames.has(c.name.toLowerCase())).map((c) => ({ table: t.name, column: c.name })),
    );
  if (used.length === 0) return undefined;
  const target = rng.pick(used);
  const names = misnamings(target.column, taken);
  if (names.length === 0) return undefined;
  const wrong = rng.pick(names);
  const sql = renameColumn(probe.sql, target.column, wrong);
  const { result, feedback } = run(dbPath, sql);
  if (result.ok || result.error.category !== "missing_column") return undefined;
  return { sql, result, feedback, read: `There is no column ${wrong}; ${target.table} has ${target.column}.` };
}

/** The stored literal without quotes, as a result cell shows it. */
function bare(literal: string): string {
  return literal.startsWith("'") ? literal.slice(1, -1).replace(/''/g, "'") : literal;
}

/** Distinct lookups (one per column and kind), in question order. */
function uniqueLookups(lookups: Lookup[]): Lookup[] {
  const seen = new Set<string>();
  return lookups.filter((l) => {
    const k = `${l.kind}\0${l.table}\0${l.column}\0${l.literal}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/**
 * The probes of one lookup: a first look at the column and, when `extra` allows, a confirming or
 * disambiguating second probe. Returns the probes run and whether the lookup was settled by them.
 */
function probeLookup(dbPath: string, l: Lookup, extra: boolean): Probe[] {
  const out: Probe[] = [];
  const add = (sql: string, read: (r: ExecResult) => string): ExecResult => {
    const { result, feedback } = run(dbPath, sql);
    out.push({ sql, result, feedback, read: read(result) });
    return result;
  };
  switch (l.kind) {
    case "value": {
      const first = add(`SELECT DISTINCT ${l.column} FROM ${l.table} LIMIT 5`, () => "");
      const shown = firstCells(first, 3);
      const desc = VALUE_DESC[l.attr]?.[l.encoding] ?? "values";
      const found = shown.includes(bare(l.literal));
      out[0]!.read = `${where(l)} holds ${desc}: ${quoteList(shown)}.` + (found ? ` ${l.text} is ${l.literal}.` : ` ${l.text} should be ${l.literal}.`);
      if (!found && extra) {
        add(`SELECT COUNT(*) FROM ${l.table} WHERE ${l.column} = ${l.literal}`, (r) => {
          const n = firstCells(r, 1)[0] ?? "0";
          return `${n} rows have ${l.literal}, so ${l.text} is ${l.literal}.`;
        });
      }
      return out;
    }
    case "flag": {
      add(`SELECT DISTINCT ${l.column} FROM ${l.table}`, (r) => `${where(l)} has the values ${quoteList(firstCells(r, 3))}. ` + mappingText(l));
      return out;
    }
    case "unit": {
      add(`SELECT MIN(${l.column}), MAX(${l.column}) FROM ${l.table}`, (r) => {
        const row = r.ok && r.rows[0] ? r.rows[0].map((v) => cellText(v ?? null)) : ["?", "?"];
        const unit = UNIT_NAME[l.encoding] ?? "the asked unit";
        const tail =
          l.purpose === "threshold"
            ? `${l.text} is ${l.literal}.`
            : l.literal
              ? `Divide by ${divisor(l.literal)} for ${l.asked ?? ASKED_UNIT[l.attr] ?? unit}.`
              : "No conversion is needed.";
        return `${where(l)} runs from ${row[0]} to ${row[1]}, so it is stored in ${unit}. ${tail}`;
      });
      return out;
    }
    case "date": {
      const first = add(`SELECT ${l.column} FROM ${l.table} LIMIT 3`, () => "");
      const shown = firstCells(first, 3);
      const base = `Dates look like ${shown[0] ?? "?"}: ${DATE_DESC[l.encoding] ?? "text"}.`;
      const ordered = l.month && (l.encoding === "dmy" || l.encoding === "mdy");
      if (!ordered) {
        out[0]!.read = `${base} ${l.text} matches ${l.literal}.`;
        return out;
      }
      const dayFirst = shown.find((v) => Number(v.slice(0, 2)) > 12);
      if (dayFirst) {
        out[0]!.read = `${base} ${dayFirst} starts with ${dayFirst.slice(0, 2)}, so the day comes first. ${l.text} matches ${l.literal}.`;
        return out;
      }
      out[0]!.read = `${base} The order of day and month is not clear yet.`;
      if (extra) {
        add(`SELECT MAX(SUBSTR(${l.column}, 1, 2)) FROM ${l.table}`, (r) => {
          const top = firstCells(r, 1)[0] ?? "?";
          const part = Number(top) > 12 ? "day" : "month";
          return `The first number goes up to ${top}, so it is the ${part}. ${l.text} matches ${l.literal}.`;
        });
      } else {
        out[0]!.read = `${base} ${l.text} matches ${l.literal}.`;
      }
      return out;
    }
  }
}

function summary(result: ExecResult): string {
  if (!result.ok) return "an error";
  const n = Math.max(result.rowCount, result.rows.length);
  if (n === 1 && result.rows[0]!.length === 1) return cellText(result.rows[0]![0] ?? null);
  return `${n} row${n === 1 ? "" : "s"}`;
}

function plan(item: Pick<TraceItem, "goal" | "tables">): string {
  return `Goal: ${item.goal}. Tables: ${item.tables.join(", ")}.`;
}

/** The probes an execution-aware trace runs for an item (at most {@link MAX_TRACE_PROBES}); `checkRun` adds a run of the gold query when budget remains. */
export function traceProbes(item: Pick<TraceItem, "lookups" | "SQL">, dbPath: string, checkRun: boolean): { probes: Probe[]; unprobed: Lookup[] } {
  const lookups = uniqueLookups(item.lookups);
  const probes: Probe[] = [];
  const unprobed: Lookup[] = [];
  lookups.forEach((l, i) => {
    const left = MAX_TRACE_PROBES - probes.length;
    const later = lookups.length - i - 1;
    if (left <= 0) {
      unprobed.push(l);
      return;
    }
    const got = probeLookup(dbPath, l, left - 1 > later);
    probes.push(...got);
  });
  const repeated = probes.some((p) => normalizeSql(p.sql) === normalizeSql(item.SQL)); // the server would refuse a repeat
  if (probes.length < MAX_TRACE_PROBES && (lookups.length === 0 || checkRun) && !repeated) {
    const { result, feedback } = run(dbPath, item.SQL);
    probes.push({ sql: item.SQL, result, feedback, read: `The query returns ${summary(result)}. This answers the question.` });
  }
  return { probes, unprobed };
}

/**
 * The execution-aware response: plan, probes with their real results, readings, final SQL. In
 * {@link RECOVERY_SHARE} of traces one probe is first written with a misnamed column and corrected
 * after its error.
 */
export function executionAwareResponse(item: TraceItem, dbPath: string, rng: Rng): string {
  const lookups = uniqueLookups(item.lookups);
  const { probes, unprobed } = traceProbes(item, dbPath, rng.chance(CHECK_RUN_SHARE));
  if (probes.length > 0 && rng.chance(RECOVERY_SHARE)) {
    const at = rng.int(0, probes.length - 1);
    const wrong = misnamedProbe(dbPath, probes[at]!, rng);
    if (wrong) probes.splice(at, 0, wrong);
  }
  const first = lookups[0];
  const opening = first ? `${plan(item)} First check ${checkText(first)}.` : `${plan(item)} Run the query to check it.`;
  let text = `<think>${opening}</think>\n`;
  probes.forEach((p, i) => {
    const last = i === probes.length - 1;
    const extra = last && unprobed.length > 0 ? ` ${unprobed.map(mappingText).join(" ")}` : "";
    text += `<intermediate_sql>${p.sql}</intermediate_sql>${resultBlock(p.feedback)}<think>${p.read}${extra}</think>\n`;
  });
  return `${text}<final_sql>${item.SQL}</final_sql>`;
}

/** The standard-reasoning response: one think with the plan and the stored forms, then the final SQL. */
export function standardResponse(item: Pick<TraceItem, "lookups" | "SQL" | "goal" | "tables">): string {
  const maps = uniqueLookups(item.lookups).map(mappingText);
  return `<think>${[plan(item), ...maps].join(" ")}</think>\n<final_sql>${item.SQL}</final_sql>`;
}

/** The direct response: the final SQL only. */
export function directResponse(item: Pick<TraceItem, "SQL">): string {
  return `<final_sql>${item.SQL}</final_sql>`;
}

/**
 * The three SFT records of one item (execution-aware, standard, direct), prompted with `matchedValues`
 * (lines of {@link ServerPromptParts}; default none); throws if one fails `formatCheck`.
 */
export function buildTraces(item: TraceItem, dbPath: string, schema: string, seed: string, matchedValues?: string): SftRecord[] {
  const rng = new Rng(seed);
  const responses: Record<PromptFamily, string> = {
    "execution-aware": executionAwareResponse(item, dbPath, rng),
    standard: standardResponse(item),
    direct: directResponse(item),
  };
  return TRACE_FAMILIES.map((family) => {
    const response = responses[family];
    const verdict = formatCheck(response, family);
    if (!verdict.ok) throw new Error(`${item.db_id}#${item.question_id} ${family}: ${verdict.problems.join("; ")}`);
    const { messages } = buildPrompt({ family, schema, question: item.question, evidence: item.evidence, ...(matchedValues ? { matchedValues } : {}) });
    return { db_id: item.db_id, question_id: item.question_id, family, messages, response };
  });
}

/**
 * The default prompt source of the decoder: the database's schema text (src/sql's schema prompt)
 * and the values that words of the question match (src/sql's value index), cached per database,
 * with the verified examples and earlier turns a front end offers, within the schema's token
 * budget, turned into a prompt of the requested family; plus the schema's identifier grammar for
 * constrained decoding.
 */
import {
  buildSegmentGrammars,
  NameBinding,
  reexProfile,
  type BuiltPrompt,
  type ModelProfile,
  type PromptFamily,
  type PromptTurn,
  type SchemaNames,
  type SegmentGrammars,
} from "../agent/index.js";
import { TEACH_DEFAULTS } from "../config/index.js";
import { statSync } from "node:fs";
import type { RetrievedExample, ShownExtras } from "./types.js";
import {
  approxTokens,
  cachedSchema,
  dialectOf,
  formatMatchedValues,
  loadSchema,
  OffThread,
  schemaPrompt,
  sourceFor,
  valueIndexFile,
  ValueIndex,
  type ColumnValues,
  type DatabaseSchema,
  type MatchOptions,
  type SchemaFormat,
  type TokenCounter,
  type ValueMatch,
} from "../sql/index.js";

/** Verified examples (best first) and earlier turns (oldest first) offered to a prompt; it shows those that fit. */
export interface OfferedExtras {
  examples?: readonly RetrievedExample[];
  turns?: readonly PromptTurn[];
}

/** A prompt, with what it showed of the offered extras (the default builder sets `shown` when some were offered). */
export type DecoderPrompt = BuiltPrompt & { shown?: ShownExtras };

/** Builds the prompt for one question in a profile's protocol (default `reex`), with the extras that fit; may be sync or async. */
export type PromptFor = (
  dbPath: string,
  question: string,
  evidence: string | undefined,
  family: PromptFamily,
  profile?: ModelProfile,
  extras?: OfferedExtras,
) => DecoderPrompt | Promise<DecoderPrompt>;

/**
 * The constrained-decoding grammars for one database, family and profile (default `reex`), and
 * for the question when given (its string literals: see {@link createGrammarBuilder}); may be sync or async.
 */
export type GrammarFor = (
  dbPath: string,
  family: PromptFamily,
  profile?: ModelProfile,
  ask?: { question: string; evidence?: string },
) => SegmentGrammars | Promise<SegmentGrammars>;

/** How the default grammar builder reads a database. */
export interface GrammarBuilderOptions {
  /** Folder of value-index files (the prompt builder's). Default ".reex/indexes". */
  indexDir?: string;
  /** Restrict string literals to the database's spellings of the question's words (see {@link createGrammarBuilder}). Default true. */
  linkValues?: boolean;
}

/** Matched values a prompt shows at most, unless `matchLimit` says otherwise: 10. */
export const DEFAULT_MATCH_LIMIT = 10;

/** How the default prompt builder reads a database. */
export interface PromptBuilderOptions {
  /** Folder of value-index files. Default ".reex/indexes". */
  indexDir?: string;
  /** Match question words against stored values. Default true. */
  matchValues?: boolean;
  /** Matched values shown at most. Default {@link DEFAULT_MATCH_LIMIT}. */
  matchLimit?: number;
  /** Schema text token budget (over it, tables are ranked by the question and the prefix stops being shared). Default 2048 (the decoder passes a quarter of the context: the estimate is ≈ characters / 4, and small tokenizers spend more). */
  schemaTokenBudget?: number;
  /** Token counter for the budget. Default ≈ characters / 4. */
  countTokens?: TokenCounter;
  /** Default the profile's (`codes` for reex and generic, CREATE TABLE statements for the others). */
  schemaFormat?: SchemaFormat;
  /** Value indexes kept open. Default 32. */
  maxOpenIndexes?: number;
  /** Share of the schema budget verified examples may take (config `teach.examplesTokenShare`). Default the config schema's. */
  examplesTokenShare?: number;
  /** Share of the schema budget a conversation's earlier turns may take (config `teach.historyTokenShare`). Default the config schema's. */
  historyTokenShare?: number;
}

/** A prompt builder plus the resources it keeps open. */
export interface PromptBuilder {
  promptFor: PromptFor;
  /** Closes the cached value indexes. */
  close(): void;
}

/** The schema text's token budget when none is given (≈ 8,000 characters). */
const DEFAULT_SCHEMA_TOKEN_BUDGET = 2048;
/** Files at least this large are introspected and indexed in a child process, off the event loop. */
const LARGE_FILE_BYTES = 8 * 1024 * 1024;
/** Schemas with more tables than this are pruned to their budget in a child process. */
const OFF_THREAD_TABLES = 200;
/** How long a question waits for a value index being built before it goes on without matched values, ms. */
const INDEX_WAIT_MS = 2_000;

function isLarge(dbPath: string): boolean {
  return (statSync(dbPath, { throwIfNoEntry: false })?.size ?? 0) >= LARGE_FILE_BYTES;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** The table and column names of a schema, for the identifier grammar. */
export function schemaNames(schema: DatabaseSchema): SchemaNames {
  return { tables: schema.tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) };
}

/**
 * The offered extras that fit their shares of the schema's token budget, counted as a question and
 * its SQL (and a turn's summary) with the schema's counter: examples in the order offered (best
 * first) until one does not fit, so the lowest-scored are dropped first; turns from the newest back
 * until one does not fit, so the oldest are dropped first. The schema gets what they leave.
 */
function fitExtras(
  extras: OfferedExtras,
  budget: number,
  shares: { examples: number; history: number },
  count: TokenCounter,
): { examples: RetrievedExample[]; turns: PromptTurn[]; shown: ShownExtras } {
  const cost = (question: string, sql: string | null, more = ""): number => count(`Question: ${question}\n${sql ?? ""}\n${more}`);
  const examples: RetrievedExample[] = [];
  let exampleTokens = 0;
  for (const e of extras.examples ?? []) {
    const c = cost(e.evidence ? `${e.question} ${e.evidence}` : e.question, e.sql);
    if (exampleTokens + c > Math.floor(budget * shares.examples)) break;
    examples.push(e);
    exampleTokens += c;
  }
  const turns: PromptTurn[] = [];
  let turnTokens = 0;
  for (const t of [...(extras.turns ?? [])].reverse()) {
    const c = cost(t.question, t.sql, t.summary);
    if (turnTokens + c > Math.floor(budget * shares.history)) break;
    turns.unshift(t);
    turnTokens += c;
  }
  const listed = examples.map((e) => ({ id: e.id, question: e.question, score: e.score }));
  return { examples, turns, shown: { examples: listed, turns: turns.length, exampleTokens, turnTokens } };
}

/**
 * The default {@link PromptFor}: schema text plus matched values, with the schema first so that
 * everything up to its end is the shared (prefix-cached) part. Schemas are cached by src/sql; value
 * indexes are opened once per database version and kept (least recently used first out).
 */
export function createPromptBuilder(options: PromptBuilderOptions = {}): PromptBuilder {
  const indexes = new Map<string, ValueIndex>();
  const maxOpen = Math.max(1, options.maxOpenIndexes ?? 32);
  const indexOptions = options.indexDir !== undefined ? { indexDir: options.indexDir } : {};
  const budget = options.schemaTokenBudget ?? DEFAULT_SCHEMA_TOKEN_BUDGET;
  let off: OffThread | undefined;

  const keep = (file: string, index: ValueIndex): ValueIndex => {
    indexes.delete(file);
    indexes.set(file, index);
    while (indexes.size > maxOpen) {
      const [oldest, idx] = indexes.entries().next().value!;
      indexes.delete(oldest);
      idx.close();
    }
    return index;
  };

  /** Matches from the value index; a large database's index is built in a child and skipped until it is ready. */
  const matchValues = async (key: string, text: string, large: boolean, match: MatchOptions): Promise<ValueMatch[]> => {
    // a source that is not a SQLite file matches against its bounded snapshot of text values
    const dbPath = sourceFor(key)?.valuesPath ?? key;
    const file = valueIndexFile(dbPath, indexOptions);
    let index = indexes.get(file);
    if (!index && !large) index = ValueIndex.open(dbPath, indexOptions);
    index ??= ValueIndex.openBuilt(dbPath, indexOptions);
    if (!index) {
      const build = (off ??= new OffThread()).buildIndex(file, dbPath, indexOptions);
      build.catch(() => undefined);
      const ready = await Promise.race([
        build.then(
          () => true,
          () => false,
        ),
        pause(INDEX_WAIT_MS).then(() => false),
      ]);
      if (ready) index = ValueIndex.openBuilt(dbPath, indexOptions);
      if (!index) return [];
    }
    return keep(file, index).match(text, match);
  };

  const shares = {
    examples: options.examplesTokenShare ?? TEACH_DEFAULTS.examplesTokenShare,
    history: options.historyTokenShare ?? TEACH_DEFAULTS.historyTokenShare,
  };

  const promptFor: PromptFor = async (dbPath, question, evidence, family, profile = reexProfile, extras = {}) => {
    const large = isLarge(dbPath);
    const schema = cachedSchema(dbPath) ?? (large ? undefined : loadSchema(dbPath));
    const text = evidence ? `${question} ${evidence}` : question;
    const matches = options.matchValues === false ? [] : await matchValues(dbPath, text, large, { limit: options.matchLimit ?? DEFAULT_MATCH_LIMIT });
    const offered = {
      ...(profile.examples !== false && extras.examples ? { examples: extras.examples } : {}),
      ...(extras.turns ? { turns: extras.turns } : {}),
    };
    const fit =
      (offered.examples?.length ?? 0) + (offered.turns?.length ?? 0) > 0 ? fitExtras(offered, budget, shares, options.countTokens ?? approxTokens) : undefined;
    const schemaBudget = budget - (fit ? fit.shown.exampleTokens + fit.shown.turnTokens : 0);
    const textOptions = { question: text, matches, format: options.schemaFormat ?? profile.schemaFormat, tokenBudget: schemaBudget };
    const schemaText =
      (!schema || schema.tables.length > OFF_THREAD_TABLES) && !options.countTokens
        ? await (off ??= new OffThread()).schemaText(dbPath, textOptions)
        : schemaPrompt(schema ?? loadSchema(dbPath), { ...textOptions, ...(options.countTokens ? { countTokens: options.countTokens } : {}) }).text;
    const built = profile.buildPrompt({
      family,
      schema: schemaText,
      question,
      ...(matches.length > 0 ? { matchedValues: formatMatchedValues(matches) } : {}),
      ...(evidence ? { evidence } : {}),
      dialect: dialectOf(dbPath),
      ...(fit?.examples.length ? { examples: fit.examples } : {}),
      ...(fit?.turns.length ? { turns: fit.turns } : {}),
    });
    return { ...built, ...(matches.length > 0 ? { matches } : {}), ...(fit ? { shown: fit.shown } : {}) };
  };

  return {
    promptFor,
    close: () => {
      for (const index of indexes.values()) index.close();
      indexes.clear();
      off?.close();
      off = undefined;
    },
  };
}

/**
 * The default {@link GrammarFor}: `buildSegmentGrammars` over the whole schema in the profile's
 * tags, cached per database version, family and profile. Given the question, and where the
 * database's value index is built (the prompt builder builds it), the SQL's string literals are
 * those {@link questionLiterals} lists, or date and time text. Why: 88 of the starter's 216 wrong
 * greedy WikiSQL answers differed only in a value from the question, miscopied or in the
 * question's case where the table stores another.
 */
export function createGrammarBuilder(options: GrammarBuilderOptions = {}): GrammarFor {
  const cache = new Map<string, { schema: DatabaseSchema; grammars: SegmentGrammars; few?: ColumnValues[] }>();
  const indexOptions = options.indexDir !== undefined ? { indexDir: options.indexDir } : {};
  return (dbPath, family, profile = reexProfile, ask) => {
    const schema = loadSchema(dbPath);
    const key = `${profile.id}\0${family}\0${dbPath}`;
    let hit = cache.get(key);
    if (!hit || hit.schema !== schema) {
      hit = {
        schema,
        grammars: { ...buildSegmentGrammars(schemaNames(schema), family, { skeleton: profile }), binding: new NameBinding(schemaNames(schema), profile) },
      };
      cache.delete(key);
      cache.set(key, hit);
      while (cache.size > 64) cache.delete(cache.keys().next().value!);
    }
    if (!ask || options.linkValues === false) return hit.grammars;
    const index = ValueIndex.openBuilt(sourceFor(dbPath)?.valuesPath ?? dbPath, indexOptions);
    if (!index) return hit.grammars;
    try {
      hit.few ??= index.fewValues(FEW_VALUES);
      const bounds = questionLiterals(index, ask.evidence ? `${ask.question} ${ask.evidence}` : ask.question, hit.few);
      return {
        ...buildSegmentGrammars(schemaNames(schema), family, { skeleton: profile, ...bounds }),
        ...(hit.grammars.binding ? { binding: hit.grammars.binding } : {}),
      };
    } finally {
      index.close();
    }
  };
}

/**
 * The literals a question's grammar lists: its and its evidence's word spans (up to
 * {@link MAX_SPAN_WORDS} words), each spelt as the database stores it where a stored value folds
 * to the same text, as written where none does, unless the span overlaps a stored one (it would
 * cut a stored name short: `'kevin'` for `'Kevin Stevens'`) or is function words alone; and, as
 * `columnLiterals`, the few-valued columns' values, except a column whose value the question names,
 * and the codes a span names in other words, each with its own column only ("Germany" for
 * `country = 'DE'`, where the span itself is not offered: it is not what the column stores).
 */
function questionLiterals(index: ValueIndex, text: string, few: readonly ColumnValues[]): { literals: string[]; columnLiterals: ColumnValues[] } {
  const spans = wordSpans(text).map((span) => {
    const forms = [...span.forms, ...(span.quoted ? [span.quoted] : [])];
    const found = forms.flatMap((form) => index.stored(form));
    const coded = span.forms.flatMap((form) => index.otherwiseNamed(form));
    return { ...span, found, coded, stored: [...new Set(found.map((f) => f.value))], functionWords: onlyFunctionWords(span.forms[0]!) };
  });
  const inStored = new Set<number>();
  for (const span of spans) if (span.stored.length > 0 || span.coded.length > 0) for (let w = span.start; w < span.end; w++) inStored.add(w);
  const literals = new Set<string>();
  for (const span of spans) {
    if (span.stored.length > 0) {
      for (const v of span.stored) literals.add(v);
      continue;
    }
    let skip = span.functionWords;
    for (let w = span.start; w < span.end && !skip; w++) skip = inStored.has(w);
    // the words without surrounding punctuation, and as written where that ends in "." (an abbreviation)
    if (!skip) for (const v of span.forms.filter((form, k) => k !== 1 || form.endsWith("."))) literals.add(v);
  }
  // "doctors in dermatology" is not about pediatrics; function words naming a code ("in" for 'IN') name nothing
  const meaningful = spans.filter((span) => !span.functionWords);
  const named = new Set(meaningful.flatMap((span) => [...span.found, ...span.coded].map((f) => `${f.table}\0${f.column}`)));
  const coded = meaningful.flatMap((span) => span.coded.map(({ table, column, value }) => ({ table, column, values: [value] })));
  return { literals: [...literals], columnLiterals: [...few.filter((c) => !named.has(`${c.table}\0${c.column}`)), ...coded] };
}

/** Words a literal taken from the question spans at most. */
const MAX_SPAN_WORDS = 8;

/** English function words: a question span of these alone names no value, though a code may spell the same ('IN', 'IT', 'NO'). */
const FUNCTION_WORDS = new Set(
  "a an and are as at be been by can de did do does for from had has have he her his how i if in is it its many me more most much my no not of on or our she so than that the their them then there these they this those to up us was we were what when where which who whom whose why will with you your".split(
    " ",
  ),
);

function onlyFunctionWords(text: string): boolean {
  return text
    .toLowerCase()
    .split(/\s+/)
    .every((w) => FUNCTION_WORDS.has(w));
}

/** Distinct values a column holds at most for all of them to be offered as literals (codes, categories). */
const FEW_VALUES = 10;

/**
 * Runs of up to {@link MAX_SPAN_WORDS} whitespace-separated words of `text` (words `start` to
 * `end` − 1), each as its forms: without surrounding punctuation, as written, and (where it ends
 * so) without a final `'s`; `quoted`, with its quotes but not the sentence's closing punctuation,
 * is only looked up among the stored values (a title stored as `"Crash"`).
 */
function wordSpans(text: string): { start: number; end: number; forms: string[]; quoted?: string }[] {
  const words = text.split(/\s+/).filter((w) => w.length > 0);
  const out: { start: number; end: number; forms: string[]; quoted?: string }[] = [];
  for (let i = 0; i < words.length; i++) {
    for (let j = i + 1; j <= Math.min(words.length, i + MAX_SPAN_WORDS); j++) {
      const span = words.slice(i, j).join(" ");
      const bare = span.replace(/^[("'“‘]+|[)?.,!;:"'”’]+$/gu, "");
      if (!bare) continue;
      const quoted = span.replace(/[?.,!;:]+$/u, "");
      const forms = [bare, span, ...(/'s$/i.test(bare) ? [bare.slice(0, -2)] : [])];
      out.push({ start: i, end: j, forms, ...(quoted !== bare && quoted !== span ? { quoted } : {}) });
    }
  }
  return out;
}

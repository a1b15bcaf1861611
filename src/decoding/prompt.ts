/**
 * The default prompt source of the decoder: the database's schema text (src/sql's schema prompt)
 * and the values that words of the question match (src/sql's value index), cached per database,
 * turned into a prompt of the requested family; plus the schema's identifier grammar for
 * constrained decoding.
 */
import {
  buildSegmentGrammars,
  reexProfile,
  type BuiltPrompt,
  type ModelProfile,
  type PromptFamily,
  type SchemaNames,
  type SegmentGrammars,
} from "../agent/index.js";
import { statSync } from "node:fs";
import {
  cachedSchema,
  dialectOf,
  formatMatchedValues,
  loadSchema,
  OffThread,
  schemaPrompt,
  sourceFor,
  valueIndexFile,
  ValueIndex,
  type DatabaseSchema,
  type MatchOptions,
  type SchemaFormat,
  type TokenCounter,
  type ValueMatch,
} from "../sql/index.js";

/** Builds the prompt for one question in a profile's protocol (default `reex`); may be sync or async. */
export type PromptFor = (
  dbPath: string,
  question: string,
  evidence: string | undefined,
  family: PromptFamily,
  profile?: ModelProfile,
) => BuiltPrompt | Promise<BuiltPrompt>;

/** The constrained-decoding grammars for one database, family and profile (default `reex`); may be sync or async. */
export type GrammarFor = (dbPath: string, family: PromptFamily, profile?: ModelProfile) => SegmentGrammars | Promise<SegmentGrammars>;

/** How the default prompt builder reads a database. */
export interface PromptBuilderOptions {
  /** Folder of value-index files. Default ".reex/indexes". */
  indexDir?: string;
  /** Match question words against stored values. Default true. */
  matchValues?: boolean;
  /** Matched values shown at most. Default 10. */
  matchLimit?: number;
  /** Schema text token budget (over it, tables are ranked by the question and the prefix stops being shared). Default 2048 (the decoder passes a quarter of the context: the estimate is ≈ characters / 4, and small tokenizers spend more). */
  schemaTokenBudget?: number;
  /** Token counter for the budget. Default ≈ characters / 4. */
  countTokens?: TokenCounter;
  /** Default the profile's (`codes` for reex and generic, CREATE TABLE statements for the others). */
  schemaFormat?: SchemaFormat;
  /** Value indexes kept open. Default 32. */
  maxOpenIndexes?: number;
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

  const promptFor: PromptFor = async (dbPath, question, evidence, family, profile = reexProfile) => {
    const large = isLarge(dbPath);
    const schema = cachedSchema(dbPath) ?? (large ? undefined : loadSchema(dbPath));
    const text = evidence ? `${question} ${evidence}` : question;
    const matches = options.matchValues === false ? [] : await matchValues(dbPath, text, large, { limit: options.matchLimit ?? 10 });
    const textOptions = { question: text, matches, format: options.schemaFormat ?? profile.schemaFormat, tokenBudget: budget };
    const schemaText =
      (!schema || schema.tables.length > OFF_THREAD_TABLES) && !options.countTokens
        ? await (off ??= new OffThread()).schemaText(dbPath, textOptions)
        : schemaPrompt(schema ?? loadSchema(dbPath), { ...textOptions, ...(options.countTokens ? { countTokens: options.countTokens } : {}) }).text;
    return profile.buildPrompt({
      family,
      schema: schemaText,
      question,
      ...(matches.length > 0 ? { matchedValues: formatMatchedValues(matches) } : {}),
      ...(evidence ? { evidence } : {}),
      dialect: dialectOf(dbPath),
    });
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

/** The default {@link GrammarFor}: `buildSegmentGrammars` over the whole schema in the profile's tags, cached per database version, family and profile. */
export function createGrammarBuilder(): GrammarFor {
  const cache = new Map<string, { schema: DatabaseSchema; grammars: SegmentGrammars }>();
  return (dbPath, family, profile = reexProfile) => {
    const schema = loadSchema(dbPath);
    const key = `${profile.id}\0${family}\0${dbPath}`;
    const hit = cache.get(key);
    if (hit && hit.schema === schema) return hit.grammars;
    const grammars = buildSegmentGrammars(schemaNames(schema), family, { skeleton: profile });
    cache.delete(key);
    cache.set(key, { schema, grammars });
    while (cache.size > 64) cache.delete(cache.keys().next().value!);
    return grammars;
  };
}

/**
 * The default prompt source of the decoder: the database's schema text (src/sql's schema prompt)
 * and the values that words of the question match (src/sql's value index), cached per database,
 * turned into a prompt of the requested family; plus the schema's identifier grammar for
 * constrained decoding.
 */
import { buildSegmentGrammars, reexProfile, type BuiltPrompt, type ModelProfile, type PromptFamily, type SchemaNames, type SegmentGrammars } from "../agent/index.js";
import { dialectOf, formatMatchedValues, loadSchema, schemaPrompt, sourceFor, valueIndexFile, ValueIndex, type DatabaseSchema, type SchemaFormat, type TokenCounter } from "../sql/index.js";

/** Builds the prompt for one question in a profile's protocol (default `reex`); may be sync or async. */
export type PromptFor = (dbPath: string, question: string, evidence: string | undefined, family: PromptFamily, profile?: ModelProfile) => BuiltPrompt | Promise<BuiltPrompt>;

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
  /** Schema text token budget (over it, tables are ranked by the question and the prefix stops being shared). Default no limit. */
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

  const indexFor = (key: string): ValueIndex => {
    // a source that is not a SQLite file matches against its bounded snapshot of text values
    const dbPath = sourceFor(key)?.valuesPath ?? key;
    const file = valueIndexFile(dbPath, indexOptions);
    let index = indexes.get(file);
    if (index) {
      indexes.delete(file);
    } else {
      index = ValueIndex.open(dbPath, indexOptions);
    }
    indexes.set(file, index);
    while (indexes.size > maxOpen) {
      const [oldest, idx] = indexes.entries().next().value!;
      indexes.delete(oldest);
      idx.close();
    }
    return index;
  };

  const promptFor: PromptFor = (dbPath, question, evidence, family, profile = reexProfile) => {
    const schema = loadSchema(dbPath);
    const text = evidence ? `${question} ${evidence}` : question;
    const matches = options.matchValues === false ? [] : indexFor(dbPath).match(text, { limit: options.matchLimit ?? 10 });
    const schemaText = schemaPrompt(schema, {
      question: text,
      matches,
      format: options.schemaFormat ?? profile.schemaFormat,
      ...(options.schemaTokenBudget !== undefined ? { tokenBudget: options.schemaTokenBudget } : {}),
      ...(options.countTokens ? { countTokens: options.countTokens } : {}),
    }).text;
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

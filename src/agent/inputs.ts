/**
 * From a database file and a question to a built prompt: introspect the schema, match question
 * phrases against stored values, render both through the SQL layer, and hand back the schema's
 * names for constrained decoding.
 */
import type { PromptFamily } from "./types.js";
import { formatMatchedValues, loadSchema, schemaPrompt, type ColumnDescriptions, type SchemaFormat, type TokenCounter, type ValueIndex } from "../sql/index.js";
import type { SchemaNames } from "./grammar.js";
import { buildPrompt, type BuiltPrompt } from "./prompts.js";

/** What {@link preparePrompt} needs besides the database path. */
export interface PrepareOptions {
  family: PromptFamily;
  question: string;
  evidence?: string;
  /** The database's open value index; default none (no matched values section). */
  values?: ValueIndex;
  /** Matched values shown at most. Default 10. */
  matchLimit?: number;
  /** Most tokens the schema section may take; default no limit (a limit ranks tables by the question, so the shared prefix then varies per question). */
  schemaTokenBudget?: number;
  /** Token counter for the budget. Default ≈ characters / 4. */
  countTokens?: TokenCounter;
  /** Default "codes" (`table.column (type | …)` lines). */
  format?: SchemaFormat;
  /** Column comments to show. Default none. */
  descriptions?: ColumnDescriptions;
}

/** A built prompt plus the database's names (for `buildGrammar` / `checkIdentifiers`) and what the schema section left out. */
export interface PreparedPrompt extends BuiltPrompt {
  names: SchemaNames;
  omittedTables: string[];
  omittedColumns: string[];
}

/** Builds the prompt for a question on a database file. Throws DB_FILE_NOT_FOUND / DB_INVALID. */
export function preparePrompt(dbPath: string, options: PrepareOptions): PreparedPrompt {
  const schema = loadSchema(dbPath, options.descriptions ? { descriptions: options.descriptions } : {});
  const matches = options.values?.match(options.question, { limit: options.matchLimit ?? 10 }) ?? [];
  const section = schemaPrompt(schema, {
    question: options.question,
    matches,
    ...(options.schemaTokenBudget !== undefined ? { tokenBudget: options.schemaTokenBudget } : {}),
    ...(options.countTokens ? { countTokens: options.countTokens } : {}),
    ...(options.format ? { format: options.format } : {}),
  });
  const built = buildPrompt({
    family: options.family,
    schema: section.text,
    matchedValues: formatMatchedValues(matches),
    question: options.question,
    ...(options.evidence !== undefined ? { evidence: options.evidence } : {}),
  });
  return {
    ...built,
    names: { tables: schema.tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) },
    omittedTables: section.omittedTables,
    omittedColumns: section.omittedColumns,
  };
}

/** The prompt side of the SQL layer: schema introspection and text, matched values, EX comparison, entities. */
export {
  loadSchema,
  cachedSchema,
  clearSchemaCache,
  withDescriptions,
  renderSchema,
  promptName,
  type ColumnInfo,
  type ForeignKey,
  type TableInfo,
  type DatabaseSchema,
  type ColumnDescriptions,
  type SchemaOptions,
  type SchemaFormat,
} from "./schema.js";
export { fingerprintDatabase, openReadOnly, type DatabaseFingerprint } from "./schema-db.js";
export { schemaPrompt, approxTokens, type SchemaPrompt, type SchemaPromptOptions, type TokenCounter } from "./schema-prompt.js";
export { OffThread } from "./offload.js";
export { ValueIndex, valueIndexFile, formatMatchedValues, type ColumnValues, type ValueMatch, type ValueIndexOptions, type MatchOptions } from "./values.js";
export { exBird, exSpider, exRefined, resultKey, cellKey, hasOrderBy, type ResultRows } from "./compare.js";
export { extractEntities, type Entities, type EntitySchema } from "./entities.js";

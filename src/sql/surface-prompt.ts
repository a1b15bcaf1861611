/** The prompt side of the SQL layer: schema introspection and text, matched values, EX comparison, entities. */
export { loadSchema, cachedSchema, type ColumnInfo, type TableInfo, type DatabaseSchema, type ColumnDescriptions, type SchemaFormat } from "./schema.js";
export { schemaPrompt, approxTokens, relevanceTokens, type TokenCounter } from "./schema-prompt.js";
export { OffThread } from "./offload.js";
export { ValueIndex, valueIndexFile, formatMatchedValues, type ColumnValues, type ValueMatch, type MatchOptions } from "./values.js";
export { exBird, exSpider, exRefined, resultKey, cellKey, hasOrderBy, type ResultRows } from "./compare.js";
export { extractEntities } from "./entities.js";

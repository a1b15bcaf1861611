/**
 * Real questions made executable for training: WikiSQL's tables and Advising's schema rebuilt as
 * SQLite databases with rows, Spider's schemas populated and given template questions, their SQL
 * rewritten to SQLite and checked by running it, and SFT traces in the synthetic data's format.
 * See docs/real-data.md.
 */
export {
  REAL_DATA_VERSION,
  REAL_FILES,
  REAL_SOURCES,
  generateRealData,
  realDbPath,
  realRecord,
  type RealDataManifest,
  type RealDataOptions,
  type RealItem,
  type RealSource,
  type RealSourceStats,
} from "./build.js";
export { defaultDataDir, readAdvisingEntries, readSchemaCsv, readWikiSqlEntries, type RealEntry, type RealSentence, type RealSplit } from "./source.js";
export {
  WIKI_COLUMNS,
  WIKI_OTHER_ROWS,
  buildWikiTable,
  checkWikiTable,
  fillText,
  parseWikiSql,
  quoteText,
  sqlName,
  typedLiteral,
  wikiColumnName,
  wikiNeighbours,
  wikiTableName,
  wikiDatabase,
  wikiGoldSql,
  wikiPools,
  wikiQuestions,
  type WikiAgg,
  type WikiColumn,
  type WikiDropReason,
  type WikiItem,
  type WikiOp,
  type WikiPools,
  type WikiQuestion,
  type WikiTable,
  type WikiTableNames,
} from "./wikisql.js";
export {
  ADVISING_DB_ID,
  ADVISING_FOREIGN_KEYS,
  advisingDatabase,
  advisingRows,
  advisingSql,
  buildAdvising,
  detokenize,
  readAdvisingSchema,
  type AdvisingColumn,
  type AdvisingItem,
  type AdvisingSchema,
} from "./advising.js";
export {
  SPIDER_DEV_EVERY,
  SPIDER_HELD_OUT,
  buildSpider,
  inferForeignKeys,
  readSpiderSchemas,
  spiderSynthDb,
  type SpiderColumn,
  type SpiderItem,
  type SpiderSchema,
} from "./spider.js";

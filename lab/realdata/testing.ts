/**
 * The pieces of lab/realdata that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { realDbPath, realSecondDrawPath, type RealItem } from "./build.js";
export { defaultDataDir, readAdvisingEntries, type RealEntry } from "./source.js";
export {
  buildWikiTable,
  checkWikiTable,
  parseWikiSql,
  wikiColumnName,
  wikiTableName,
  wikiDatabase,
  wikiPools,
  wikiQuestions,
  wikiSecondDraw,
} from "./wikisql.js";
export { advisingSql } from "./advising.js";
export { inferForeignKeys, readSpiderSchemas, spiderSynthDb } from "./spider.js";

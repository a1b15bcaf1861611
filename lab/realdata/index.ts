/**
 * Real questions made executable for training: WikiSQL's tables and Advising's schema rebuilt as
 * SQLite databases with rows, Spider's schemas populated and given template questions, their SQL
 * rewritten to SQLite and checked by running it, and SFT traces in the synthetic data's format.
 * See docs/real-data.md.
 */
export { REAL_FILES, REAL_SOURCES, generateRealData, type RealDataManifest, type RealSource } from "./build.js";
export type { WikiTableNames } from "./wikisql.js";

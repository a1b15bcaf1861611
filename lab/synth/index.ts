/**
 * Synthetic training data for a tiny starter policy: many small SQLite databases over domain
 * templates with value encodings a model cannot guess without probing, BIRD-layout questions of
 * graded difficulty, and cold-start SFT traces for the three prompt families. See
 * docs/synthetic-data.md.
 */
export { CITIES, COUNTRIES, DEFAULT_DEV_DOMAINS, FIRST_NAMES, LAST_NAMES, type ColumnTemplate, type TableTemplate } from "./domains.js";
export { generateRows, writeSynthDb, type ColumnInst, type Encoding, type SynthDb, type TableInst } from "./generate.js";
export { buildQuestions, type Lookup, type SynthQuestion } from "./questions.js";
export { buildTraces, ServerPromptParts, type SftRecord, type TraceItem } from "./traces.js";
export { approxRecordTokens, birdRecord, generateSynth, synthDbPath, type SynthResult } from "./build.js";

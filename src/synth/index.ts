/**
 * Synthetic training data for a tiny starter policy: many small SQLite databases over domain
 * templates with value encodings a model cannot guess without probing, BIRD-layout questions of
 * graded difficulty, and cold-start SFT traces for the three prompt families. See
 * docs/synthetic-data.md.
 */
export {
  CITIES,
  COUNTRIES,
  DEFAULT_DEV_DOMAINS,
  DOMAINS,
  FIRST_NAMES,
  LAST_NAMES,
  LOOKALIKE_DOMAINS,
  domainByName,
  type CategoryValue,
  type City,
  type ColumnTemplate,
  type Country,
  type DomainTemplate,
  type TableTemplate,
} from "./domains.js";
export {
  SYNTH_PAGE_SIZE,
  boolPair,
  ddlOf,
  formatDate,
  generateDatabase,
  generateRows,
  instantiate,
  storedValue,
  writeSynthDb,
  type ColumnInst,
  type Encoding,
  type NatRow,
  type NatValue,
  type SynthDb,
  type TableInst,
} from "./generate.js";
export {
  QuestionBuilder,
  TEMPLATE_DIFFICULTY,
  buildQuestions,
  niceNumber,
  nonTrivial,
  numberInWords,
  predicateOf,
  sqlString,
  type Lookup,
  type SynthQuestion,
  type TemplateKind,
} from "./questions.js";
export {
  CHECK_RUN_SHARE,
  MAX_TRACE_PROBES,
  RECOVERY_SHARE,
  TRACE_FAMILIES,
  TRACE_FEEDBACK,
  buildTraces,
  directResponse,
  executionAwareResponse,
  mappingText,
  schemaText,
  ServerPromptParts,
  standardResponse,
  traceProbes,
  type SftRecord,
  type SynthItem,
  type TraceItem,
} from "./traces.js";
export {
  SYNTH_FILES,
  SYNTH_VERSION,
  approxRecordTokens,
  birdRecord,
  generateSynth,
  synthDbPath,
  type SynthDatabaseInfo,
  type SynthManifest,
  type SynthOptions,
  type SynthResult,
} from "./build.js";

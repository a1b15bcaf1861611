/**
 * The pieces of lab/starter that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { buildStarterModel } from "./model.js";
export { encodeResponse, openTokenizer, pretokenize, readJsonl, splitResponse, tokenizeRecord, type StarterTokenizer } from "./pretokenize.js";
export { starterGrpoConfig } from "./grpo.js";
export { ggufInfo, runSft, type SftEvent, sftRequest } from "./train.js";
export { countWords, learnMergesFast, trainTokenizer, type StarterVocabulary } from "./tokenizer.js";
export { corpusTexts, EVAL_FILES, REAL_EVAL_FILES, REPORT_FILE } from "./work-files.js";

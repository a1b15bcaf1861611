/**
 * The pieces of lab/synth that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export { DOMAINS, LOOKALIKE_DOMAINS } from "./domains.js";
export { formatDate } from "./generate.js";
export { niceNumber, numberInWords, predicateOf, sqlString } from "./questions.js";
export { MAX_TRACE_PROBES, TRACE_FAMILIES, type SynthItem } from "./traces.js";
export { SYNTH_FILES } from "./build.js";

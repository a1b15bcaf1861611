/**
 * The pieces of src/decoding that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts.
 */
export type { Candidate } from "./types.js";
export { VOTE_RULE } from "./vote.js";
export { decoderDefaults, type Decoder, type DecoderDeps } from "./decode.js";
export type { GrammarFor } from "./prompt.js";
export { splitQuota } from "./tree.js";
export { CONFIDENCE_MODEL, VOTE_CONFIDENCE_MODEL, assessAnswer, ungroundedShare } from "./confidence.js";

/**
 * The pieces of src/policy that only its tests import. No folder under src/ imports this entry point
 * (docs/architecture.md); the runtime surface is ./index.ts, model-building tooling ./tooling.ts.
 */
export type { StartOptions } from "./types.js";
export type { LlamaPolicyOptions } from "./llama.js";
export { SCRIPTED_EOS, type Script, type ScriptContext, type ScriptedPolicyOptions } from "./scripted.js";
export { exactTextGrammar } from "./grammar.js";
export { gguf } from "./gguf.js";
export { resolveModelUri } from "./download.js";

/**
 * src/policy's second entry point: tooling that builds or reads models (the tiny test-model writer,
 * the BPE vocabulary, the GGUF encoder, a model's tokenizer) and the scripted policy for unit tests.
 * The runtime seam is ./index.ts; which folders may import this one: docs/architecture.md.
 */
export { ScriptedPolicy } from "./scripted.js";
export { gbnfLiteral } from "./grammar.js";
export {
  buildTinyModel,
  byteToUnicode,
  CHATML_SPECIALS,
  GPT2_PRETOKENIZE,
  llamaMetadata,
  llamaTensors,
  vocabularyFromMerges,
  writeFileAtomic,
  type ChatmlVocabulary,
} from "./tiny-model.js";
export { encodeGguf } from "./gguf.js";
export { openModelTokenizer, type ModelTokenizer } from "./tokenizer.js";

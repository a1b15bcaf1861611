/**
 * src/policy's second entry point: tooling that builds or reads models (the tiny test-model writer,
 * the BPE learner, the GGUF encoder, a model's tokenizer) and the scripted policy for unit tests.
 * The runtime seam is ./index.ts; which folders may import this one: docs/architecture.md.
 */
export { ScriptedPolicy, SCRIPTED_EOS, type Script, type ScriptContext, type ScriptedPolicyOptions } from "./scripted.js";
export { exactTextGrammar, gbnfLiteral } from "./grammar.js";
export {
  buildTinyLora,
  buildTinyModel,
  byteToUnicode,
  CHATML_SPECIALS,
  CHATML_TEMPLATE,
  GPT2_PRETOKENIZE,
  learnMerges,
  llamaMetadata,
  llamaTensors,
  vocabularyFromMerges,
  writeFileAtomic,
  type ChatmlSpecial,
  type ChatmlVocabulary,
  type LlamaInit,
  type LlamaShape,
  type TinyLoraOptions,
  type TinyModelOptions,
} from "./tiny-model.js";
export { encodeGguf, gguf, type GgufContents, type GgufTensor, type GgufValue } from "./gguf.js";
export { openModelTokenizer, type ModelTokenizer } from "./tokenizer.js";
export { piecesOf, tokenizePieces } from "./prompt.js";

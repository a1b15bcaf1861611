/**
 * The policy: the language model behind every trajectory. Decoding, agent, server and training code
 * import from here and never from node-llama-cpp.
 */
export type {
  ChatMessage,
  GenerateOptions,
  GenerateResult,
  ModelMetadata,
  Policy,
  PolicyInfo,
  PromptPart,
  PromptSpec,
  StopReason,
  TokenRecord,
  TokenUsage,
  Trajectory,
} from "./types.js";
export { createLlamaPolicy, type LlamaPolicyOptions } from "./llama.js";
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
  seededRandom,
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
export { createRemotePolicy, type RemotePolicyOptions } from "./remote/index.js";
export { piecesOf, tokenizePieces } from "./prompt.js";
export { modelDisplayName } from "./info.js";

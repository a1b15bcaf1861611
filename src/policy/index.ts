/**
 * The policy: the language model behind every trajectory. Decoding, agent, server and training code
 * import from here and never from node-llama-cpp.
 */
export type {
  ChatMessage,
  GenerateOptions,
  GenerateResult,
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
export { buildTinyLora, buildTinyModel, CHATML_TEMPLATE, writeFileAtomic, type TinyLoraOptions, type TinyModelOptions } from "./tiny-model.js";
export { encodeGguf, gguf, type GgufContents, type GgufTensor, type GgufValue } from "./gguf.js";
export { createRemotePolicy, type RemotePolicyOptions } from "./remote.js";

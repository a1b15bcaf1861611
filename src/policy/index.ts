/**
 * The policy: the language model behind every trajectory. Decoding, agent, server and training code
 * import from here and never from node-llama-cpp. Model-building and test tooling: ./tooling.ts.
 */
export type {
  ChatMessage,
  GenerateOptions,
  GenerateResult,
  ModelMetadata,
  Policy,
  PolicyInfo,
  PromptSpec,
  StepCost,
  TokenRecord,
  TokenUsage,
  Trajectory,
} from "./types.js";
export { createLlamaPolicy } from "./llama.js";
export { createRemotePolicy } from "./remote/index.js";
export { modelDisplayName } from "./info.js";
export { modelsCacheDir, PACKAGED_MODELS, pullModel } from "./pull.js";

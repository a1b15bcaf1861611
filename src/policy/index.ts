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
  PromptPart,
  PromptSpec,
  StartOptions,
  StepCost,
  StopReason,
  TokenRecord,
  TokenUsage,
  Trajectory,
} from "./types.js";
export { createLlamaPolicy, type LlamaPolicyOptions } from "./llama.js";
export { createRemotePolicy, type RemotePolicyOptions } from "./remote/index.js";
export { modelDisplayName } from "./info.js";
export { modelsCacheDir, PACKAGED_MODELS, pullModel, type PackagedModel, type PullOptions } from "./pull.js";

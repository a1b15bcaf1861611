/**
 * The Policy seam: everything decoding, agent and training code may ask of a language model.
 * Backends: llama.cpp through node-llama-cpp (forks KV state) and a remote OpenAI-compatible
 * completions endpoint (relies on the server's prefix cache). Nothing outside src/policy imports
 * node-llama-cpp.
 */

/** Token accounting for one trajectory (or summed over many). */
export interface TokenUsage {
  /** Tokens in the prompt this trajectory started from (cached prefix included). */
  promptTokens: number;
  /** Tokens this trajectory actually ran through the model (prompt tokens not served from a cache, injected text, sampled tokens). */
  evaluatedTokens: number;
  /** Tokens sampled by the model. */
  generatedTokens: number;
}

/**
 * The token-level record of a trajectory after its prompt: every token appended or sampled, in
 * order. `sampled[i]` is 1 for a token the model sampled and 0 for injected text (executor
 * `<result>` blocks); `logprobs[i]` is the sampling log-probability (0 for injected tokens).
 */
export interface TokenRecord {
  tokens: number[];
  sampled: (0 | 1)[];
  logprobs: number[];
}

/** How to sample one segment. */
export interface GenerateOptions {
  /** Generation ends right after the first of these strings is produced (it stays in the text). */
  stop: string[];
  /** Most tokens to sample in this call. */
  maxTokens: number;
  /** 0 means greedy. Default 0. */
  temperature?: number;
  /** Nucleus sampling threshold. Default 1. */
  topP?: number;
  /** Seed for reproducible sampling; default random. */
  seed?: number;
  /** GBNF grammar text that constrains this segment; default none. */
  grammar?: string;
  /** Aborting ends generation promptly with `stopReason: "aborted"`. */
  signal?: AbortSignal;
  /** Called with each decoded piece of text as it is sampled. */
  onText?: (text: string) => void;
}

/** Why a generate call ended. */
export type StopReason = "stop" | "eos" | "maxTokens" | "aborted";

/** The outcome of one generate call. */
export interface GenerateResult {
  text: string;
  tokens: number[];
  logprobs: number[];
  stopReason: StopReason;
  /** The stop string that matched, when `stopReason` is "stop". */
  stop?: string;
}

/** One path of generation with its own KV state. Release it when done. */
export interface Trajectory {
  readonly id: string;
  /** Samples until a stop string, end of turn, `maxTokens`, or abort. */
  generate(options: GenerateOptions): Promise<GenerateResult>;
  /** Tokenises and evaluates text that the model did not sample (marked 0 in the record). */
  append(text: string): Promise<{ tokens: number[] }>;
  /** A new trajectory that starts from this one's state without re-evaluating it. */
  fork(): Promise<Trajectory>;
  /** Everything appended or sampled after the prompt. */
  readonly record: TokenRecord;
  /** The prompt token ids this trajectory started from. */
  readonly promptTokens: readonly number[];
  readonly usage: TokenUsage;
  /** Frees the trajectory's sequence; safe to call twice. */
  release(): Promise<void>;
}

/** A prompt split so that its first part can be cached and shared across requests. */
export interface PromptSpec {
  /** Text shared by many requests (system message + schema); cached per policy. */
  prefix: string;
  /** The rest (question, hint, assistant header). */
  suffix: string;
}

/** A chat message for rendering through the model's chat template. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Facts about a loaded policy, for /readyz, logs and reports. */
export interface PolicyInfo {
  backend: "llama" | "remote" | "scripted";
  model: string;
  /** The accelerator actually used: "cuda", "metal", "vulkan" or "cpu". */
  device: string;
  contextSize: number;
  /** Trajectories that can be alive at once. */
  maxSequences: number;
}

/** A language model that trajectories can be started from. */
export interface Policy {
  readonly info: PolicyInfo;
  /**
   * Renders messages through the model's chat template and splits the result so that
   * `prefix` ends where `messages[splitAt]`'s own content starts differing across requests.
   * Returns a prompt ending with the assistant turn opened.
   */
  renderChat(messages: ChatMessage[], options?: { sharedPrefix?: string }): PromptSpec;
  /** Starts a trajectory from a prompt, reusing a cached prefix when one matches. */
  start(prompt: PromptSpec, options?: { signal?: AbortSignal }): Promise<Trajectory>;
  /** Token ids for text (no special tokens added). */
  tokenize(text: string): number[];
  /** Text for token ids. */
  detokenize(tokens: readonly number[]): string;
  /** Live trajectories (sequences in use), for tests and metrics. */
  liveTrajectories(): number;
  /** Loads new weights or LoRA adapters without restarting the process. */
  reload?(options: { model?: string; lora?: string[] }): Promise<void>;
  close(): Promise<void>;
}

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
  /** Tokens sampled by the model. A fork starts at 0, so usage summed over a tree counts each token once. */
  generatedTokens: number;
  /** Tokens drafted by speculative decoding and verified (present only where drafting is on; a fork starts at 0). */
  draftedTokens?: number;
  /** Drafted tokens the model sampled as drafted, each one generated without a decode step of its own. */
  acceptedTokens?: number;
  /** Decode steps (forward passes) generation took fewer than plain decoding would have. */
  forwardPassesSaved?: number;
}

/**
 * The token-level record of a trajectory after its prompt: every token appended or sampled, in
 * order. `sampled[i]` is 1 for a token the model sampled and 0 for injected text (executor
 * `<result>` blocks); `logprobs[i]` is the sampling log-probability (0 for injected tokens, NaN for tokens sampled with `logprobs: false`).
 * A fork inherits its parent's record up to the fork.
 */
export interface TokenRecord {
  tokens: number[];
  sampled: (0 | 1)[];
  logprobs: number[];
}

/** How to sample one segment. */
export interface GenerateOptions {
  /**
   * Generation ends with the token that completes the first of these strings in the decoded text
   * (it stays in the text; a stop string split across tokens is found too).
   */
  stop: string[];
  /** Most tokens to sample in this call; also ends early when the context window is full. */
  maxTokens: number;
  /** 0 means greedy. Default 0. */
  temperature?: number;
  /** Nucleus sampling threshold; keep 1 for training rollouts so logprobs are the full policy's. Default 1. */
  topP?: number;
  /** Seed for reproducible sampling (same seed, same state, same tokens); default a fresh random seed per call. */
  seed?: number;
  /** GBNF grammar text that constrains this segment; default none. */
  grammar?: string;
  /**
   * A check on the segment's text so far, asked with each drawn token's text appended: a token
   * that makes it false is drawn again without it (up to {@link MAX_REDRAWS} times, then kept and
   * the check dropped for the rest of the call; so too after {@link MAX_REFUSALS} refusals in all). Needs `grammar`, on the direct decode path;
   * elsewhere it is not applied and `GenerateResult.admitted` says so. Default none.
   */
  admit?: (text: string) => boolean;
  /**
   * With `admit`: whether `admit` could refuse a token after this text (false: the next token is
   * drawn without asking it, as without `admit`). Default: it always could.
   */
  admitWatch?: (text: string) => boolean;
  /** Aborting ends generation promptly with `stopReason: "aborted"`. */
  signal?: AbortSignal;
  /** Called with each decoded piece of text as it is sampled (incomplete UTF-8 characters held back). */
  onText?: (text: string) => void;
  /**
   * Keep sampling past end-of-turn tokens (they stay in `tokens` and the text decodes them to ""), so
   * that exactly `maxTokens` are sampled unless a stop string or abort ends it first: for benchmarks. Default false.
   */
  ignoreEos?: boolean;
  /**
   * Compute each sampled token's exact log-probability. llama.cpp sorts the whole vocabulary for
   * it, every token (on a 152k vocabulary that costs more than the decode of a small model); when
   * false, `logprobs` holds NaN for the sampled tokens. The trainer needs them; a single greedy
   * answer does not. Behind a `grammar`, on the direct decode path, a token the model drew and the
   * grammar allowed has the model's log-probability (before the grammar), and one the grammar made
   * it draw again has the grammar-masked one; on node-llama-cpp's `evaluate` path every token has
   * the masked one. Default true.
   */
  logprobs?: boolean;
}

/** Why a generate call ended. */
export type StopReason = "stop" | "eos" | "maxTokens" | "aborted";

/** The outcome of one generate call. */
export interface GenerateResult {
  /**
   * Exactly the decoded `tokens` (control tokens such as end-of-turn decode to ""). When a stop
   * string ends inside a token, the text goes on to that token's end.
   */
  text: string;
  /** Sampled token ids, an end-of-turn token included. */
  tokens: number[];
  /**
   * Per token, the natural log of its probability under the distribution it was drawn from:
   * softmax(logits / temperature) renormalised over the grammar-allowed tokens inside the top-p
   * nucleus (llama.cpp picks the nucleus before tempering). At temperature 1 and topP 1 this is the
   * policy's own log π(token | context), what a GRPO importance ratio needs. For greedy decoding
   * (temperature 0) it is the log-probability under the untempered softmax (grammar mask applied).
   */
  logprobs: number[];
  stopReason: StopReason;
  /** The stop string that matched, when `stopReason` is "stop". */
  stop?: string;
  /**
   * With `admit`: "decoder" when every token passed it, "fallback" when a token was kept after
   * {@link MAX_REDRAWS} refusals, "unavailable" when this path cannot apply it.
   */
  admitted?: "decoder" | "fallback" | "unavailable";
  /** With `admit`: tokens drawn again because the check refused them. */
  redrawn?: number;
}

/** Draws one position may take when `GenerateOptions.admit` refuses, before the last is kept. */
export const MAX_REDRAWS = 8;

/**
 * Refusals one generate call may meet in all before `GenerateOptions.admit` is dropped for the rest
 * of it: a model that keeps reaching for names that cannot bind would otherwise wander to its token
 * limit instead of finishing SQL that fails (and that a probe's error then corrects).
 */
export const MAX_REFUSALS = 24;

/** One path of generation with its own KV state. Release it when done. */
export interface Trajectory {
  readonly id: string;
  /** Samples until a stop string, end of turn, `maxTokens`, or abort. Calls on one trajectory run one at a time. */
  generate(options: GenerateOptions): Promise<GenerateResult>;
  /**
   * Tokenises and evaluates text that the model did not sample (marked 0 in the record). Control-token
   * spellings in it stay plain text, so executor output cannot end the turn.
   */
  append(text: string): Promise<{ tokens: number[] }>;
  /**
   * A new trajectory that starts from this one's state without re-evaluating it. Fails with
   * CONTEXT_EXHAUSTED when no sequence is free (waiting could deadlock a caller holding them all).
   */
  fork(): Promise<Trajectory>;
  /**
   * Drops everything after the first `length` tokens of the record (KV state included), so the
   * trajectory continues as if they had never been written. Absent where the backend cannot (remote).
   */
  rewind?(length: number): Promise<void>;
  /** Everything appended or sampled after the prompt. */
  readonly record: TokenRecord;
  /** The prompt token ids this trajectory started from. */
  readonly promptTokens: readonly number[];
  readonly usage: TokenUsage;
  /** Frees the trajectory's sequence; safe to call twice. */
  release(): Promise<void>;
}

/**
 * A piece of rendered prompt text. `special: true` marks chat-template text whose control-token
 * spellings (`<|im_start|>`, …) become control tokens; message content is `special: false` and is
 * tokenised as plain text, so a question containing `<|im_end|>` cannot forge a turn boundary.
 */
export interface PromptPart {
  text: string;
  special: boolean;
}

/**
 * A prompt split so that its first part can be cached and shared across requests. Prompt text is
 * tokenised with control-token spellings recognised, except inside `parts` marked plain.
 */
export interface PromptSpec {
  /** Text shared by many requests (system message + schema); cached per policy. */
  prefix: string;
  /** The rest (question, hint, assistant header). */
  suffix: string;
  /**
   * How `renderChat` built `prefix` and `suffix`. Used only when each list joins to exactly its
   * string, so editing the strings simply drops the plain-text protection. Default none.
   */
  parts?: { prefix: PromptPart[]; suffix: PromptPart[] };
}

/** How {@link Policy.start} starts a trajectory. */
export interface StartOptions {
  /** Aborts a start still waiting for a free sequence (CANCELLED). Default none. */
  signal?: AbortSignal;
  /**
   * Whether the trajectory's text (and its forks') is kept for later trajectories on the same
   * prompt prefix to draft from, where the policy keeps a draft history; false still drafts from
   * what is kept (a benchmark's repeats, a replayed request). Default true.
   */
  remember?: boolean;
}

/** A chat message for rendering through the model's chat template. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** What a model says about itself (GGUF metadata, or what a serving engine reports); every field optional. */
export interface ModelMetadata {
  /** `general.name`; for a remote endpoint, the served model id when it is an alias of the served file. */
  name?: string;
  /** `general.basename`. */
  basename?: string;
  /** `general.finetune`. */
  finetune?: string;
  /** The model file's name (no folders), or the model id a remote endpoint serves. */
  file?: string;
  /** `tokenizer.chat_template`. */
  chatTemplate?: string;
  /** The file names of the LoRA adapters applied (a `*-reex-lora.gguf` adapter makes a base model a reex model). Default none. */
  adapters?: string[];
}

/** Facts about a loaded policy, for /readyz, logs and reports. */
export interface PolicyInfo {
  backend: "llama" | "remote" | "scripted";
  model: string;
  /** What the model says about itself, read for profile detection. Default {}. */
  metadata?: ModelMetadata;
  /** The accelerator actually used: "cuda", "metal", "vulkan" or "cpu". */
  device: string;
  contextSize: number;
  /** Trajectories that can be alive at once. */
  maxSequences: number;
  /** LoRA adapter files applied, in order. Default []. */
  lora?: readonly string[];
  /** The text of the model's end-of-turn token (`<|im_end|>`, `<end_of_turn>`), read off its vocabulary; absent where unknown (remote, scripted). */
  endOfTurn?: string;
  /** llama.cpp's flash attention as the context was created ("auto": where the device supports it; the llama backend only). */
  flashAttention?: "auto" | boolean;
}

/** A decode step size's cost: the lower median wall time of its last 15 steps, and the steps seen. */
export interface StepCost {
  tokens: number;
  ms: number;
  steps: number;
}

/** A language model that trajectories can be started from. */
export interface Policy {
  readonly info: PolicyInfo;
  /**
   * Renders messages through the model's chat template, ending with the assistant turn opened (a
   * final assistant message is continued, not closed). `prefix` ends right after the first occurrence
   * of `sharedPrefix` in the rendered text; without it (or when it is not found), right before the
   * last message's content (after its turn header). Fills `parts`.
   */
  renderChat(messages: ChatMessage[], options?: { sharedPrefix?: string }): PromptSpec;
  /**
   * Starts a trajectory from a prompt, reusing a cached prefix when one matches. Waits (abortable
   * by `signal`, then CANCELLED) while every sequence is held by other trajectories.
   */
  start(prompt: PromptSpec, options?: StartOptions): Promise<Trajectory>;
  /** Token ids for text as a prompt would tokenise it (control-token spellings recognised, no BOS added). */
  tokenize(text: string): number[];
  /** Text for token ids (control tokens decode to their spelling). */
  detokenize(tokens: readonly number[]): string;
  /** Live trajectories (sequences in use, the prefix cache not counted), for tests and metrics. */
  liveTrajectories(): number;
  /**
   * Decode batches run on the model's context since it was loaded (one batch decodes the next token
   * of every trajectory generating together), for benchmarks and tests; undefined where not counted.
   */
  decodeBatches?(): number | undefined;
  /**
   * The decode step's cost by the tokens a step evaluated, as drafting sizes its drafts by, smallest
   * size first, for benchmarks; undefined where not measured.
   */
  decodeStepCosts?(): StepCost[] | undefined;
  /**
   * Loads new weights or LoRA adapters without restarting the process (omitted fields keep their
   * value; `lora: []` removes adapters). Live trajectories become unusable (POLICY_ERROR); starts
   * made during the reload wait for it; the prefix cache is cleared.
   */
  reload?(options: { model?: string; lora?: string[] }): Promise<void>;
  /** Frees everything; later calls fail. Safe to call twice. */
  close(): Promise<void>;
}

/**
 * A deterministic Policy for unit tests of the agent, decoding, server and training code: the
 * "model" is a script, every character is one token (its code point), and stop strings, maxTokens,
 * abort, forks, the prefix cache and usage behave like the llama backend's.
 */
import { ReexError } from "../errors/index.js";
import { contentOffset, mergeParts, promptFromParts } from "./prompt.js";
import { StopMatcher } from "./stop.js";
import type {
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

/** What a script sees when asked for the next chunk. */
export interface ScriptContext {
  /** The whole prompt (prefix + suffix). */
  prompt: string;
  /** Everything after the prompt so far: sampled and appended text. */
  text: string;
  /** 0-based index of this generate call across the policy. */
  call: number;
  /** The trajectory asking. */
  trajectoryId: string;
  options: GenerateOptions;
}

/**
 * The model's behaviour: a function returning what it would write next if nothing stopped it, or a
 * list of such outputs used one per generate call in call order ("" once the list runs out).
 */
export type Script = ((context: ScriptContext) => string) | readonly string[];

/** Options of {@link ScriptedPolicy}. */
export interface ScriptedPolicyOptions {
  /** The model name reported in `info`. Default "scripted". */
  model?: string;
  /** Trajectories alive at once; `start` waits and `fork` fails beyond it. Default 64. */
  maxSequences?: number;
  /** Characters a trajectory may hold (prompt included). Default 1,000,000. */
  contextSize?: number;
  /** Milliseconds between sampled tokens, to exercise streaming and abort. Default 0. */
  tokenDelayMs?: number;
  /** Log-probability recorded for each sampled token. Default ln 0.9. */
  logprob?: (token: number, index: number, context: ScriptContext) => number;
}

/** The token id the scripted model samples when its output ends (decodes to ""). */
export const SCRIPTED_EOS = 0x110000;

const CHATML_START = "<|im_start|>";
const CHATML_END = "<|im_end|>";

function chars(text: string): number[] {
  return Array.from(text, (c) => c.codePointAt(0)!);
}

function decode(tokens: readonly number[]): string {
  return tokens
    .filter((t) => t !== SCRIPTED_EOS)
    .map((t) => String.fromCodePoint(t))
    .join("");
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

class ScriptedTrajectory implements Trajectory {
  readonly record: TokenRecord;
  private text: string;
  private evaluated: number;
  private generated = 0;
  private released = false;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly policy: ScriptedPolicy,
    readonly id: string,
    private readonly prompt: string,
    readonly promptTokens: readonly number[],
    state: { text: string; record: TokenRecord; evaluated: number },
    private readonly epoch: number,
  ) {
    this.text = state.text;
    this.record = state.record;
    this.evaluated = state.evaluated;
  }

  get usage(): TokenUsage {
    return { promptTokens: this.promptTokens.length, evaluatedTokens: this.evaluated, generatedTokens: this.generated };
  }

  private run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(() => {
      if (this.released) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} was released`);
      if (this.epoch !== this.policy.epoch) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} belongs to a model that was reloaded or closed`);
      return fn();
    });
    this.tail = result.catch(() => undefined);
    return result;
  }

  private room(): number {
    return this.policy.info.contextSize - this.promptTokens.length - this.record.tokens.length;
  }

  generate(options: GenerateOptions): Promise<GenerateResult> {
    return this.run(async () => {
      const context: ScriptContext = { prompt: this.prompt, text: this.text, call: this.policy.nextCall(), trajectoryId: this.id, options };
      const planned = chars(this.policy.scriptOutput(context));
      const limit = Math.min(options.maxTokens, this.room());
      const stops = new StopMatcher(options.stop);
      const tokens: number[] = [];
      const logprobs: number[] = [];
      let out = "";
      let stopReason: StopReason = "eos";
      let stop: string | undefined;
      const push = (token: number): void => {
        const lp = this.policy.logprobOf(token, this.record.tokens.length, context);
        tokens.push(token);
        logprobs.push(lp);
        this.record.tokens.push(token);
        this.record.sampled.push(1);
        this.record.logprobs.push(lp);
        this.generated++;
        this.evaluated++;
      };
      for (let i = 0; ; i++) {
        if (options.signal?.aborted) {
          stopReason = "aborted";
          break;
        }
        if (tokens.length >= limit) {
          stopReason = "maxTokens";
          break;
        }
        if (i > 0 && this.policy.tokenDelayMs > 0) await sleep(this.policy.tokenDelayMs);
        if (options.signal?.aborted) {
          stopReason = "aborted";
          break;
        }
        const token = planned[i];
        if (token === undefined) {
          push(SCRIPTED_EOS);
          stopReason = "eos";
          break;
        }
        push(token);
        const piece = String.fromCodePoint(token);
        out += piece;
        options.onText?.(piece);
        const matched = stops.match(out);
        if (matched) {
          stopReason = "stop";
          stop = matched.stop;
          break;
        }
      }
      this.text += out;
      return { text: out, tokens, logprobs, stopReason, ...(stop !== undefined ? { stop } : {}) };
    });
  }

  append(text: string): Promise<{ tokens: number[] }> {
    return this.run(async () => {
      const tokens = chars(text);
      if (tokens.length > this.room()) throw new ReexError("CONTEXT_EXHAUSTED", `appending ${tokens.length} tokens would overflow the context window`);
      for (const t of tokens) {
        this.record.tokens.push(t);
        this.record.sampled.push(0);
        this.record.logprobs.push(0);
      }
      this.text += text;
      this.evaluated += tokens.length;
      return { tokens };
    });
  }

  rewind(length: number): Promise<void> {
    return this.run(async () => {
      const n = this.record.tokens.length;
      if (!Number.isInteger(length) || length < 0 || length > n)
        throw new ReexError("INTERNAL", `cannot rewind trajectory ${this.id} to ${length} of ${n} tokens`);
      this.record.tokens.length = length;
      this.record.sampled.length = length;
      this.record.logprobs.length = length;
      this.text = decode(this.record.tokens);
    });
  }

  fork(): Promise<Trajectory> {
    return this.run(async () => {
      await this.policy.reserve("now");
      const record = { tokens: [...this.record.tokens], sampled: [...this.record.sampled], logprobs: [...this.record.logprobs] };
      return this.policy.adopt(this.prompt, this.promptTokens, { text: this.text, record, evaluated: 0 });
    });
  }

  release(): Promise<void> {
    const done = this.tail.then(() => {
      if (this.released) return;
      this.released = true;
      this.policy.forget(this);
    });
    this.tail = done.catch(() => undefined);
    return done;
  }
}

/**
 * A Policy whose output comes from a script, for deterministic tests of code that drives a policy.
 * Renders chats as ChatML; tokenises one token per character; ignores grammar, temperature and seed
 * (a script function can read them from `options`).
 */
export class ScriptedPolicy implements Policy {
  /** Every generate call's context, in order, for assertions. */
  readonly calls: ScriptContext[] = [];
  /** Arguments of each reload call, in order. */
  readonly reloads: { model?: string; lora?: string[] }[] = [];
  readonly tokenDelayMs: number;
  epoch = 0;
  private current: PolicyInfo;
  private readonly script: Script;
  private readonly logprob: NonNullable<ScriptedPolicyOptions["logprob"]>;
  private readonly live = new Set<ScriptedTrajectory>();
  private readonly cachedPrefixes = new Set<string>();
  private readonly waiters: (() => void)[] = [];
  private callCount = 0;
  private nextId = 1;
  private closed = false;

  constructor(script: Script, options: ScriptedPolicyOptions = {}) {
    this.script = script;
    this.tokenDelayMs = options.tokenDelayMs ?? 0;
    this.logprob = options.logprob ?? (() => Math.log(0.9));
    this.current = {
      backend: "scripted",
      model: options.model ?? "scripted",
      device: "cpu",
      contextSize: options.contextSize ?? 1_000_000,
      maxSequences: options.maxSequences ?? 64,
      lora: [],
    };
  }

  get info(): PolicyInfo {
    return this.current;
  }

  /** @internal */
  nextCall(): number {
    return this.callCount++;
  }

  /** @internal */
  scriptOutput(context: ScriptContext): string {
    this.calls.push(context);
    if (typeof this.script === "function") return this.script(context);
    return this.script[context.call] ?? "";
  }

  /** @internal */
  logprobOf(token: number, index: number, context: ScriptContext): number {
    return this.logprob(token, index, context);
  }

  renderChat(messages: ChatMessage[], options: { sharedPrefix?: string } = {}): PromptSpec {
    const parts: PromptPart[] = [];
    messages.forEach((m, i) => {
      parts.push({ text: `${CHATML_START}${m.role}\n`, special: true }, { text: m.content, special: false });
      if (i < messages.length - 1 || m.role !== "assistant") parts.push({ text: `${CHATML_END}\n`, special: true });
    });
    if (messages.at(-1)?.role !== "assistant") parts.push({ text: `${CHATML_START}assistant\n`, special: true });
    const merged = mergeParts(parts);
    return promptFromParts(merged, options.sharedPrefix, contentOffset(merged, messages.at(-1)?.content ?? ""));
  }

  async start(prompt: PromptSpec, options: { signal?: AbortSignal } = {}): Promise<Trajectory> {
    const text = prompt.prefix + prompt.suffix;
    if (text.length === 0) throw new ReexError("POLICY_ERROR", "cannot start a trajectory from an empty prompt");
    const tokens = chars(text);
    if (tokens.length > this.current.contextSize)
      throw new ReexError("CONTEXT_EXHAUSTED", `the prompt has ${tokens.length} tokens; the context window holds ${this.current.contextSize}`);
    await this.reserve("wait", options.signal);
    const cached = prompt.prefix.length > 0 && this.cachedPrefixes.has(prompt.prefix);
    if (prompt.prefix.length > 0) this.cachedPrefixes.add(prompt.prefix);
    const evaluated = cached ? chars(prompt.suffix).length : tokens.length;
    return this.adopt(text, tokens, { text: "", record: { tokens: [], sampled: [], logprobs: [] }, evaluated });
  }

  /** @internal */
  adopt(prompt: string, promptTokens: readonly number[], state: { text: string; record: TokenRecord; evaluated: number }): ScriptedTrajectory {
    const t = new ScriptedTrajectory(this, `s${this.nextId++}`, prompt, promptTokens, state, this.epoch);
    this.live.add(t);
    return t;
  }

  /** @internal Waits for (or, with "now", insists on) room for one more trajectory. */
  async reserve(mode: "wait" | "now", signal?: AbortSignal): Promise<void> {
    for (;;) {
      if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
      if (this.live.size < this.current.maxSequences) return;
      if (mode === "now") throw new ReexError("CONTEXT_EXHAUSTED", `all ${this.current.maxSequences} sequences are held by live trajectories`);
      if (signal?.aborted) throw new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal.reason });
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => {
          const i = this.waiters.indexOf(wake);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal?.reason }));
        };
        const wake = (): void => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(wake);
      });
    }
  }

  /** @internal */
  forget(t: ScriptedTrajectory): void {
    if (this.live.delete(t)) this.waiters.shift()?.();
  }

  tokenize(text: string): number[] {
    return chars(text);
  }

  detokenize(tokens: readonly number[]): string {
    return decode(tokens);
  }

  liveTrajectories(): number {
    return this.live.size;
  }

  async reload(options: { model?: string; lora?: string[] }): Promise<void> {
    this.reloads.push(options);
    this.epoch++;
    this.live.clear();
    this.cachedPrefixes.clear();
    this.current = {
      ...this.current,
      ...(options.model !== undefined ? { model: options.model } : {}),
      ...(options.lora !== undefined ? { lora: [...options.lora] } : {}),
    };
    for (const wake of this.waiters.splice(0)) wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.epoch++;
    this.live.clear();
    for (const wake of this.waiters.splice(0)) wake();
  }
}

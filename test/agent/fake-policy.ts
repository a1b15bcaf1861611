/**
 * A minimal Policy for agent tests: characters are tokens (id = code point), every sampled token
 * has log-probability -0.5, and what the "model" writes is decided by a responder that sees the
 * response so far. Stop strings, maxTokens, abort and onText behave as the Policy seam says.
 */
import type { ChatMessage, GenerateOptions, GenerateResult, Policy, PromptSpec, TokenRecord, TokenUsage, Trajectory } from "../../src/policy/types.js";

/** Decides what the model writes next, given the response so far and the trajectory id. */
export type Responder = (response: string, trajectoryId: string) => string;

/** A responder that writes `turns[i]` after the i-th `<result>` block (the empty string after the last). */
export function byTurn(turns: string[]): Responder {
  return (response) => turns[(response.match(/<\/result>/g) ?? []).length] ?? "";
}

export const SAMPLED_LOGPROB = -0.5;

export class FakePolicy implements Policy {
  readonly info = { backend: "scripted" as const, model: "fake", device: "cpu", contextSize: 4096, maxSequences: 16 };
  live = 0;
  generateCalls: GenerateOptions[] = [];
  private nextId = 0;

  constructor(
    readonly responder: Responder,
    /** `delayMs` per token; `runOn` is text the stop token carries past a stop string (a multi-character token). */
    readonly options: { delayMs?: number; runOn?: string } = {},
  ) {}

  renderChat(messages: ChatMessage[], options: { sharedPrefix?: string } = {}): PromptSpec {
    const text = messages.map((m) => `<|${m.role}|>\n${m.content}\n`).join("") + "<|assistant|>\n";
    const at = options.sharedPrefix ? text.indexOf(options.sharedPrefix) : -1;
    const split = at < 0 ? 0 : at + options.sharedPrefix!.length;
    return { prefix: text.slice(0, split), suffix: text.slice(split) };
  }

  async start(prompt: PromptSpec): Promise<Trajectory> {
    this.live++;
    return new FakeTrajectory(this, `t${this.nextId++}`, this.tokenize(prompt.prefix + prompt.suffix), "", { tokens: [], sampled: [], logprobs: [] });
  }

  tokenize(text: string): number[] {
    return [...text].map((c) => c.codePointAt(0)!);
  }

  detokenize(tokens: readonly number[]): string {
    return String.fromCodePoint(...tokens);
  }

  liveTrajectories(): number {
    return this.live;
  }

  newId(): string {
    return `t${this.nextId++}`;
  }

  async close(): Promise<void> {}
}

class FakeTrajectory implements Trajectory {
  readonly usage: TokenUsage;
  private released = false;

  constructor(
    private readonly policy: FakePolicy,
    readonly id: string,
    readonly promptTokens: readonly number[],
    private text: string,
    readonly record: TokenRecord,
  ) {
    this.usage = { promptTokens: promptTokens.length, evaluatedTokens: promptTokens.length, generatedTokens: 0 };
  }

  async generate(options: GenerateOptions): Promise<GenerateResult> {
    this.policy.generateCalls.push(options);
    const want = [...this.policy.responder(this.text, this.id)];
    const out: GenerateResult = { text: "", tokens: [], logprobs: [], stopReason: "eos" };
    for (const ch of want) {
      if (options.signal?.aborted) return { ...out, stopReason: "aborted" };
      if (out.tokens.length >= options.maxTokens) return { ...out, stopReason: "maxTokens" };
      if (this.policy.options.delayMs) await new Promise((r) => setTimeout(r, this.policy.options.delayMs));
      const id = ch.codePointAt(0)!;
      out.text += ch;
      out.tokens.push(id);
      out.logprobs.push(SAMPLED_LOGPROB);
      this.text += ch;
      this.record.tokens.push(id);
      this.record.sampled.push(1);
      this.record.logprobs.push(SAMPLED_LOGPROB);
      this.usage.generatedTokens++;
      this.usage.evaluatedTokens++;
      options.onText?.(ch);
      const stop = options.stop.find((s) => out.text.endsWith(s));
      if (stop) {
        const runOn = this.policy.options.runOn ?? "";
        out.text += runOn;
        this.text += runOn;
        return { ...out, stopReason: "stop", stop };
      }
    }
    return out;
  }

  async append(text: string): Promise<{ tokens: number[] }> {
    const tokens = this.policy.tokenize(text);
    this.text += text;
    for (const t of tokens) {
      this.record.tokens.push(t);
      this.record.sampled.push(0);
      this.record.logprobs.push(0);
    }
    this.usage.evaluatedTokens += tokens.length;
    return { tokens };
  }

  async rewind(length: number): Promise<void> {
    this.record.tokens.length = length;
    this.record.sampled.length = length;
    this.record.logprobs.length = length;
    this.text = String.fromCodePoint(...this.record.tokens);
  }

  async fork(): Promise<Trajectory> {
    this.policy.live++;
    const record = { tokens: this.record.tokens.slice(), sampled: this.record.sampled.slice(), logprobs: this.record.logprobs.slice() };
    return new FakeTrajectory(this.policy, this.policy.newId(), this.promptTokens, this.text, record);
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.policy.live--;
  }
}

/**
 * A remote trajectory: stateless on the server, it holds its prompt and everything sampled or
 * appended since, and every `generate` sends all of it again for the server's prefix cache to
 * absorb. `fork` copies the local state.
 */
import { randomInt } from "node:crypto";
import { ReexError } from "../../errors/index.js";
import { emptyResult, samplingSettings, StopMatcher } from "../stop.js";
import type { GenerateOptions, GenerateResult, PolicyInfo, StopReason, TokenRecord, TokenUsage, Trajectory } from "../types.js";
import { finite, isRecord, setPath, type Endpoint } from "./endpoint.js";
import { completionChunks, tokenEntries } from "./sse.js";

/** What a trajectory carries; a fork copies it. */
export interface TrajectoryState {
  /** Everything after the prompt: sampled and appended text. */
  text: string;
  record: TokenRecord;
  /** Every token after the prompt has a known id (so requests can send ids). */
  exact: boolean;
  /** Prompt tokens as the server counted them, when ids are unknown. */
  promptCount: number;
  /** Tokens of this lineage the server has seen (for the evaluated-token estimate when it reports no cache hits). */
  seen: number;
}

/** Usage numbers a completion reported. */
interface ReportedUsage {
  promptTokens?: number;
  /** Prompt tokens the server evaluated (not served from its cache), when it says. */
  uncached?: number;
}

function reportedUsage(usage: unknown, timings: unknown): ReportedUsage {
  const out: ReportedUsage = {};
  if (isRecord(usage)) {
    const prompt = finite(usage.prompt_tokens);
    if (prompt !== undefined) out.promptTokens = prompt;
    const details = usage.prompt_tokens_details;
    const cached = isRecord(details) ? finite(details.cached_tokens) : undefined;
    if (prompt !== undefined && cached !== undefined) out.uncached = Math.max(0, prompt - cached);
  }
  if (out.uncached === undefined && isRecord(timings)) {
    const n = finite(timings.prompt_n);
    if (n !== undefined) out.uncached = n;
  }
  return out;
}

/** What one streamed completion produced; a stop the stream did not end at is settled afterwards. */
interface Streamed {
  text: string;
  tokens: number[];
  logprobs: number[];
  /** Chunks that carried text (the token count of last resort when the server sends neither logprobs nor usage). */
  chunksWithText: number;
  stopReason: StopReason | undefined;
  stop: string | undefined;
  /** The server's `finish_reason`, and the `stop_reason` beside it. */
  finish: string | undefined;
  serverStop: unknown;
  usage: unknown;
  timings: unknown;
}

/** Posts `body` to `url` and reads the streamed completion, cut short at a stop string we match or at the caller's abort. */
async function streamCompletion(endpoint: Endpoint, url: string, body: Record<string, unknown>, stops: string[], options: GenerateOptions): Promise<Streamed> {
  const got: Streamed = {
    text: "",
    tokens: [],
    logprobs: [],
    chunksWithText: 0,
    stopReason: undefined,
    stop: undefined,
    finish: undefined,
    serverStop: undefined,
    usage: undefined,
    timings: undefined,
  };
  const matcher = new StopMatcher(stops);
  const stream = { done: false };
  const call = endpoint.open(url, { method: "POST", body, stream: true }, options.signal);
  try {
    const res = await call.response;
    if (!res.ok) throw endpoint.statusError(url, res.status, await res.text().catch(() => ""));
    for await (const chunk of completionChunks(res, call, stream)) {
      if (!takeChunk(got, chunk, url, matcher, options)) {
        // The server went on past a stop string it should have honoured: we have our answer.
        call.abort();
        break;
      }
    }
  } catch (err) {
    if (call.ended === "caller") {
      if (got.stopReason !== "stop") got.stopReason = "aborted";
    } else if (call.ended !== "stopped") {
      throw endpoint.failure(url, call, err);
    }
  } finally {
    call.done();
  }
  return got;
}

/** Folds one stream chunk into `got`; false when the server sent more after a stop string we matched, so the stream should end. */
function takeChunk(got: Streamed, chunk: Record<string, unknown>, url: string, matcher: StopMatcher, options: GenerateOptions): boolean {
  if (chunk.error !== undefined) {
    const e = chunk.error;
    const message = isRecord(e) && typeof e.message === "string" ? e.message : JSON.stringify(e);
    throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} failed while generating: ${message}`);
  }
  if (chunk.usage != null) got.usage = chunk.usage;
  if (chunk.timings != null) got.timings = chunk.timings;
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
  if (!isRecord(choice)) return true;
  const entries = tokenEntries(choice.logprobs);
  const delta = typeof choice.text === "string" ? choice.text : "";
  if (got.stopReason === "stop" && (entries.length > 0 || delta.length > 0)) return false;
  if (got.stopReason !== "stop") {
    for (const e of entries) {
      got.tokens.push(e.id);
      got.logprobs.push(e.logprob);
    }
    if (delta.length > 0) {
      got.chunksWithText++;
      got.text += delta;
      options.onText?.(delta);
      const matched = matcher.match(got.text);
      if (matched) {
        got.stopReason = "stop";
        got.stop = matched.stop;
      }
    }
  }
  if (typeof choice.finish_reason === "string") {
    got.finish = choice.finish_reason;
    got.serverStop = choice.stop_reason;
  }
  return true;
}

/** Gives a completion that came without per-token logprobs unknown ids (-1), as many as the server counted, so the token count stays right. */
function padUnknownTokens(got: Streamed): void {
  const n = finite(isRecord(got.usage) ? got.usage.completion_tokens : undefined) ?? got.chunksWithText;
  for (let i = 0; i < n; i++) {
    got.tokens.push(-1);
    got.logprobs.push(0);
  }
}

/** What a trajectory needs of the policy that owns it. */
export interface TrajectoryHost {
  readonly info: PolicyInfo;
  readonly endpoint: Endpoint;
  /** Request field that carries a GBNF grammar (a dotted path nests). */
  readonly grammarField: string;
  readonly extraBody: Record<string, unknown>;
  /** Bumped by close: trajectories of an older epoch refuse to run. */
  readonly epoch: number;
  tokenizeRemote(text: string, special: boolean, bos: boolean, signal?: AbortSignal): Promise<number[] | null>;
  detokenizeAsync(tokens: readonly number[]): Promise<string | null>;
  /** Takes a slot now or fails with CONTEXT_EXHAUSTED. */
  reserveNow(): void;
  /** A new live trajectory on a slot already taken. */
  adopt(promptText: string, promptIds: readonly number[] | null, state: TrajectoryState): Trajectory;
  /** Gives the trajectory's slot back. */
  forget(t: Trajectory): void;
}

/** A trajectory of the remote policy; see the module comment. */
export class RemoteTrajectory implements Trajectory {
  readonly record: TokenRecord;
  private text: string;
  private exact: boolean;
  private promptCount: number;
  private seen: number;
  private evaluated = 0;
  private generated = 0;
  private released = false;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly policy: TrajectoryHost,
    readonly id: string,
    private readonly promptText: string,
    /** Prompt ids, or null when the endpoint does not tokenise. */
    private readonly promptIds: readonly number[] | null,
    state: TrajectoryState,
    private readonly epoch: number,
  ) {
    this.text = state.text;
    this.record = state.record;
    this.exact = state.exact;
    this.promptCount = state.promptCount;
    this.seen = state.seen;
  }

  get promptTokens(): readonly number[] {
    return this.promptIds ?? [];
  }

  get usage(): TokenUsage {
    return { promptTokens: this.promptIds?.length ?? this.promptCount, evaluatedTokens: this.evaluated, generatedTokens: this.generated };
  }

  /** Runs calls on this trajectory one at a time, in order. */
  private run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(() => {
      if (this.released) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} was released`);
      if (this.epoch !== this.policy.epoch) throw new ReexError("POLICY_ERROR", `trajectory ${this.id} belongs to a remote policy that was closed`);
      return fn();
    });
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Token ids of everything so far, or null when some are unknown. */
  private sentIds(): number[] | null {
    return this.exact && this.promptIds ? [...this.promptIds, ...this.record.tokens] : null;
  }

  generate(options: GenerateOptions): Promise<GenerateResult> {
    return this.run(async () => {
      const sampling = samplingSettings(options);
      if (options.signal?.aborted) return emptyResult("aborted");
      const ids = this.sentIds();
      const contextSize = this.policy.info.contextSize;
      let limit = options.maxTokens;
      if (contextSize > 0 && ids) limit = Math.min(limit, contextSize - ids.length);
      if (limit <= 0) return emptyResult("maxTokens");
      const stops = options.stop.filter((s) => s.length > 0);
      const body = this.completionBody(options, ids, limit, stops, sampling);
      const before = { tokens: this.record.tokens.length, text: this.text };
      const url = `${this.policy.endpoint.base}/completions`;
      const got = await streamCompletion(this.policy.endpoint, url, body, stops, options);
      const stopReason = await this.settleStop(got, stops, url, options);
      this.commit(got, ids, before);
      const { text, tokens, logprobs, stop } = got;
      return { text, tokens, logprobs, stopReason, ...(stop !== undefined ? { stop } : {}) };
    });
  }

  /** The /completions request body: the whole lineage as prompt, sampling and stops, grammar, then the host's extra fields over all. */
  private completionBody(
    options: GenerateOptions,
    ids: number[] | null,
    limit: number,
    stops: string[],
    sampling: { temperature: number; topP: number },
  ): Record<string, unknown> {
    const body: Record<string, unknown> = {
      model: this.policy.info.model,
      prompt: ids ?? this.promptText + this.text,
      max_tokens: limit,
      temperature: sampling.temperature,
      top_p: sampling.topP,
      top_k: -1,
      min_p: 0,
      seed: options.seed ?? randomInt(0, 2 ** 31),
      ...(stops.length > 0 ? { stop: stops, include_stop_str_in_output: true } : {}),
      ...(options.ignoreEos ? { ignore_eos: true } : {}),
      logprobs: 1,
      return_tokens_as_token_ids: true,
      stream: true,
      stream_options: { include_usage: true },
    };
    if (options.grammar !== undefined) setPath(body, this.policy.grammarField, options.grammar);
    Object.assign(body, this.policy.extraBody);
    return body;
  }

  /**
   * Why a completion the stream did not end itself ended, from the server's finish reason; a stop
   * string the server matched but left out of its text is put back into `got`.
   */
  private async settleStop(got: Streamed, stops: string[], url: string, options: GenerateOptions): Promise<StopReason> {
    if (got.stopReason !== undefined) return got.stopReason;
    const finish = got.finish;
    if (finish === "length") return "maxTokens";
    if (finish === "stop" || finish === "eos") {
      if (stops.length === 0) return "eos";
      const dropped = await this.droppedStop(stops, got.tokens, got.text, got.serverStop);
      if (!dropped) return "eos";
      got.stop = dropped.stop;
      if (dropped.text.length > got.text.length) options.onText?.(dropped.text.slice(got.text.length));
      got.text = dropped.text;
      return "stop";
    }
    if (finish === undefined) throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} ended the stream before the completion finished`);
    throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} ended the completion with finish_reason "${finish}"`);
  }

  /** Adds a finished completion to the trajectory: its tokens to the record, its text, and its prompt and generated tokens to the usage. */
  private commit(got: Streamed, ids: number[] | null, before: { tokens: number; text: string }): void {
    const reported = reportedUsage(got.usage, got.timings);
    const { tokens, logprobs } = got;
    if (tokens.length === 0 && got.text.length > 0) padUnknownTokens(got);
    for (let i = 0; i < tokens.length; i++) {
      this.record.tokens.push(tokens[i]!);
      this.record.sampled.push(1);
      this.record.logprobs.push(logprobs[i]!);
    }
    if (tokens.some((t) => t < 0)) this.exact = false;
    this.text = before.text + got.text;

    const sent = ids?.length ?? reported.promptTokens;
    if (!this.promptIds && this.promptCount === 0 && before.tokens === 0 && reported.promptTokens !== undefined) this.promptCount = reported.promptTokens;
    if (reported.uncached !== undefined) this.evaluated += reported.uncached;
    else if (sent !== undefined) this.evaluated += Math.max(0, sent - this.seen);
    this.evaluated += tokens.length;
    this.generated += tokens.length;
    if (sent !== undefined) this.seen = sent + tokens.length;
  }

  /**
   * The stop string a server stopped at but left out of its text (llama-server does), found by
   * decoding the sampled ids (vLLM names it in `stop_reason` instead); undefined for a real end of turn.
   */
  private async droppedStop(stops: string[], tokens: number[], text: string, serverStop: unknown): Promise<{ stop: string; text: string } | undefined> {
    if (typeof serverStop === "string" && stops.includes(serverStop)) {
      return { stop: serverStop, text: text.endsWith(serverStop) ? text : text + serverStop };
    }
    if (serverStop === null) return undefined;
    if (tokens.length === 0 || tokens.some((t) => t < 0)) return undefined;
    const full = await this.policy.detokenizeAsync(tokens);
    if (full === null) return undefined;
    const matched = new StopMatcher(stops).match(full);
    if (!matched) return undefined;
    return { stop: matched.stop, text: full.startsWith(text) ? full : text + matched.stop };
  }

  append(text: string): Promise<{ tokens: number[] }> {
    return this.run(async () => {
      if (text.length === 0) return { tokens: [] };
      const ids = await this.policy.tokenizeRemote(text, false, false);
      if (ids === null) {
        this.exact = false;
        this.text += text;
        return { tokens: [] };
      }
      const contextSize = this.policy.info.contextSize;
      const used = (this.promptIds?.length ?? this.promptCount) + this.record.tokens.length;
      if (contextSize > 0 && used + ids.length > contextSize) {
        throw new ReexError("CONTEXT_EXHAUSTED", `appending ${ids.length} tokens would overflow the context window (${Math.max(0, contextSize - used)} left)`);
      }
      this.text += text;
      for (const t of ids) {
        this.record.tokens.push(t);
        this.record.sampled.push(0);
        this.record.logprobs.push(0);
      }
      return { tokens: ids };
    });
  }

  fork(): Promise<Trajectory> {
    return this.run(async () => {
      this.policy.reserveNow();
      const record = { tokens: [...this.record.tokens], sampled: [...this.record.sampled], logprobs: [...this.record.logprobs] };
      return this.policy.adopt(this.promptText, this.promptIds, {
        text: this.text,
        record,
        exact: this.exact,
        promptCount: this.promptCount,
        seen: this.seen,
      });
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

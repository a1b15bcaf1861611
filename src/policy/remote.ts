/**
 * A Policy backed by a remote OpenAI-compatible **completions** endpoint (vLLM, SGLang, llama.cpp's
 * llama-server), so that many stateless reex API servers can share one GPU deployment
 * (docs/scale-out.md).
 *
 * A trajectory is stateless on the server: it holds its prompt and everything sampled or appended
 * since, and every `generate` sends all of it again. The server's prefix cache (vLLM
 * `--enable-prefix-caching`, llama-server's slot cache) makes the re-send cheap: only tokens it has
 * not seen are evaluated. `fork` copies the local state; the shared prefix is again the server's
 * cache's business. When the endpoint tokenises (`POST /tokenize`, llama-server and vLLM both have
 * one), prompts go out as token ids, so a continuation conditions on exactly the tokens that were
 * sampled and injected (no re-tokenisation drift, and executor output stays plain text where the
 * server lets us say so); without it the trajectory sends text and records only sampled tokens.
 *
 * Stop strings are sent to the server and also matched here on the streamed text, so the result
 * keeps the stop string and says which one matched whether the server includes it in its output
 * (vLLM with `include_stop_str_in_output`, which we send) or drops it (llama-server: the text is
 * then rebuilt from the sampled ids through `/detokenize`).
 */
import { randomInt } from "node:crypto";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { ReexError } from "../errors/index.js";
import { contentOffset, mergeParts, piecesOf, promptFromParts } from "./prompt.js";
import { emptyResult, samplingSettings, StopMatcher } from "./stop.js";
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

/** How to reach the remote completions endpoint. */
export interface RemotePolicyOptions {
  /**
   * Base URL of the OpenAI-compatible API, usually ending in `/v1` (`http://gpu-1:8000/v1`).
   * Completions go to `{url}/completions`; `/tokenize`, `/detokenize` and `/props` are looked up at
   * the server root (`url` without a trailing `/v1`).
   */
  url: string;
  /** Model name sent with every request. Default: the first model listed by `GET {url}/models`. */
  model?: string;
  /** Bearer key for the endpoint. Default none. */
  apiKey?: string;
  /** Longest wait for the endpoint, ms: for response headers, and between two streamed chunks. Default 120000. */
  timeoutMs?: number;
  /** Trajectories alive at once (concurrent streams); `start` waits and `fork` fails beyond it. Default 64. */
  maxSequences?: number;
  /**
   * Context window in tokens, for `info` and to cap `max_tokens`. Default: what the server reports
   * (vLLM `max_model_len` in `/v1/models`, llama-server `n_ctx` in `/props`), else 0 (unknown: the
   * server alone enforces it).
   */
  contextSize?: number;
  /**
   * How `renderChat` turns messages into text (completions endpoints take raw text). Default ChatML
   * (`<|im_start|>role\n…<|im_end|>\n`, any number of messages). A custom template is a string with
   * `{system}` and `{user}` placeholders, e.g. for Llama 3:
   * `"<|start_header_id|>system<|end_header_id|>\n\n{system}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{user}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"`;
   * it renders one system and one user message (a final assistant message is appended and continued).
   * Leave BOS out: the server adds the model's BOS when it tokenises the prompt.
   */
  chatTemplate?: string;
  /**
   * "remote": token ids from the endpoint's `/tokenize` (llama-server and vLLM styles are detected;
   * a server without one degrades to "none"). "none": never tokenise; prompts go out as text and
   * appended text is not in the record. Default "remote".
   */
  tokenizer?: "remote" | "none";
  /**
   * Request field that carries a GBNF grammar: "grammar" (llama-server), "guided_grammar" (vLLM up
   * to 0.10), "structured_outputs.grammar" (newer vLLM); a dotted path nests. Default "grammar".
   */
  grammarField?: string;
  /** Extra fields merged into every completions request body (e.g. `{"repetition_penalty": 1}`). Default none. */
  extraBody?: Record<string, unknown>;
  /** Warnings (endpoint unreachable at start, no /tokenize). Default: none. */
  log?: (message: string) => void;
}

const DEFAULT_TIMEOUT_MS = 120_000;
const DEFAULT_MAX_SEQUENCES = 64;
const PROBE_TIMEOUT_MS = 10_000;
const MIN_LOGPROB = Math.log(1e-45);
const TOKEN_CACHE_ENTRIES = 512;

const CHATML_START = "<|im_start|>";
const CHATML_END = "<|im_end|>";

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const code = cause && typeof cause === "object" ? (cause as { code?: unknown }).code : undefined;
    if (typeof code === "string") return code;
    if (cause instanceof Error && cause.message) return cause.message;
    return err.message;
  }
  return String(err);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function finite(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

function tokenArray(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const out: number[] = [];
  for (const v of value) {
    const id = typeof v === "number" ? v : isRecord(v) ? v.id : undefined;
    if (typeof id !== "number" || !Number.isInteger(id)) return undefined;
    out.push(id);
  }
  return out;
}

/** Sets `value` at a dotted `path` of `target`. */
function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let at = target;
  for (const key of keys.slice(0, -1)) {
    const next = at[key];
    if (isRecord(next)) at = next;
    else at = at[key] = {};
  }
  at[keys.at(-1)!] = value;
}

/** One sampled token as a completion chunk reports it; `id` -1 when the server gave no id. */
interface TokenEntry {
  id: number;
  logprob: number;
}

function logprobOf(value: unknown): number {
  const n = typeof value === "number" ? value : Number.NEGATIVE_INFINITY;
  return Number.isNaN(n) ? MIN_LOGPROB : Math.max(n, MIN_LOGPROB);
}

/** vLLM (with `return_tokens_as_token_ids`) spells ids as "token_id:123". */
function idOf(token: unknown): number {
  if (typeof token === "number" && Number.isInteger(token)) return token;
  if (typeof token === "string") {
    const m = /^token_id:(\d+)$/.exec(token);
    if (m) return Number(m[1]);
  }
  return -1;
}

/**
 * The sampled tokens of a chunk's `logprobs`: the OpenAI completions shape
 * (`{tokens, token_logprobs}`) or llama-server's (`{content: [{id, logprob}]}`).
 */
function tokenEntries(logprobs: unknown): TokenEntry[] {
  if (!isRecord(logprobs)) return [];
  if (Array.isArray(logprobs.content)) {
    return logprobs.content.map((e) => (isRecord(e) ? { id: idOf(e.id), logprob: logprobOf(e.logprob) } : { id: -1, logprob: MIN_LOGPROB }));
  }
  if (Array.isArray(logprobs.token_logprobs)) {
    const tokens = Array.isArray(logprobs.tokens) ? logprobs.tokens : [];
    return logprobs.token_logprobs.map((l, i) => ({ id: idOf(tokens[i]), logprob: logprobOf(l) }));
  }
  return [];
}

/** The parts of a chat rendered through a `{system}`/`{user}` template. */
function renderTemplate(template: string, messages: ChatMessage[]): PromptPart[] {
  const last = messages.at(-1);
  const continued = last?.role === "assistant" ? last : undefined;
  const body = continued ? messages.slice(0, -1) : messages;
  const users = body.filter((m) => m.role === "user");
  if (users.length !== 1 || body.some((m) => m.role === "assistant")) {
    throw new ReexError(
      "POLICY_ERROR",
      "the remote policy's chat template renders one system and one user message (and a final assistant message to continue); use the default ChatML rendering for other conversations",
    );
  }
  const system = body.filter((m) => m.role === "system").map((m) => m.content).join("\n\n");
  const parts: PromptPart[] = [];
  for (const piece of template.split(/(\{system\}|\{user\})/)) {
    if (piece === "{system}") parts.push({ text: system, special: false });
    else if (piece === "{user}") parts.push({ text: users[0]!.content, special: false });
    else parts.push({ text: piece, special: true });
  }
  if (continued) parts.push({ text: continued.content, special: false });
  return mergeParts(parts);
}

function renderChatML(messages: ChatMessage[]): PromptPart[] {
  const parts: PromptPart[] = [];
  messages.forEach((m, i) => {
    parts.push({ text: `${CHATML_START}${m.role}\n`, special: true }, { text: m.content, special: false });
    if (i < messages.length - 1 || m.role !== "assistant") parts.push({ text: `${CHATML_END}\n`, special: true });
  });
  if (messages.at(-1)?.role !== "assistant") parts.push({ text: `${CHATML_START}assistant\n`, special: true });
  return mergeParts(parts);
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

/** A response body read as JSON (undefined when it is not JSON). */
interface JsonReply {
  status: number;
  json: unknown;
  text: string;
}

/** An HTTP exchange in flight: abortable, with an idle timer that streamed chunks reset. */
interface Call {
  response: Promise<Response>;
  /** Resets the idle timer (a chunk arrived). */
  touch(): void;
  /** Aborts the request (reason "stopped": we have what we need). */
  abort(): void;
  /** Stops the timer and detaches from the caller's signal. */
  done(): void;
  /** Why the request ended early, if it did. */
  readonly ended: "timeout" | "caller" | "stopped" | "closed" | undefined;
}

/** The endpoint: URLs, headers, and errors turned into ReexErrors that name the URL. */
class Endpoint {
  readonly base: string;
  readonly root: string;
  private readonly inflight = new Set<{ abort: (why: "closed") => void }>();

  constructor(
    url: string,
    private readonly apiKey: string | undefined,
    readonly timeoutMs: number,
  ) {
    this.base = url.replace(/\/+$/, "");
    this.root = this.base.replace(/\/v1$/, "");
  }

  headers(stream = false): Record<string, string> {
    return {
      "content-type": "application/json",
      accept: stream ? "text/event-stream" : "application/json",
      ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
    };
  }

  /** Starts a request; `signal` is the caller's (its abort ends the call as "caller"). */
  open(url: string, init: { method: "GET" | "POST"; body?: unknown; stream?: boolean }, signal?: AbortSignal, timeoutMs = this.timeoutMs): Call {
    const ctl = new AbortController();
    let ended: Call["ended"];
    const stop = (why: NonNullable<Call["ended"]>): void => {
      if (ended === undefined) ended = why;
      ctl.abort(new ReexError("CANCELLED", `remote request ended: ${why}`));
    };
    let timer = setTimeout(() => stop("timeout"), timeoutMs);
    const onAbort = (): void => stop("caller");
    if (signal?.aborted) stop("caller");
    else signal?.addEventListener("abort", onAbort, { once: true });
    const handle = { abort: (why: "closed") => stop(why) };
    this.inflight.add(handle);
    const response = fetch(url, {
      method: init.method,
      headers: this.headers(init.stream),
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      signal: ctl.signal,
    });
    response.catch(() => undefined);
    return {
      response,
      touch() {
        clearTimeout(timer);
        timer = setTimeout(() => stop("timeout"), timeoutMs);
      },
      abort: () => stop("stopped"),
      done: () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.inflight.delete(handle);
      },
      get ended() {
        return ended;
      },
    };
  }

  /** The error for a request that failed before or while reading its response. */
  failure(url: string, call: Call, err: unknown): ReexError {
    if (err instanceof ReexError && err.code !== "CANCELLED") return err;
    if (call.ended === "timeout") return new ReexError("POLICY_ERROR", `the remote endpoint ${url} did not answer within ${this.timeoutMs} ms`, { cause: err });
    if (call.ended === "closed") return new ReexError("POLICY_ERROR", "the remote policy was closed");
    return new ReexError("POLICY_ERROR", `could not reach the remote endpoint ${url}: ${errorText(err)}`, { cause: err });
  }

  /** The error for an HTTP status that is not success. */
  statusError(url: string, status: number, body: string): ReexError {
    if (status === 401 || status === 403) {
      return new ReexError(
        "POLICY_ERROR",
        this.apiKey
          ? `the remote endpoint ${url} rejected the API key (HTTP ${status}); check policy.remoteApiKey`
          : `the remote endpoint ${url} requires an API key (HTTP ${status}); set policy.remoteApiKey`,
        { details: { url, status } },
      );
    }
    const snippet = body.replace(/\s+/g, " ").trim().slice(0, 300);
    return new ReexError("POLICY_ERROR", `the remote endpoint ${url} answered HTTP ${status}${snippet ? `: ${snippet}` : ""}`, { details: { url, status } });
  }

  /**
   * A JSON request. Statuses in `accept` (besides 2xx) are returned to the caller; any other
   * failure throws POLICY_ERROR. A caller abort throws CANCELLED.
   */
  async json(url: string, body: unknown, options: { method?: "GET" | "POST"; accept?: number[]; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<JsonReply> {
    const call = this.open(url, { method: options.method ?? "POST", body }, options.signal, options.timeoutMs);
    try {
      const res = await call.response;
      const text = await res.text();
      if (!res.ok && !(options.accept ?? []).includes(res.status)) throw this.statusError(url, res.status, text);
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status: res.status, json, text };
    } catch (err) {
      if (call.ended === "caller") throw new ReexError("CANCELLED", "cancelled while waiting for the remote endpoint", { cause: err });
      throw this.failure(url, call, err);
    } finally {
      call.done();
    }
  }

  /** Aborts every request in flight (close). */
  abortAll(): void {
    for (const h of [...this.inflight]) h.abort("closed");
  }
}

/**
 * The data payloads of a server-sent-event stream, parsed as JSON; `state.done` tells whether the
 * `[DONE]` sentinel arrived. A plain JSON body (a server that ignored `stream`) is one chunk.
 */
async function* completionChunks(res: Response, call: Call, state: { done: boolean }): AsyncGenerator<Record<string, unknown>> {
  const parse = (data: string): Record<string, unknown> => {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      throw new ReexError("POLICY_ERROR", `the remote endpoint sent a chunk that is not JSON: ${data.slice(0, 200)}`);
    }
    if (!isRecord(value)) throw new ReexError("POLICY_ERROR", `the remote endpoint sent an unexpected chunk: ${data.slice(0, 200)}`);
    return value;
  };
  if (!(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const text = await res.text();
    state.done = true;
    yield parse(text);
    return;
  }
  if (!res.body) throw new ReexError("POLICY_ERROR", "the remote endpoint sent no body");
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const dataOf = (event: string): string | undefined => {
    const lines = event.split(/\r?\n/).filter((l) => l.startsWith("data:"));
    if (lines.length === 0) return undefined;
    return lines.map((l) => l.slice(5).replace(/^ /, "")).join("\n");
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      call.touch();
      buffer += decoder.decode(value, { stream: true });
      for (;;) {
        const m = /\r?\n\r?\n/.exec(buffer);
        if (!m) break;
        const data = dataOf(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
        if (data === undefined || data.length === 0) continue;
        if (data.trim() === "[DONE]") {
          state.done = true;
          return;
        }
        yield parse(data);
      }
    }
    const data = dataOf(buffer + decoder.decode());
    if (data?.trim() === "[DONE]") state.done = true;
    else if (data) yield parse(data);
  } finally {
    reader.cancel().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Synchronous requests (Policy.tokenize / detokenize are synchronous)
// ---------------------------------------------------------------------------------------------

const SYNC_WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const flag = new Int32Array(workerData.shared);
parentPort.on("message", async (req) => {
  let reply;
  try {
    const res = await fetch(req.url, { method: "POST", headers: req.headers, body: req.body, signal: AbortSignal.timeout(req.timeoutMs) });
    reply = { id: req.id, status: res.status, text: await res.text() };
  } catch (err) {
    const code = err && err.cause && err.cause.code;
    reply = { id: req.id, error: String(code || (err && err.message) || err) };
  }
  workerData.port.postMessage(reply);
  Atomics.add(flag, 0, 1);
  Atomics.notify(flag, 0);
});
`;

interface SyncReply {
  id: number;
  status?: number;
  text?: string;
  error?: string;
}

/**
 * Blocking POSTs through a helper thread (the calling thread waits on `Atomics.wait`). Only the
 * synchronous `tokenize`/`detokenize` of the Policy seam use it; it blocks the event loop for one
 * round trip, so an endpoint served by the same thread would deadlock until the timeout.
 */
class SyncPoster {
  private worker: Worker | undefined;
  private flag: Int32Array | undefined;
  private port: MessagePort | undefined;
  private nextId = 1;

  post(url: string, headers: Record<string, string>, body: unknown, timeoutMs: number): { status: number; text: string } {
    if (!this.worker) {
      const shared = new SharedArrayBuffer(4);
      const { port1, port2 } = new MessageChannel();
      this.worker = new Worker(SYNC_WORKER_SOURCE, { eval: true, workerData: { shared, port: port2 }, transferList: [port2] });
      this.worker.unref();
      this.flag = new Int32Array(shared);
      this.port = port1;
    }
    const id = this.nextId++;
    const deadline = Date.now() + timeoutMs + 1000;
    let seen = Atomics.load(this.flag!, 0);
    this.worker.postMessage({ id, url, headers, body: JSON.stringify(body), timeoutMs });
    for (;;) {
      for (let m = receiveMessageOnPort(this.port!); m; m = receiveMessageOnPort(this.port!)) {
        const reply = m.message as SyncReply;
        if (reply.id !== id) continue;
        if (reply.error !== undefined) throw new ReexError("POLICY_ERROR", `could not reach the remote endpoint ${url}: ${reply.error}`);
        return { status: reply.status ?? 0, text: reply.text ?? "" };
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} did not answer within ${timeoutMs} ms`);
      Atomics.wait(this.flag!, 0, seen, left);
      seen = Atomics.load(this.flag!, 0);
    }
  }

  close(): void {
    void this.worker?.terminate();
    this.port?.close();
    this.worker = undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Trajectories
// ---------------------------------------------------------------------------------------------

/** What a trajectory carries; a fork copies it. */
interface TrajectoryState {
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

class RemoteTrajectory implements Trajectory {
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
    private readonly policy: RemotePolicy,
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
      const { temperature, topP } = samplingSettings(options);
      if (options.signal?.aborted) return emptyResult("aborted");
      const policy = this.policy;
      const ids = this.sentIds();
      const contextSize = policy.info.contextSize;
      let limit = options.maxTokens;
      if (contextSize > 0 && ids) limit = Math.min(limit, contextSize - ids.length);
      if (limit <= 0) return emptyResult("maxTokens");
      const stops = options.stop.filter((s) => s.length > 0);
      const body: Record<string, unknown> = {
        model: policy.info.model,
        prompt: ids ?? this.promptText + this.text,
        max_tokens: limit,
        temperature,
        top_p: topP,
        top_k: -1,
        min_p: 0,
        seed: options.seed ?? randomInt(0, 2 ** 31),
        ...(stops.length > 0 ? { stop: stops, include_stop_str_in_output: true } : {}),
        logprobs: 1,
        return_tokens_as_token_ids: true,
        stream: true,
        stream_options: { include_usage: true },
      };
      if (options.grammar !== undefined) setPath(body, policy.grammarField, options.grammar);
      Object.assign(body, policy.extraBody);

      const before = { tokens: this.record.tokens.length, text: this.text };
      const tokens: number[] = [];
      const logprobs: number[] = [];
      let text = "";
      let chunksWithText = 0;
      const matcher = new StopMatcher(stops);
      let stopReason: StopReason | undefined;
      let stop: string | undefined;
      let finish: string | undefined;
      let serverStop: unknown;
      let usage: unknown;
      let timings: unknown;
      const stream = { done: false };
      const url = `${policy.endpoint.base}/completions`;
      const call = policy.endpoint.open(url, { method: "POST", body, stream: true }, options.signal);
      const take = (entries: TokenEntry[]): void => {
        for (const e of entries) {
          tokens.push(e.id);
          logprobs.push(e.logprob);
        }
      };
      try {
        const res = await call.response;
        if (!res.ok) throw policy.endpoint.statusError(url, res.status, await res.text().catch(() => ""));
        for await (const chunk of completionChunks(res, call, stream)) {
          if (chunk.error !== undefined) {
            const e = chunk.error;
            const message = isRecord(e) && typeof e.message === "string" ? e.message : JSON.stringify(e);
            throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} failed while generating: ${message}`);
          }
          if (chunk.usage != null) usage = chunk.usage;
          if (chunk.timings != null) timings = chunk.timings;
          const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
          if (!isRecord(choice)) continue;
          const entries = tokenEntries(choice.logprobs);
          const delta = typeof choice.text === "string" ? choice.text : "";
          if (stopReason === "stop" && (entries.length > 0 || delta.length > 0)) {
            // The server went on past a stop string it should have honoured: we have our answer.
            call.abort();
            break;
          }
          if (stopReason !== "stop") {
            take(entries);
            if (delta.length > 0) {
              chunksWithText++;
              text += delta;
              options.onText?.(delta);
              const matched = matcher.match(text);
              if (matched) {
                stopReason = "stop";
                stop = matched.stop;
              }
            }
          }
          if (typeof choice.finish_reason === "string") {
            finish = choice.finish_reason;
            serverStop = choice.stop_reason;
          }
        }
      } catch (err) {
        if (call.ended === "caller") {
          if (stopReason !== "stop") stopReason = "aborted";
        } else if (call.ended !== "stopped") {
          throw policy.endpoint.failure(url, call, err);
        }
      } finally {
        call.done();
      }

      if (stopReason === undefined) {
        if (finish === "length") stopReason = "maxTokens";
        else if (finish === "stop" || finish === "eos") {
          stopReason = "eos";
          if (stops.length > 0) {
            const dropped = await this.droppedStop(stops, tokens, text, serverStop);
            if (dropped) {
              stopReason = "stop";
              stop = dropped.stop;
              if (dropped.text.length > text.length) options.onText?.(dropped.text.slice(text.length));
              text = dropped.text;
            }
          }
        } else if (finish === undefined) {
          throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} ended the stream before the completion finished`);
        } else {
          throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} ended the completion with finish_reason "${finish}"`);
        }
      }

      const reported = reportedUsage(usage, timings);
      if (tokens.length === 0 && text.length > 0) {
        // The server reported no per-token logprobs: keep the count right with unknown ids.
        const n = finite(isRecord(usage) ? usage.completion_tokens : undefined) ?? chunksWithText;
        for (let i = 0; i < n; i++) {
          tokens.push(-1);
          logprobs.push(0);
        }
      }
      for (let i = 0; i < tokens.length; i++) {
        this.record.tokens.push(tokens[i]!);
        this.record.sampled.push(1);
        this.record.logprobs.push(logprobs[i]!);
      }
      if (tokens.some((t) => t < 0)) this.exact = false;
      this.text = before.text + text;

      const sent = ids?.length ?? reported.promptTokens;
      if (!this.promptIds && this.promptCount === 0 && before.tokens === 0 && reported.promptTokens !== undefined) this.promptCount = reported.promptTokens;
      if (reported.uncached !== undefined) this.evaluated += reported.uncached;
      else if (sent !== undefined) this.evaluated += Math.max(0, sent - this.seen);
      this.evaluated += tokens.length;
      this.generated += tokens.length;
      if (sent !== undefined) this.seen = sent + tokens.length;
      return { text, tokens, logprobs, stopReason, ...(stop !== undefined ? { stop } : {}) };
    });
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

// ---------------------------------------------------------------------------------------------
// The policy
// ---------------------------------------------------------------------------------------------

type TokenizeStyle = "unknown" | "llama" | "vllm" | "none";

/** The remote policy; see {@link createRemotePolicy}. */
class RemotePolicy implements Policy {
  readonly info: PolicyInfo;
  readonly endpoint: Endpoint;
  readonly grammarField: string;
  readonly extraBody: Record<string, unknown>;
  epoch = 0;
  private style: TokenizeStyle;
  private readonly template: string | undefined;
  private readonly log: ((message: string) => void) | undefined;
  private readonly tokenCache = new Map<string, number[]>();
  private readonly sync = new SyncPoster();
  private readonly live = new Set<RemoteTrajectory>();
  private readonly waiters: { wake: () => void; fail: (err: unknown) => void }[] = [];
  private held = 0;
  private nextId = 1;
  private closed = false;

  constructor(options: RemotePolicyOptions, endpoint: Endpoint, model: string, contextSize: number) {
    this.endpoint = endpoint;
    this.template = options.chatTemplate;
    this.grammarField = options.grammarField ?? "grammar";
    this.extraBody = { ...(options.extraBody ?? {}) };
    this.style = options.tokenizer === "none" ? "none" : "unknown";
    this.log = options.log;
    this.info = {
      backend: "remote",
      model,
      device: "remote",
      contextSize,
      maxSequences: options.maxSequences ?? DEFAULT_MAX_SEQUENCES,
      lora: [],
    };
  }

  renderChat(messages: ChatMessage[], options: { sharedPrefix?: string } = {}): PromptSpec {
    const parts = this.template !== undefined ? renderTemplate(this.template, messages) : renderChatML(messages);
    return promptFromParts(parts, options.sharedPrefix, contentOffset(parts, messages.at(-1)?.content ?? ""));
  }

  async start(prompt: PromptSpec, options: { signal?: AbortSignal } = {}): Promise<Trajectory> {
    const text = prompt.prefix + prompt.suffix;
    if (text.length === 0) throw new ReexError("POLICY_ERROR", "cannot start a trajectory from an empty prompt");
    await this.reserveWaiting(options.signal);
    try {
      const ids = await this.tokenizePrompt(prompt, options.signal);
      const contextSize = this.info.contextSize;
      if (ids && contextSize > 0 && ids.length >= contextSize) {
        throw new ReexError("CONTEXT_EXHAUSTED", `the prompt has ${ids.length} tokens; the context window holds ${contextSize} (prompt and output)`);
      }
      if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
      return this.adopt(text, ids, { text: "", record: { tokens: [], sampled: [], logprobs: [] }, exact: ids !== null, promptCount: 0, seen: 0 });
    } catch (err) {
      this.free();
      throw err;
    }
  }

  /** Prompt ids, piece by piece (template text with control tokens, message content as plain text); null without a tokenizer. */
  private async tokenizePrompt(prompt: PromptSpec, signal?: AbortSignal): Promise<number[] | null> {
    const pieces = [...piecesOf(prompt.prefix, prompt.parts?.prefix), ...piecesOf(prompt.suffix, prompt.parts?.suffix)];
    const out: number[] = [];
    // The first piece goes through on its own: it detects the tokenizer style and adds BOS when the model wants one.
    const first = await this.tokenizeRemote(pieces[0]!.text, pieces[0]!.special, true, signal);
    if (first === null) return null;
    out.push(...first);
    const rest = await Promise.all(pieces.slice(1).map((p) => this.tokenizeRemote(p.text, p.special, false, signal)));
    for (const ids of rest) {
      if (ids === null) return null;
      out.push(...ids);
    }
    return out;
  }

  private cacheKey(text: string, special: boolean, bos: boolean): string {
    return `${special ? 1 : 0}${bos ? 1 : 0}${text}`;
  }

  private remember(key: string, ids: number[]): void {
    this.tokenCache.set(key, ids);
    if (this.tokenCache.size > TOKEN_CACHE_ENTRIES) this.tokenCache.delete(this.tokenCache.keys().next().value!);
  }

  private tokenizeBody(style: "llama" | "vllm", text: string, special: boolean, bos: boolean): Record<string, unknown> {
    // vLLM's /tokenize always recognises special-token spellings; llama-server lets us say.
    return style === "llama" ? { content: text, add_special: bos, parse_special: special } : { model: this.info.model, prompt: text, add_special_tokens: bos };
  }

  private noTokenizer(why: string): null {
    if (this.style !== "none") {
      this.style = "none";
      this.log?.(`remote policy: ${why}; trajectories send text and record only sampled tokens`);
    }
    return null;
  }

  /**
   * Token ids for `text` from the endpoint (cached); null when it cannot tokenise. `special`:
   * control-token spellings become control tokens; `bos`: add the model's BOS if it wants one.
   */
  async tokenizeRemote(text: string, special: boolean, bos: boolean, signal?: AbortSignal): Promise<number[] | null> {
    if (this.style === "none") return null;
    if (text.length === 0 && !bos) return [];
    const key = this.cacheKey(text, special, bos);
    const hit = this.tokenCache.get(key);
    if (hit) return [...hit];
    const url = `${this.endpoint.root}/tokenize`;
    const styles: ("llama" | "vllm")[] = this.style === "unknown" ? ["llama", "vllm"] : [this.style];
    const detecting = this.style === "unknown";
    for (const style of styles) {
      const reply = await this.endpoint.json(url, this.tokenizeBody(style, text, special, bos), {
        ...(detecting ? { accept: [400, 404, 405, 422] } : {}),
        ...(signal ? { signal } : {}),
      });
      if (reply.status === 404 || reply.status === 405) return this.noTokenizer(`${url} answered HTTP ${reply.status}`);
      const ids = isRecord(reply.json) ? tokenArray(reply.json.tokens) : undefined;
      if (reply.status < 300 && ids) {
        this.style = style;
        this.remember(key, ids);
        return [...ids];
      }
      if (!detecting) throw new ReexError("POLICY_ERROR", `the remote endpoint ${url} sent no token ids`);
    }
    return this.noTokenizer(`${url} did not tokenise in the llama-server or vLLM style`);
  }

  /** Text of token ids from the endpoint's /detokenize; null when it has none. */
  async detokenizeAsync(tokens: readonly number[]): Promise<string | null> {
    if (this.style !== "llama" && this.style !== "vllm") return null;
    const url = `${this.endpoint.root}/detokenize`;
    const reply = await this.endpoint.json(url, this.style === "llama" ? { tokens } : { model: this.info.model, tokens }, { accept: [400, 404, 405, 422] });
    if (reply.status >= 300 || !isRecord(reply.json)) return null;
    const text = reply.json.content ?? reply.json.prompt;
    return typeof text === "string" ? text : null;
  }

  /** A blocking POST for the synchronous seam methods. */
  private postSync(path: string, body: unknown, accept: number[]): { status: number; json: unknown } {
    if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
    const url = `${this.endpoint.root}${path}`;
    const reply = this.sync.post(url, this.endpoint.headers(), body, this.endpoint.timeoutMs);
    if ((reply.status < 200 || reply.status >= 300) && !accept.includes(reply.status)) throw this.endpoint.statusError(url, reply.status, reply.text);
    let json: unknown;
    try {
      json = JSON.parse(reply.text);
    } catch {
      json = undefined;
    }
    return { status: reply.status, json };
  }

  /**
   * Token ids as a prompt would tokenise `text` (control-token spellings recognised, no BOS). Served
   * from the tokenisation cache when possible, else by a blocking round trip to `/tokenize` (this
   * waits on the event loop: meant for offline code such as SFT record building). POLICY_ERROR when
   * the endpoint cannot tokenise.
   */
  tokenize(text: string): number[] {
    if (text.length === 0) return [];
    const key = this.cacheKey(text, true, false);
    const hit = this.tokenCache.get(key);
    if (hit) return [...hit];
    if (this.style === "none") throw new ReexError("POLICY_ERROR", `the remote endpoint ${this.endpoint.root} cannot tokenise (no /tokenize)`);
    const styles: ("llama" | "vllm")[] = this.style === "unknown" ? ["llama", "vllm"] : [this.style];
    for (const style of styles) {
      const reply = this.postSync("/tokenize", this.tokenizeBody(style, text, true, false), [400, 404, 405, 422]);
      const ids = isRecord(reply.json) ? tokenArray(reply.json.tokens) : undefined;
      if (reply.status < 300 && ids) {
        this.style = style;
        this.remember(key, ids);
        return [...ids];
      }
      if (reply.status === 404 || reply.status === 405) break;
    }
    this.noTokenizer(`${this.endpoint.root}/tokenize is missing or unusable`);
    throw new ReexError("POLICY_ERROR", `the remote endpoint ${this.endpoint.root} cannot tokenise (no usable /tokenize)`);
  }

  /** Text for token ids (control tokens spelled) through a blocking round trip to `/detokenize` (see {@link tokenize}). */
  detokenize(tokens: readonly number[]): string {
    if (tokens.length === 0) return "";
    const styles: ("llama" | "vllm")[] = this.style === "llama" || this.style === "vllm" ? [this.style] : ["llama", "vllm"];
    for (const style of styles) {
      const reply = this.postSync("/detokenize", style === "llama" ? { tokens } : { model: this.info.model, tokens }, [400, 404, 405, 422]);
      const text = isRecord(reply.json) ? (reply.json.content ?? reply.json.prompt) : undefined;
      if (reply.status < 300 && typeof text === "string") return text;
    }
    throw new ReexError("POLICY_ERROR", `the remote endpoint ${this.endpoint.root} cannot detokenise (no usable /detokenize)`);
  }

  liveTrajectories(): number {
    return this.live.size;
  }

  /** @internal */
  adopt(promptText: string, promptIds: readonly number[] | null, state: TrajectoryState): RemoteTrajectory {
    const t = new RemoteTrajectory(this, `r${this.nextId++}`, promptText, promptIds, state, this.epoch);
    this.live.add(t);
    return t;
  }

  /** @internal Takes a slot now or fails with CONTEXT_EXHAUSTED (forks must not wait). */
  reserveNow(): void {
    if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
    if (this.held >= this.info.maxSequences) throw new ReexError("CONTEXT_EXHAUSTED", `all ${this.info.maxSequences} remote sequences are held by live trajectories`);
    this.held++;
  }

  /** Takes a slot, waiting (abortable, first come first served) while all are held. */
  private async reserveWaiting(signal?: AbortSignal): Promise<void> {
    let woken = false;
    for (;;) {
      if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
      if (signal?.aborted) throw new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal.reason });
      if (this.held < this.info.maxSequences && (woken || this.waiters.length === 0)) {
        this.held++;
        return;
      }
      await new Promise<void>((resolve, reject) => {
        const waiter = {
          wake: () => {
            signal?.removeEventListener("abort", onAbort);
            resolve();
          },
          fail: (err: unknown) => {
            signal?.removeEventListener("abort", onAbort);
            reject(err);
          },
        };
        const onAbort = (): void => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal?.reason }));
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(waiter);
      });
      woken = true;
    }
  }

  /** Gives a slot back and wakes the first waiter. */
  private free(): void {
    this.held = Math.max(0, this.held - 1);
    this.waiters.shift()?.wake();
  }

  /** @internal */
  forget(t: RemoteTrajectory): void {
    if (this.live.delete(t)) this.free();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.epoch++;
    this.endpoint.abortAll();
    this.live.clear();
    this.held = 0;
    for (const w of this.waiters.splice(0)) w.fail(new ReexError("SHUTTING_DOWN", "the policy is closing"));
    this.sync.close();
  }
}

/** What `GET {url}/models` and `GET {root}/props` say about the deployment. */
async function probeEndpoint(endpoint: Endpoint): Promise<{ model?: string; contextSize?: number; error?: ReexError }> {
  const out: { model?: string; contextSize?: number; error?: ReexError } = {};
  const timeoutMs = Math.min(endpoint.timeoutMs, PROBE_TIMEOUT_MS);
  try {
    const models = await endpoint.json(`${endpoint.base}/models`, undefined, { method: "GET", accept: [404, 405], timeoutMs });
    const data = isRecord(models.json) && Array.isArray(models.json.data) ? models.json.data : [];
    const first = data.find(isRecord);
    if (first && typeof first.id === "string") out.model = first.id;
    const maxLen = first ? finite(first.max_model_len) : undefined;
    if (maxLen !== undefined && maxLen > 0) out.contextSize = maxLen;
  } catch (err) {
    out.error = err instanceof ReexError ? err : new ReexError("POLICY_ERROR", errorText(err));
    return out;
  }
  if (out.contextSize === undefined) {
    try {
      const props = await endpoint.json(`${endpoint.root}/props`, undefined, { method: "GET", accept: [400, 404, 405, 501], timeoutMs });
      const settings = isRecord(props.json) ? props.json.default_generation_settings : undefined;
      const nCtx = isRecord(settings) ? finite(settings.n_ctx) : isRecord(props.json) ? finite(props.json.n_ctx) : undefined;
      if (nCtx !== undefined && nCtx > 0) out.contextSize = nCtx;
    } catch {
      // /props is llama-server's; its absence says nothing
    }
  }
  return out;
}

/**
 * A Policy that generates through a remote OpenAI-compatible completions endpoint. Asks the
 * endpoint for its model name (when none is given) and context size; an endpoint that cannot be
 * reached yet is only a warning when `model` is given (requests fail with POLICY_ERROR until it
 * answers). Fails with CONFIG_INVALID for a bad URL or template, POLICY_ERROR for a rejected key.
 */
export async function createRemotePolicy(options: RemotePolicyOptions): Promise<Policy> {
  let parsed: URL;
  try {
    parsed = new URL(options.url);
  } catch {
    throw new ReexError("CONFIG_INVALID", `the remote policy URL is not a URL: ${options.url}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new ReexError("CONFIG_INVALID", `the remote policy URL must be http(s): ${options.url}`);
  if (options.chatTemplate !== undefined && !options.chatTemplate.includes("{user}")) {
    throw new ReexError("CONFIG_INVALID", "the remote chat template must contain a {user} placeholder");
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxSequences = options.maxSequences ?? DEFAULT_MAX_SEQUENCES;
  if (!(timeoutMs > 0) || !(maxSequences >= 1)) throw new ReexError("CONFIG_INVALID", "the remote policy needs timeoutMs > 0 and maxSequences ≥ 1");
  const endpoint = new Endpoint(options.url, options.apiKey, timeoutMs);
  const probe = await probeEndpoint(endpoint);
  const status = probe.error?.details?.status;
  if (status === 401 || status === 403) throw probe.error!;
  const model = options.model ?? probe.model;
  if (model === undefined) {
    throw new ReexError(
      "CONFIG_INVALID",
      `no remote model name: set policy.remoteModel, or make ${endpoint.base}/models list one${probe.error ? ` (${probe.error.message})` : ""}`,
    );
  }
  if (probe.error) options.log?.(`remote policy: ${probe.error.message}; requests will fail until the endpoint answers`);
  return new RemotePolicy(options, endpoint, model, options.contextSize ?? probe.contextSize ?? 0);
}

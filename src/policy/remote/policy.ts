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
import { ReexError } from "../../errors/index.js";
import { contentOffset, piecesOf, promptFromParts } from "../prompt.js";
import type { ChatMessage, ModelMetadata, Policy, PolicyInfo, PromptSpec, Trajectory } from "../types.js";
import { Endpoint, isRecord, SyncPoster, tokenArray } from "./endpoint.js";
import { probeEndpoint, remoteMetadata, serverTemplate } from "./probe.js";
import { renderChatML, renderTemplate } from "./template.js";
import { SequenceWaiters } from "../waiters.js";
import { RemoteTrajectory, type TrajectoryHost, type TrajectoryState } from "./trajectory.js";

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
   * Leave BOS out: the server adds the model's BOS when it tokenises the prompt. Overrides the
   * server's own template.
   */
  chatTemplate?: string;
  /**
   * Without `chatTemplate`, render through the model's own template as the server applies it
   * (llama-server's `POST /apply-template`, read once at start); ChatML when the server has none.
   * Default true.
   */
  serverTemplate?: boolean;
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
const TOKEN_CACHE_ENTRIES = 512;

type TokenizeStyle = "unknown" | "llama" | "vllm" | "none";

/** The remote policy; see {@link createRemotePolicy}. */
class RemotePolicy implements Policy, TrajectoryHost {
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
  /** Callers waiting for a free slot; a woken one takes the slot {@link RemotePolicy.free} gave back. */
  private readonly waiters = new SequenceWaiters<void>();
  private held = 0;
  private nextId = 1;
  private closed = false;

  constructor(options: RemotePolicyOptions, endpoint: Endpoint, model: string, contextSize: number, template: string | undefined, metadata: ModelMetadata) {
    this.endpoint = endpoint;
    this.template = template;
    this.grammarField = options.grammarField ?? "grammar";
    this.extraBody = { ...(options.extraBody ?? {}) };
    this.style = options.tokenizer === "none" ? "none" : "unknown";
    this.log = options.log;
    this.info = {
      backend: "remote",
      model,
      metadata,
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
    if (this.held >= this.info.maxSequences)
      throw new ReexError("CONTEXT_EXHAUSTED", `all ${this.info.maxSequences} remote sequences are held by live trajectories`);
    this.held++;
  }

  /** Takes a slot, waiting (abortable, first come first served) while all are held. */
  private async reserveWaiting(signal?: AbortSignal): Promise<void> {
    let woken = false;
    for (;;) {
      if (this.closed) throw new ReexError("POLICY_ERROR", "the policy is closed");
      if (signal?.aborted) throw new ReexError("CANCELLED", "cancelled while waiting for a free sequence", { cause: signal.reason });
      if (this.held < this.info.maxSequences && (woken || this.waiters.size === 0)) {
        this.held++;
        return;
      }
      await this.waiters.wait(signal);
      woken = true;
    }
  }

  /** Gives a slot back and wakes the first waiter. */
  private free(): void {
    this.held = Math.max(0, this.held - 1);
    this.waiters.handFirst();
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
    this.waiters.rejectAll(new ReexError("SHUTTING_DOWN", "the policy is closing"));
    this.sync.close();
  }
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
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    throw new ReexError("CONFIG_INVALID", `the remote policy URL must be http(s): ${options.url}`);
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
  let template = options.chatTemplate;
  if (template === undefined && options.serverTemplate !== false && !probe.error) {
    template = await serverTemplate(endpoint, probe.bosToken);
    if (template !== undefined) options.log?.(`remote policy: rendering prompts with the server's chat template (${endpoint.root}/apply-template)`);
  }
  return new RemotePolicy(options, endpoint, model, options.contextSize ?? probe.contextSize ?? 0, template, remoteMetadata(model, probe));
}

/**
 * A small but real OpenAI-compatible completions server for tests of the remote policy: fastify on
 * 127.0.0.1 (a free port), generating with the REAL tiny GGUF through this project's own llama
 * policy. It speaks the vLLM dialect: `POST /v1/completions` (SSE streaming and plain JSON) with
 * `stop` (+ `include_stop_str_in_output`), `max_tokens`, `temperature`, `top_p`, `seed`, `grammar`,
 * `logprobs` in the OpenAI completions shape (`tokens` as "token_id:N" with
 * `return_tokens_as_token_ids`), `usage` (in the stream with `stream_options.include_usage`) with
 * `prompt_tokens_details.cached_tokens` from an emulated prefix cache; `POST /tokenize` and
 * `POST /detokenize` in the llama-server or vLLM style; `GET /v1/models` with `max_model_len`.
 *
 * Each completion starts a fresh trajectory from the prompt (token-id prompts are detokenised and
 * re-tokenised), samples the whole answer, then streams it one token per chunk (`delayMs` apart),
 * stopping when the client disconnects. Run this file directly (`node --import tsx …`) to serve
 * from a child process: it prints `{"url": …}` on stdout.
 */
import { pathToFileURL } from "node:url";
import Fastify from "fastify";
import { createLlamaPolicy, type GenerateResult, type Policy } from "../../src/policy/index.js";
import { ensureTestModel, testPolicyOptions } from "./model.js";

/** Behaviour a test may change while the peer runs. */
export interface PeerBehaviour {
  /** Milliseconds between streamed chunks. Default 0. */
  delayMs: number;
  /** Answer every completion with this HTTP status (and an OpenAI error body). Default none. */
  failStatus?: number;
  /** Bearer key required on every route; undefined: none. */
  apiKey?: string;
  /** `/tokenize` and `/detokenize` dialect, or "none" for 404. Default "llama". */
  tokenize: "llama" | "vllm" | "none";
  /**
   * How a stop string ends a completion: "vllm" honours `include_stop_str_in_output` and names the
   * string in `stop_reason`; "llama-server" always leaves it out of the text and sends no `stop_reason`.
   * Default "vllm".
   */
  stopStyle: "vllm" | "llama-server";
}

/** A running peer. */
export interface OpenAIPeer {
  /** Base URL of the OpenAI API: `http://127.0.0.1:PORT/v1`. */
  url: string;
  /** The model name it reports and expects. */
  model: string;
  /** Context window it reports (`max_model_len`). */
  contextSize: number;
  policy: Policy;
  behaviour: PeerBehaviour;
  /** Every completion request body, in arrival order. */
  completions: Record<string, unknown>[];
  /** Completion streams the client closed before the end. */
  disconnects: number;
  close(): Promise<void>;
}

/** Options of {@link startOpenAIPeer}. */
export interface OpenAIPeerOptions extends Partial<PeerBehaviour> {
  /** Model name. Default "tiny". */
  model?: string;
  /** A policy to serve; default the tiny test model (CPU, one thread), closed with the peer. */
  policy?: Policy;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function commonPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** Tokenises `text` without recognising control-token spellings (through an appended trajectory). */
async function plainTokens(policy: Policy, text: string): Promise<number[]> {
  const t = await policy.start({ prefix: "", suffix: " " });
  try {
    return (await t.append(text)).tokens;
  } finally {
    await t.release();
  }
}

/** Each sampled token's text, incomplete characters held back to the token that completes them (EOS: ""). */
function tokenPieces(policy: Policy, result: GenerateResult): string[] {
  const pieces: string[] = [];
  let emitted = "";
  const textTokens = result.stopReason === "eos" ? result.tokens.slice(0, -1) : result.tokens;
  for (let i = 0; i < textTokens.length; i++) {
    const whole = policy.detokenize(textTokens.slice(0, i + 1));
    const stable = i === textTokens.length - 1 ? whole : whole.replace(/\uFFFD+$/u, "");
    const piece = stable.startsWith(emitted) ? stable.slice(emitted.length) : "";
    pieces.push(piece);
    emitted += piece;
  }
  if (emitted !== result.text && result.text.startsWith(emitted) && pieces.length > 0) pieces[pieces.length - 1] += result.text.slice(emitted.length);
  if (result.stopReason === "eos") pieces.push("");
  return pieces;
}

/** Cuts pieces so that their text ends at `end` characters. */
function cutPieces(pieces: string[], end: number): string[] {
  let pos = 0;
  return pieces.map((p) => {
    const keep = Math.max(0, Math.min(p.length, end - pos));
    pos += p.length;
    return p.slice(0, keep);
  });
}

function errorBody(message: string, type = "invalid_request_error"): { error: { message: string; type: string } } {
  return { error: { message, type } };
}

/** Starts a peer on 127.0.0.1 at a free port. */
export async function startOpenAIPeer(options: OpenAIPeerOptions = {}): Promise<OpenAIPeer> {
  const model = options.model ?? "tiny";
  const ownPolicy = !options.policy;
  let policy = options.policy;
  if (!policy) {
    await ensureTestModel();
    policy = await createLlamaPolicy(testPolicyOptions({ threads: 1, sequences: 8 }));
  }
  const served = policy;
  const contextSize = served.info.contextSize;
  const behaviour: PeerBehaviour = {
    delayMs: options.delayMs ?? 0,
    tokenize: options.tokenize ?? "llama",
    stopStyle: options.stopStyle ?? "vllm",
    ...(options.failStatus !== undefined ? { failStatus: options.failStatus } : {}),
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
  };
  const recentPrompts: number[][] = [];
  const completions: Record<string, unknown>[] = [];
  let nextId = 1;
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 });

  app.addHook("onRequest", async (request, reply) => {
    if (behaviour.apiKey !== undefined && request.headers.authorization !== `Bearer ${behaviour.apiKey}`) {
      await reply.code(401).send(errorBody("invalid api key", "authentication_error"));
    }
  });

  app.get("/v1/models", async () => ({ object: "list", data: [{ id: model, object: "model", owned_by: "reex-test", max_model_len: contextSize }] }));

  app.post("/tokenize", async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (behaviour.tokenize === "none") return reply.code(404).send(errorBody("not found"));
    if (behaviour.tokenize === "vllm") {
      if (typeof body.prompt !== "string") return reply.code(400).send(errorBody("prompt is required"));
      const tokens = served.tokenize(body.prompt);
      return { count: tokens.length, max_model_len: contextSize, tokens };
    }
    if (typeof body.content !== "string") return { tokens: [] };
    const tokens = body.parse_special === false ? await plainTokens(served, body.content) : served.tokenize(body.content);
    return { tokens };
  });

  app.post("/detokenize", async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (behaviour.tokenize === "none") return reply.code(404).send(errorBody("not found"));
    const tokens = Array.isArray(body.tokens) ? (body.tokens as number[]) : [];
    const text = served.detokenize(tokens);
    return behaviour.tokenize === "vllm" ? { prompt: text } : { content: text };
  });

  app.post("/v1/completions", async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    completions.push(body);
    if (behaviour.failStatus !== undefined) return reply.code(behaviour.failStatus).send(errorBody("injected failure", "server_error"));
    if (body.model !== model) return reply.code(404).send(errorBody(`model ${String(body.model)} does not exist`));
    const prompt = body.prompt;
    let promptText: string;
    if (typeof prompt === "string") promptText = prompt;
    else if (Array.isArray(prompt) && prompt.every((t) => Number.isInteger(t))) promptText = served.detokenize(prompt as number[]);
    else return reply.code(400).send(errorBody("prompt must be a string or a list of token ids"));
    const stops = typeof body.stop === "string" ? [body.stop] : Array.isArray(body.stop) ? (body.stop as string[]) : [];
    const stream = body.stream === true;
    const logprobs = typeof body.logprobs === "number" && body.logprobs >= 0;
    const asIds = body.return_tokens_as_token_ids === true;
    const includeStop = body.include_stop_str_in_output === true && behaviour.stopStyle === "vllm";
    const includeUsage = !stream || (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;

    const disconnect = new AbortController();
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) disconnect.abort();
    });
    let result: GenerateResult;
    let promptTokens: number[];
    const trajectory = await served.start({ prefix: "", suffix: promptText });
    try {
      promptTokens = trajectory.promptTokens.slice();
      result = await trajectory.generate({
        stop: stops,
        maxTokens: typeof body.max_tokens === "number" ? body.max_tokens : 16,
        temperature: typeof body.temperature === "number" ? body.temperature : 1,
        topP: typeof body.top_p === "number" ? body.top_p : 1,
        ...(typeof body.seed === "number" ? { seed: body.seed } : {}),
        ...(typeof body.grammar === "string" ? { grammar: body.grammar } : {}),
        signal: disconnect.signal,
      });
    } finally {
      await trajectory.release();
    }
    // The emulated prefix cache holds what recent requests evaluated: their prompt and output ids.
    const sentIds = Array.isArray(prompt) ? (prompt as number[]) : promptTokens;
    const cached = recentPrompts.reduce((m, p) => Math.max(m, commonPrefix(p, sentIds)), 0);
    recentPrompts.push([...sentIds, ...result.tokens]);
    if (recentPrompts.length > 32) recentPrompts.shift();

    let pieces = tokenPieces(served, result);
    let finish: "stop" | "length" = result.stopReason === "maxTokens" ? "length" : "stop";
    let stopReason: string | null = null;
    if (result.stopReason === "stop" && result.stop !== undefined) {
      const at = result.text.indexOf(result.stop);
      pieces = cutPieces(pieces, includeStop ? at + result.stop.length : at);
      if (behaviour.stopStyle === "vllm") stopReason = result.stop;
    }
    if (result.stopReason === "aborted") finish = "length";
    const usage = {
      prompt_tokens: sentIds.length,
      completion_tokens: result.tokens.length,
      total_tokens: sentIds.length + result.tokens.length,
      prompt_tokens_details: { cached_tokens: cached },
    };
    const id = `cmpl-${nextId++}`;
    const created = Math.floor(Date.now() / 1000);
    const lp = (from: number, to: number, offset: number) => {
      if (!logprobs) return null;
      const tokens: string[] = [];
      const offsets: number[] = [];
      let pos = offset;
      for (let i = from; i < to; i++) {
        tokens.push(asIds ? `token_id:${result.tokens[i]}` : pieces[i]!);
        offsets.push(pos);
        pos += pieces[i]!.length;
      }
      const values = result.logprobs.slice(from, to);
      return { tokens, token_logprobs: values, top_logprobs: tokens.map((t, i) => ({ [t]: values[i] })), text_offset: offsets };
    };

    if (!stream) {
      return {
        id,
        object: "text_completion",
        created,
        model,
        choices: [{ index: 0, text: pieces.join(""), logprobs: lp(0, pieces.length, 0), finish_reason: finish, stop_reason: stopReason }],
        usage,
      };
    }
    reply.hijack();
    const raw = reply.raw;
    raw.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const send = (data: unknown): void => {
      if (!disconnect.signal.aborted) raw.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    let offset = 0;
    for (let i = 0; i < pieces.length; i++) {
      if (disconnect.signal.aborted) break;
      if (i > 0 && behaviour.delayMs > 0) await sleep(behaviour.delayMs);
      send({ id, object: "text_completion", created, model, choices: [{ index: 0, text: pieces[i], logprobs: lp(i, i + 1, offset), finish_reason: null }] });
      offset += pieces[i]!.length;
    }
    if (disconnect.signal.aborted) {
      peer.disconnects++;
      return reply;
    }
    send({
      id,
      object: "text_completion",
      created,
      model,
      choices: [{ index: 0, text: "", logprobs: null, finish_reason: finish, ...(behaviour.stopStyle === "vllm" ? { stop_reason: stopReason } : {}) }],
    });
    if (includeUsage) send({ id, object: "text_completion", created, model, choices: [], usage });
    raw.end("data: [DONE]\n\n");
    return reply;
  });

  await app.listen({ host: "127.0.0.1", port: 0 });
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const peer: OpenAIPeer = {
    url: `http://127.0.0.1:${port}/v1`,
    model,
    contextSize,
    policy: served,
    behaviour,
    completions,
    disconnects: 0,
    async close() {
      await app.close();
      if (ownPolicy) await served.close();
    },
  };
  return peer;
}

// Run directly: serve from this process until SIGTERM, printing the URL as one JSON line.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const peer = await startOpenAIPeer({ tokenize: (process.env.PEER_TOKENIZE as PeerBehaviour["tokenize"] | undefined) ?? "llama" });
  process.stdout.write(JSON.stringify({ url: peer.url, model: peer.model }) + "\n");
  const stop = (): void => {
    void peer.close().finally(() => process.exit(0));
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

/**
 * Reading a streamed completion: the server-sent-event chunks of `POST /completions` and the
 * sampled tokens each chunk's `logprobs` carries, in the OpenAI and llama-server shapes.
 */
import { ReexError } from "../../errors/index.js";
import { isRecord, type Call } from "./endpoint.js";

const MIN_LOGPROB = Math.log(1e-45);

/** One sampled token as a completion chunk reports it; `id` -1 when the server gave no id. */
export interface TokenEntry {
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
export function tokenEntries(logprobs: unknown): TokenEntry[] {
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

/**
 * The data payloads of a server-sent-event stream, parsed as JSON; `state.done` tells whether the
 * `[DONE]` sentinel arrived. A plain JSON body (a server that ignored `stream`) is one chunk.
 */
export async function* completionChunks(res: Response, call: Call, state: { done: boolean }): AsyncGenerator<Record<string, unknown>> {
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

/**
 * The remote policy's HTTP side: URLs, headers, timeouts and aborts for one OpenAI-compatible
 * endpoint, its failures turned into ReexErrors that name the URL, and the blocking POSTs behind
 * the synchronous `tokenize`/`detokenize` of the Policy seam.
 */
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import { ReexError } from "../../errors/index.js";

/** A short reason for a failed request: the socket error code (ECONNREFUSED…) when there is one. */
export function errorText(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const code = cause && typeof cause === "object" ? (cause as { code?: unknown }).code : undefined;
    if (typeof code === "string") return code;
    if (cause instanceof Error && cause.message) return cause.message;
    return err.message;
  }
  return String(err);
}

/** A plain JSON object. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The value when it is a finite number. */
export function finite(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** Token ids from a `/tokenize` reply: plain ids or `{id, piece}` entries; undefined if any is not an integer. */
export function tokenArray(value: unknown): number[] | undefined {
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
export function setPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let at = target;
  for (const key of keys.slice(0, -1)) {
    const next = at[key];
    if (isRecord(next)) at = next;
    else at = at[key] = {};
  }
  at[keys.at(-1)!] = value;
}

/** A response body read as JSON (undefined when it is not JSON). */
export interface JsonReply {
  status: number;
  json: unknown;
  text: string;
}

/** An HTTP exchange in flight: abortable, with an idle timer that streamed chunks reset. */
export interface Call {
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
export class Endpoint {
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
  async json(
    url: string,
    body: unknown,
    options: { method?: "GET" | "POST"; accept?: number[]; signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<JsonReply> {
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
export class SyncPoster {
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

/**
 * Answering one question for the HTTP and WebSocket routes alike: resolve the database for the
 * caller, queue the decode with a deadline, forward events, and shape the answer for the API.
 */
import type { FastifyBaseLogger } from "fastify";
import { rewritesIn } from "../agent/index.js";
import { answerView, roundMs, type Answer, type AnswerRequest } from "../decoding/index.js";
import { ReexError } from "../errors/index.js";
import type { EventSink, ReexEvent } from "../events/index.js";
import { jsonResult, jsonSafe } from "./json.js";
import type { SqlRequest, SqlResponse } from "./schemas.js";
import type { ServerState } from "./state.js";

/** Options of one answer run. */
export interface AnswerOptions {
  /** Receives every event of the decode as it happens. */
  sink?: EventSink;
  /** Aborting it (client gone, cancel message) aborts the decode with its reason. */
  cancel?: AbortSignal;
  log: FastifyBaseLogger;
  /** Whose share of the generation queue the decode takes: the key identity, or `ip:<address>` without keys. Default: the owner. */
  tenant?: string;
}

/**
 * The body's fields the decoder takes as they are. The server fills in none: what the body leaves
 * out, the decoder resolves from the same config (`decoderDefaults`), the one layer of defaults.
 */
const PASSED_THROUGH = [
  "evidence",
  "strategy",
  "candidates",
  "branching",
  "maxInteractions",
  "maxTokens",
  "feedback",
  "schemaHints",
  "temperature",
  "topP",
  "seed",
  "constrained",
  "profile",
] as const satisfies readonly (keyof SqlRequest & keyof AnswerRequest)[];

function toAnswerRequest(body: SqlRequest, dbPath: string): AnswerRequest {
  const req: AnswerRequest = { dbPath, question: body.question };
  for (const key of PASSED_THROUGH) if (body[key] !== undefined) Object.assign(req, { [key]: body[key] });
  return req;
}

/** Settles like `job`, except that it rejects with the signal's reason as soon as `signal` aborts. */
function raceAbort<T>(job: Promise<T>, signal: AbortSignal): Promise<T> {
  job.catch(() => undefined);
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    job.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) reject(signal.reason);
        else resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(signal.aborted ? signal.reason : err);
      },
    );
  });
}

/** The answer's fields other than its teaching ones ({@link taughtFields}). */
type ShapedAnswer = Omit<SqlResponse, "answerId" | "examples" | "conversation">;

/** The REST and WebSocket answer: {@link answerView} with the API's rows, the usage and the server's timings. */
export function shape(answer: Answer, trace: Record<string, unknown>[] | undefined, timings: { totalMs: number; queueMs: number }): ShapedAnswer {
  const out: ShapedAnswer = {
    ...answerView(answer, jsonResult(answer.result)),
    usage: {
      promptTokens: answer.usage.promptTokens,
      evaluatedTokens: answer.usage.evaluatedTokens,
      generatedTokens: answer.usage.generatedTokens,
      ...(answer.shown ? { exampleTokens: answer.shown.exampleTokens, historyTokens: answer.shown.turnTokens } : {}),
      ...(answer.usage.draftedTokens !== undefined
        ? {
            draftedTokens: answer.usage.draftedTokens,
            acceptedTokens: answer.usage.acceptedTokens ?? 0,
            forwardPassesSaved: answer.usage.forwardPassesSaved ?? 0,
          }
        : {}),
    },
    timings: {
      totalMs: roundMs(timings.totalMs),
      queueMs: roundMs(timings.queueMs),
      decodeMs: roundMs(answer.timings.totalMs),
      ...(answer.timings.firstTokenMs !== undefined ? { firstTokenMs: roundMs(answer.timings.firstTokenMs) } : {}),
    },
  };
  if (answer.shortfall !== undefined) out.shortfall = answer.shortfall;
  if (trace) out.trace = trace;
  return out;
}

/** What the "answered" log line says of the answer, as the client gets it: answerable, and the confidence when there is one. */
function loggedView(answer: Answer): { answerable: boolean; confidence?: number } {
  const view = answerView(answer, null);
  return { answerable: view.answerable, ...(view.confidence !== null ? { confidence: view.confidence } : {}) };
}

/** Options of one queued decode: {@link AnswerOptions} plus what the log lines say about the request. */
export interface QueuedDecodeOptions extends AnswerOptions {
  /** The database's registry id, for the log. */
  database: string;
  /** When the request was accepted (performance.now()); queue and total times count from it. Default now. */
  acceptedAt?: number;
}

/** An answer from the decoder with the server's view of where the time went. */
export interface QueuedAnswer {
  answer: Answer;
  queueMs: number;
  totalMs: number;
}

/**
 * Runs one decode the way every front end of the server does: through the generation queue, with
 * the server.requestTimeoutMs deadline, counting probes, timeouts and tokens in the metrics and
 * logging one summary line. QUEUE_FULL when the queue is full, DEADLINE_EXCEEDED past the
 * deadline, the cancel signal's reason when it aborts; in every abort the decode's own signal
 * fires so its sequences are freed.
 */
export async function decodeQueued(state: ServerState, request: AnswerRequest, options: QueuedDecodeOptions): Promise<QueuedAnswer> {
  const accepted = options.acceptedAt ?? performance.now();
  const controller = new AbortController();
  const onCancel = (): void => controller.abort(options.cancel?.reason ?? new ReexError("CANCELLED", "cancelled by the client"));
  if (options.cancel?.aborted) onCancel();
  options.cancel?.addEventListener("abort", onCancel, { once: true });
  const timeoutMs = state.config.server.requestTimeoutMs;
  const timer = setTimeout(() => controller.abort(new ReexError("DEADLINE_EXCEEDED", `no answer within ${timeoutMs} ms (server.requestTimeoutMs)`)), timeoutMs);
  timer.unref();

  const { metrics } = state;
  const sink: EventSink = (event: ReexEvent) => {
    if (event.type === "probe") {
      metrics.probes.inc();
      if (event.retried) metrics.finalRetries.inc();
    } else if (event.type === "repair") {
      for (const id of rewritesIn(event, "eventField")) metrics.rewrites[id].inc();
    } else if (event.type === "result" && !event.result.ok && event.result.error.code === "SQL_TIMEOUT") metrics.sqlTimeouts.inc();
    else if (event.type === "candidate" && event.errorCode === "SQL_TIMEOUT") metrics.sqlTimeouts.inc();
    if (options.sink) {
      try {
        options.sink(event);
      } catch (err) {
        options.log.warn({ errName: (err as Error)?.name }, "event sink threw");
      }
    }
  };

  let started = accepted;
  const logSql = state.config.server.logSql;
  const summary: Record<string, unknown> = {
    database: options.database,
    strategy: request.strategy,
    candidates: request.candidates,
    questionChars: request.question.length,
    ...(logSql ? { question: request.question, evidence: request.evidence } : {}),
  };
  try {
    const job = state.queue.submit(
      controller,
      (signal) => {
        started = performance.now();
        const deadlineMs = Math.max(1, Math.floor(timeoutMs - (started - accepted)));
        return state.deps.decode({ ...request, deadlineMs }, { sink, signal });
      },
      options.tenant ?? "",
    );
    const answer = await raceAbort(job, controller.signal);
    const now = performance.now();
    metrics.tokens.inc({ kind: "prompt" }, answer.usage.promptTokens);
    metrics.tokens.inc({ kind: "evaluated" }, answer.usage.evaluatedTokens);
    metrics.tokens.inc({ kind: "generated" }, answer.usage.generatedTokens);
    if (answer.usage.draftedTokens !== undefined) {
      metrics.tokens.inc({ kind: "drafted" }, answer.usage.draftedTokens);
      metrics.tokens.inc({ kind: "accepted" }, answer.usage.acceptedTokens ?? 0);
      metrics.passesSaved.inc({}, answer.usage.forwardPassesSaved ?? 0);
    }
    options.log.info(
      {
        ...summary,
        sqlChars: answer.sql?.length ?? 0,
        // what the client gets: the answer view applies the confidence threshold and the final SQL's error
        ...loggedView(answer),
        winner: answer.winner,
        queueMs: roundMs(started - accepted),
        totalMs: roundMs(now - accepted),
        ...(logSql ? { sql: answer.sql } : {}),
      },
      "answered",
    );
    return { answer, queueMs: started - accepted, totalMs: now - accepted };
  } catch (err) {
    const code = err instanceof ReexError ? err.code : "INTERNAL";
    options.log.info({ ...summary, code, totalMs: roundMs(performance.now() - accepted) }, "not answered");
    throw err;
  } finally {
    clearTimeout(timer);
    options.cancel?.removeEventListener("abort", onCancel);
  }
}

/**
 * Answers `body` for `owner` through {@link decodeQueued}: DB_NOT_FOUND for an unknown or foreign
 * database, then the queue's, the deadline's and the cancel signal's errors.
 */
export async function answerQuestion(state: ServerState, body: SqlRequest, owner: string | undefined, options: AnswerOptions): Promise<SqlResponse> {
  const acceptedAt = performance.now();
  const entry = await state.deps.registry.get(body.database, owner);
  const extras = state.teaching.prepare(entry, owner, body.question, { examples: body.examples, conversation: body.conversation });
  const request: AnswerRequest = {
    ...toAnswerRequest(body, entry.path),
    ...(extras.examples.length > 0 ? { examples: extras.examples } : {}),
    ...(extras.turns.length > 0 ? { turns: extras.turns } : {}),
  };
  const trace: Record<string, unknown>[] | undefined = body.includeTrace ? [] : undefined;
  const sink: EventSink | undefined = trace
    ? (event: ReexEvent) => {
        trace.push(jsonSafe(event) as Record<string, unknown>);
        options.sink?.(event);
      }
    : options.sink;
  const tenant = options.tenant ?? owner ?? "";
  const { answer, queueMs, totalMs } = await decodeQueued(state, request, { ...options, ...(sink ? { sink } : {}), database: entry.id, acceptedAt, tenant });
  const memo = state.teaching.remember(entry, owner, body, answer);
  return { ...shape(answer, trace, { totalMs, queueMs }), ...taughtFields(answer, memo) };
}

/** The answer's teaching fields: its id for corrections, the verified examples its prompt showed, and its turn of a conversation. */
function taughtFields(
  answer: Answer,
  memo: { answerId: string; conversation?: { id: string; turn: number } },
): Pick<SqlResponse, "answerId" | "examples" | "conversation"> {
  return {
    answerId: memo.answerId,
    examples: answer.shown?.examples ?? [],
    ...(memo.conversation ? { conversation: { ...memo.conversation, turnsShown: answer.shown?.turns ?? 0 } } : {}),
  };
}

/**
 * Teaching reex a database (docs/teaching.md): verified examples (src/sql's ExampleStore, on disk
 * beside the registry) retrieved into each prompt, the recent answers a correction can cite by
 * `answerId`, and conversations whose earlier turns go into a follow-up's prompt. Answers and
 * conversations live in memory, per API key (one tenant when keys are off), bounded in count and
 * in time by the `teach` settings. The REST routes, the WebSocket and MCP (`/mcp` and `reex mcp`)
 * share one instance per process.
 */
import { randomUUID } from "node:crypto";
import type { PromptTurn } from "../agent/index.js";
import type { Config } from "../config/index.js";
import type { Answer, RetrievedExample } from "../decoding/index.js";
import { ReexError } from "../errors/index.js";
import { ExampleStore, ExecutorPool, type DatabaseEntry, type Executor, type SqlValue, type VerifiedExample } from "../sql/index.js";

/** What a {@link Teaching} runs on. */
export interface TeachingDeps {
  config: Config;
  /** Runs each example's SQL before it is stored; default a pool of the server's own, started on first use and closed by `close()`. */
  executor?: Executor;
  /** Clock, ms. Default Date.now. */
  now?: () => number;
}

/** A verified example as the API shows it: no owner, and whether it is shared with every key. */
export interface ExampleView {
  id: string;
  question: string;
  sql: string;
  evidence?: string;
  columns: string[];
  rowCount: number;
  truncated: boolean;
  origin: VerifiedExample["origin"];
  answerId?: string;
  shared: boolean;
  createdAt: string;
}

/** The body of POST /v1/databases/:id/examples (and MCP `add_example`): an example, or a correction citing an answer. */
export type ExampleInput = { question: string; sql: string; evidence?: string } | { answerId: string; sql?: string };

/** A conversation's turn as the API shows it. */
export interface TurnView {
  database: string;
  question: string;
  sql: string | null;
  summary: string;
  answerId: string;
  at: string;
}

/** A conversation as GET /v1/conversations lists it. */
export interface ConversationSummary {
  id: string;
  turns: number;
  databases: string[];
  createdAt: string;
  updatedAt: string;
  expiresAt: string;
}

interface KeptAnswer {
  database: string;
  question: string;
  evidence?: string;
  sql: string | null;
  at: number;
}

interface Conversation {
  id: string;
  turns: (TurnView & { ms: number })[];
  createdAt: number;
  usedAt: number;
}

/** The cells of a summary's first row, each cut to this many characters. */
const SUMMARY_CELL_CHARS = 60;

function cellText(value: SqlValue | undefined): string {
  if (value === null || value === undefined) return "NULL";
  if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`;
  const text = String(value);
  return text.length > SUMMARY_CELL_CHARS ? `${text.slice(0, SUMMARY_CELL_CHARS)}…` : text;
}

/** One line about an answer's result, for the next turn's prompt: its columns, row count and first row, or why there is none. */
export function resultSummary(answer: Pick<Answer, "sql" | "result">): string {
  const result = answer.result;
  if (answer.sql === null) return "no SQL";
  if (!result) return "not run";
  if (!result.ok) return `failed: ${result.error.code}`;
  const rows = `${result.rowCount}${result.truncated ? "+" : ""} row${result.rowCount === 1 ? "" : "s"}`;
  const first = result.rows[0] ? `; first row: ${result.rows[0].map(cellText).join(" | ")}` : "";
  return `columns ${result.columns.join(", ")}; ${rows}${first}`;
}

/** `example` as the API shows it. */
export function exampleView(example: VerifiedExample): ExampleView {
  return {
    id: example.id,
    question: example.question,
    sql: example.sql,
    ...(example.evidence !== undefined ? { evidence: example.evidence } : {}),
    columns: example.columns,
    rowCount: example.rowCount,
    truncated: example.truncated,
    origin: example.origin,
    ...(example.answerId !== undefined ? { answerId: example.answerId } : {}),
    shared: example.owner === undefined,
    createdAt: example.createdAt,
  };
}

/** Verified examples, recent answers and conversations of one server (or `reex mcp`) process. */
export class Teaching {
  readonly store: ExampleStore;
  private readonly config: Config;
  private readonly given: Executor | undefined;
  private own: ExecutorPool | undefined;
  private readonly now: () => number;
  /** Per tenant, answer id → answer, oldest first. */
  private readonly answers = new Map<string, Map<string, KeptAnswer>>();
  /** Per tenant, conversation id → conversation, least recently used first. */
  private readonly conversations = new Map<string, Map<string, Conversation>>();

  constructor(deps: TeachingDeps) {
    this.config = deps.config;
    this.given = deps.executor;
    this.now = deps.now ?? Date.now;
    this.store = new ExampleStore({ dataDir: deps.config.sql.dataDir, maxPerDatabase: deps.config.teach.maxExamples });
  }

  /** The executor examples run on: the one given, else the process's own pool. */
  get executor(): Executor {
    if (this.given) return this.given;
    const sc = this.config.sql;
    this.own ??= new ExecutorPool({ workers: sc.workers, timeoutMs: sc.timeoutMs, maxRows: sc.maxRows, maxQueryMemoryMB: sc.maxQueryMemoryMB });
    return this.own;
  }

  /**
   * What a question on `entry` gets in its prompt: the `examples` (default `teach.examples`) most
   * similar verified examples `owner` sees, and the earlier turns on this database of `owner`'s
   * conversation `conversation` (none for a new one).
   */
  prepare(
    entry: DatabaseEntry,
    owner: string | undefined,
    question: string,
    options: { examples?: number | undefined; conversation?: string | undefined },
  ): { examples: RetrievedExample[]; turns: PromptTurn[] } {
    const k = options.examples ?? this.config.teach.examples;
    const examples = this.store.nearest(entry.id, owner, question, k).map((e) => ({
      id: e.id,
      question: e.question,
      sql: e.sql,
      ...(e.evidence !== undefined ? { evidence: e.evidence } : {}),
      score: e.score,
    }));
    const found = options.conversation !== undefined ? this.live(owner, options.conversation) : undefined;
    const turns = (found?.turns ?? []).filter((t) => t.database === entry.id).map((t) => ({ question: t.question, sql: t.sql, summary: t.summary }));
    return { examples, turns };
  }

  /**
   * Keeps `answer` for corrections under a new answer id and, given a conversation id, adds it as
   * that conversation's next turn (starting the conversation when `owner` has none by that id).
   */
  remember(
    entry: DatabaseEntry,
    owner: string | undefined,
    ask: { question: string; evidence?: string | undefined; conversation?: string | undefined },
    answer: Pick<Answer, "sql" | "result">,
  ): { answerId: string; conversation?: { id: string; turn: number } } {
    const t = this.config.teach;
    const now = this.now();
    const answerId = `ans-${randomUUID()}`;
    const kept = tenantMap(this.answers, owner);
    for (const [id, a] of kept) {
      if (kept.size < t.answersKept && now - a.at <= t.answerTtlMs) break;
      kept.delete(id);
    }
    kept.set(answerId, { database: entry.id, question: ask.question, ...(ask.evidence ? { evidence: ask.evidence } : {}), sql: answer.sql, at: now });
    if (ask.conversation === undefined) return { answerId };
    const conversation = this.live(owner, ask.conversation) ?? this.open(owner, ask.conversation, now);
    conversation.turns.push({
      database: entry.id,
      question: ask.question,
      sql: answer.sql,
      summary: resultSummary(answer),
      answerId,
      at: new Date(now).toISOString(),
      ms: now,
    });
    if (conversation.turns.length > t.conversationTurns) conversation.turns.splice(0, conversation.turns.length - t.conversationTurns);
    return { answerId, conversation: { id: conversation.id, turn: conversation.turns.length } };
  }

  /**
   * Stores a verified example on `entry` for `owner` after its SQL runs: given as question and SQL,
   * or as a correction of answer `answerId` (its question, with `sql`, or with the answer's own SQL
   * when `sql` is left out: "this is right"). ANSWER_NOT_FOUND, EXAMPLE_SQL_FAILED, EXAMPLES_FULL.
   */
  async addExample(entry: DatabaseEntry, owner: string | undefined, input: ExampleInput): Promise<{ example: ExampleView; created: boolean }> {
    const sc = this.config.sql;
    const exec = { timeoutMs: sc.timeoutMs, maxRows: sc.maxRows };
    if (!("answerId" in input)) {
      const { example, created } = await this.store.add(entry, owner, { ...input, origin: "added" }, this.executor, exec);
      return { example: exampleView(example), created };
    }
    const answer = this.answer(owner, input.answerId);
    if (!answer || answer.database !== entry.id)
      throw new ReexError(
        "ANSWER_NOT_FOUND",
        `no recent answer "${input.answerId}" on database "${entry.id}" for this key (answers are kept for teach.answerTtlMs)`,
      );
    const sql = input.sql ?? answer.sql;
    if (sql === null)
      throw new ReexError("BAD_REQUEST", "the answer has no SQL: send the right SQL as `sql`", { issues: [{ path: ["body", "sql"], message: "required" }] });
    const origin = input.sql === undefined || input.sql.trim() === answer.sql?.trim() ? "confirmed" : "corrected";
    const question = { question: answer.question, sql, ...(answer.evidence ? { evidence: answer.evidence } : {}), origin, answerId: input.answerId } as const;
    const { example, created } = await this.store.add(entry, owner, question, this.executor, exec);
    return { example: exampleView(example), created };
  }

  /** The verified examples of `entry` that `owner` sees. */
  listExamples(entry: DatabaseEntry, owner: string | undefined): ExampleView[] {
    return this.store.list(entry.id, owner).map(exampleView);
  }

  /** The conversations `owner` has, most recently used first. */
  listConversations(owner: string | undefined): ConversationSummary[] {
    const map = tenantMap(this.conversations, owner);
    for (const id of [...map.keys()]) this.live(owner, id);
    return [...map.values()].reverse().map((c) => this.summary(c));
  }

  /** Conversation `id` of `owner` with its turns; CONVERSATION_NOT_FOUND when it has none by that id (or it expired). */
  conversation(owner: string | undefined, id: string): Omit<ConversationSummary, "turns"> & { turns: TurnView[] } {
    const c = this.live(owner, id, false);
    if (!c) throw notFound(id);
    return { ...this.summary(c), turns: c.turns.map(({ ms: _ms, ...turn }) => turn) };
  }

  /** Forgets conversation `id` of `owner`; CONVERSATION_NOT_FOUND when it has none by that id. */
  deleteConversation(owner: string | undefined, id: string): void {
    if (!this.live(owner, id, false)) throw notFound(id);
    tenantMap(this.conversations, owner).delete(id);
  }

  /** Stops the executor pool it started, if any. */
  async close(): Promise<void> {
    const own = this.own;
    this.own = undefined;
    await own?.close();
  }

  private answer(owner: string | undefined, id: string): KeptAnswer | undefined {
    const a = tenantMap(this.answers, owner).get(id);
    return a && this.now() - a.at <= this.config.teach.answerTtlMs ? a : undefined;
  }

  /** `owner`'s conversation `id` unless it expired (then it is forgotten); `touch` marks it used. */
  private live(owner: string | undefined, id: string, touch = true): Conversation | undefined {
    const map = tenantMap(this.conversations, owner);
    const c = map.get(id);
    if (!c) return undefined;
    const now = this.now();
    if (now - c.usedAt > this.config.teach.conversationTtlMs) {
      map.delete(id);
      return undefined;
    }
    if (touch) {
      c.usedAt = now;
      map.delete(id);
      map.set(id, c);
    }
    return c;
  }

  private open(owner: string | undefined, id: string, now: number): Conversation {
    const map = tenantMap(this.conversations, owner);
    while (map.size >= this.config.teach.conversationsPerKey) map.delete(map.keys().next().value!);
    const c: Conversation = { id, turns: [], createdAt: now, usedAt: now };
    map.set(id, c);
    return c;
  }

  private summary(c: Conversation): ConversationSummary {
    return {
      id: c.id,
      turns: c.turns.length,
      databases: [...new Set(c.turns.map((t) => t.database))],
      createdAt: new Date(c.createdAt).toISOString(),
      updatedAt: new Date(c.usedAt).toISOString(),
      expiresAt: new Date(c.usedAt + this.config.teach.conversationTtlMs).toISOString(),
    };
  }
}

function tenantMap<V>(maps: Map<string, Map<string, V>>, owner: string | undefined): Map<string, V> {
  const key = owner ?? "";
  let map = maps.get(key);
  if (!map) {
    map = new Map();
    maps.set(key, map);
  }
  return map;
}

function notFound(id: string): ReexError {
  return new ReexError("CONVERSATION_NOT_FOUND", `no conversation "${id}" for this key (conversations are forgotten after teach.conversationTtlMs unused)`);
}

/** What the MCP front end needs from the rest of reex, as structural types so each transport hands in its own. */
import type { Config } from "../config/index.js";
import type { PromptTurn } from "../agent/index.js";
import type { Answer, AnswerRequest, DecodeContext, PromptBuilder, RetrievedExample } from "../decoding/index.js";
import type { DatabaseEntry, Executor } from "../sql/index.js";

/** A value or a promise of it. */
export type Awaitable<T> = T | Promise<T>;

/** The registry surface the tools use (src/sql's DatabaseRegistry satisfies it). */
export interface McpRegistry {
  /** The owner's entries plus the shared ones; everything when `owner` is undefined. */
  list(owner?: string): Awaitable<DatabaseEntry[]>;
  /** The entry with this id, or else with this unique name; throws DB_NOT_FOUND otherwise. */
  get(idOrName: string, owner?: string): Awaitable<DatabaseEntry>;
}

/** The decoder seam as MCP calls it: `createDecoder`'s decode, or the server's queued decode; `database` is the registry id, for logs. */
export type McpDecode = (request: AnswerRequest, ctx: DecodeContext & { database: string }) => Promise<Answer>;

/** The pino-style logger the tools write to (stderr for stdio, the request's logger over HTTP). */
export interface McpLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

/**
 * Verified examples, recent answers and conversations, shared with the other front ends (the
 * server's `Teaching` satisfies it): `ask` retrieves examples and earlier turns and remembers its
 * answer; `add_example` and `list_examples` read and write the store.
 */
export interface McpTeaching {
  prepare(
    entry: DatabaseEntry,
    owner: string | undefined,
    question: string,
    options: { examples?: number | undefined; conversation?: string | undefined },
  ): { examples: RetrievedExample[]; turns: PromptTurn[] };
  remember(
    entry: DatabaseEntry,
    owner: string | undefined,
    ask: { question: string; evidence?: string | undefined; conversation?: string | undefined },
    answer: Pick<Answer, "sql" | "result">,
  ): { answerId: string; conversation?: { id: string; turn: number } };
  addExample(
    entry: DatabaseEntry,
    owner: string | undefined,
    input: { question: string; sql: string; evidence?: string } | { answerId: string; sql?: string },
  ): Promise<{ example: object; created: boolean }>;
  listExamples(entry: DatabaseEntry, owner: string | undefined): object[];
}

/** Everything {@link createMcpServer} needs. */
export interface McpDeps {
  config: Config;
  registry: McpRegistry;
  /** Runs `run_sql` (guarded, row-capped, time-limited). */
  executor: Executor;
  /** Answers `ask`. */
  decode: McpDecode;
  /** Identity whose databases this connection sees (the API key's); default undefined: every database (stdio). */
  owner?: string;
  /** Id of the model profile whose prompt `describe_database` and the schema resources show: the decoder's default (the runtime's `profile.id`). Default "reex". */
  profile?: string;
  /** The decoder's prompt source, for `describe_database` and the schema resources; default one of its own over `<sql.dataDir>/indexes`, closed with the server. */
  prompts?: PromptBuilder;
  /** Verified examples and conversations: with it, `ask` shows examples and takes `conversation`, and `add_example` and `list_examples` are listed. Default none. */
  teaching?: McpTeaching;
  /** Where tool failures and each `ask`'s end are logged. Default: nowhere. */
  log?: McpLog;
  /** The policy's live trajectories, logged when an `ask` ends. Default not logged. */
  liveTrajectories?: () => number;
  /** Shortest gap between two token-driven progress notifications of one `ask`, ms. Default 250. */
  progressIntervalMs?: number;
}

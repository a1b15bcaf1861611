/** The configuration's zod schema: one section per part of reex, every field with its default. */
import { join } from "node:path";
import { z } from "zod";
import { packageRoot } from "../paths/index.js";
import { FEEDBACK_MODES, PROFILE_IDS, SPECULATIVE_MODES, STRATEGIES } from "./vocabulary.js";

export const serverSchema = z
  .object({
    /** Interface to listen on. Default "127.0.0.1". */
    host: z.string().default("127.0.0.1"),
    /** TCP port. Default 8080. */
    port: z.number().int().min(0).max(65535).default(8080),
    /** Largest request body (database uploads included), bytes. Default 64 MiB. */
    bodyLimitBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    /** Largest WebSocket message, bytes. Default 64 KiB. */
    wsMaxPayloadBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024),
    /** Per-request deadline for answering a question, ms. Default 120000. */
    requestTimeoutMs: z.number().int().positive().default(120_000),
    /** Idle connection timeout, ms. Default 30000. */
    connectionTimeoutMs: z.number().int().positive().default(30_000),
    /**
     * On shutdown, how long in-flight work may run before it is aborted with SHUTTING_DOWN, ms;
     * the whole stop then takes at most about this plus 10 s. Default 10000.
     */
    shutdownGraceMs: z.number().int().min(0).default(10_000),
    /** Accepted Bearer keys; empty means no authentication. Default []. */
    apiKeys: z.array(z.string().min(8)).default([]),
    /** Requests per minute per key (or per IP without keys); 0 disables. Default 120. */
    rateLimitPerMinute: z.number().int().min(0).default(120),
    /**
     * Failed authentications per minute from one client address, and with one presented key prefix
     * (its first 8 characters, from any address); past either, a request without a valid key gets
     * 429 instead of 401. A valid key is always let through: a flood of keyless or wrong-key
     * requests from a shared address (loopback, a proxy) never locks out the tenants behind it.
     * 0 disables. Default 20.
     */
    authFailuresPerMinute: z.number().int().min(0).default(20),
    /**
     * Require an API key for /metrics and /readyz too. Off by default: health checkers and
     * Prometheus scrapers rarely send keys, the server listens on loopback unless told otherwise,
     * and neither page shows a path, a key or a question. Default false.
     */
    protectOpsEndpoints: z.boolean().default(false),
    /**
     * Open MCP sessions per API key (per client address when keys are off); past it that tenant's
     * least recently used session closes, never another tenant's. Default 32.
     */
    mcpSessionsPerKey: z.number().int().positive().default(32),
    /** An MCP session unused this long closes, ms. Default 1800000 (30 min). */
    mcpSessionIdleMs: z
      .number()
      .int()
      .positive()
      .default(30 * 60_000),
    /** Generations running at once. Default 2. */
    maxConcurrent: z.number().int().positive().default(2),
    /** Generations waiting for a slot before new ones get 503 QUEUE_FULL. Default 16. */
    maxQueued: z.number().int().min(0).default(16),
    /**
     * Generations one API key (one client address without keys) may have waiting; past it that
     * key's new ones get 503 QUEUE_FULL while other keys still queue, and free slots go round-robin
     * to the key with the fewest running. Default 4, so four keys' full shares fit in maxQueued 16.
     */
    maxQueuedPerKey: z.number().int().min(0).default(4),
    /**
     * Bytes of uploaded databases one API key may keep (all owner-less uploads together when keys
     * are off); an upload past it is refused with 413 UPLOAD_QUOTA_EXCEEDED before it is stored.
     * 0 disables. Default 512 MiB (8 uploads at the default body limit).
     */
    uploadQuotaBytesPerKey: z
      .number()
      .int()
      .min(0)
      .default(512 * 1024 * 1024),
    /**
     * Bytes of uploaded databases all keys together may keep under sql.dataDir; an upload past it
     * (or one the disk has no room for) is refused with 507 STORAGE_FULL before it is stored.
     * 0 disables. Default 4 GiB.
     */
    uploadQuotaBytes: z
      .number()
      .int()
      .min(0)
      .default(4 * 1024 * 1024 * 1024),
    /** Allow registering databases by server-side path through the API. Default false. */
    allowPathRegistration: z.boolean().default(false),
    /** Folders that path registration may read from. Default []. */
    allowedRoots: z.array(z.string()).default([]),
    /** Log SQL text and cell values (off: only lengths and codes are logged). Default false. */
    logSql: z.boolean().default(false),
    /** Log level for pino. Default "info". */
    logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  })
  .strict();

export const sqlSchema = z
  .object({
    /** Executor worker processes. Default 2. */
    workers: z.number().int().positive().max(64).default(2),
    /** Per-query time limit, ms. Default 5000. */
    timeoutMs: z.number().int().positive().default(5000),
    /** Rows returned per query at most. Default 1000. */
    maxRows: z.number().int().positive().default(1000),
    /**
     * Memory bound of one query, MiB: the resident set its executor process may reach before it is
     * killed (SQL_MEMORY_LIMIT); a quarter of it is SQLite's length limit (largest string or BLOB).
     * An idle executor takes about 80 MiB and a query at the 32 MiB result cap about 170 MiB, so 512
     * leaves room for SQLite's sorter and page caches while `sql.workers` executors together stay a
     * known share of the host. Default 512.
     */
    maxQueryMemoryMB: z.number().int().min(64).default(512),
    /** Where uploads, the registry and value indexes live; a path given relative is read from the working folder. Default: `.reex` in the package's folder, whatever the working folder. */
    dataDir: z.string().default(() => join(packageRoot(), ".reex")),
    /**
     * PostgreSQL databases to serve, each `postgres://user@host:port/db` or `name=postgres://…`;
     * give the password as `${ENV_VAR}` (or PGPASSWORD) so it never sits in a file. Default none.
     */
    postgres: z.array(z.string().regex(/^([A-Za-z0-9_.-]+=)?postgres(ql)?:\/\//i, "a postgres:// URL, optionally as name=postgres://…")).default([]),
    /**
     * Functions PostgreSQL queries may call besides the built-in IMMUTABLE/STABLE ones that take no
     * SQL text, as `name` or `schema.name` (exact, as the catalogue stores them). Default none.
     */
    postgresFunctions: z.array(z.string().min(1).max(200)).default([]),
  })
  .strict();

export const policySchema = z
  .object({
    /** "llama" runs a GGUF in-process; "remote" calls an OpenAI-compatible completions endpoint. Default "llama". */
    backend: z.enum(["llama", "remote"]).default("llama"),
    /** GGUF path or model URI (`hf:owner/repo/file.gguf`); default: `policy.defaultModel`. */
    model: z.string().optional(),
    /**
     * The model served when `policy.model` is not set: a `reex models pull` name, whose file is looked
     * for in `modelsDir`, or "starter" for the shipped 13.8M starter. When the named model has not been
     * pulled, the starter is served and start-up, /readyz and the playground say so. Default
     * "qwen2.5-coder-0.5b" (docs/benchmarks.md has the figures behind the choice).
     */
    defaultModel: z.string().min(1).default("qwen2.5-coder-0.5b"),
    /**
     * The model's protocol: one of `PROFILE_IDS` ("reex", "skyrl-sql", …), or "auto" to read it off the GGUF's metadata (unrecognised models get "generic"). Default "auto".
     */
    profile: z.enum(["auto", ...PROFILE_IDS]).default("auto"),
    /** Where the starter model is and downloaded models are cached; a path given relative is read from the working folder. Default: `models` in the package's folder, whatever the working folder. */
    modelsDir: z.string().default(() => join(packageRoot(), "models")),
    /**
     * When policy.model is a URI (`hf:…`, `https://…`) whose file is not in modelsDir yet: the longest
     * wait for its host to answer, and for the next bytes once the download runs, ms; past it the
     * start fails with MODEL_NOT_FOUND instead of waiting on a network that is not there. Default 30000.
     */
    downloadTimeoutMs: z.number().int().positive().default(30_000),
    /** Accelerator: "auto" picks CUDA when present. Default "auto". */
    gpu: z.enum(["auto", "cuda", "cpu"]).default("auto"),
    /** Context window of each sequence, tokens; the KV cache holds contextSize × sequences, and a fork copies a whole sequence's share. Default 4096. */
    contextSize: z.number().int().positive().default(4096),
    /** Sequences in the context (live trajectories + cached prefixes). Default 20. */
    sequences: z.number().int().positive().max(256).default(20),
    /** CPU threads for llama.cpp; leaving one core to the server and the SQL workers avoids llama.cpp's spin-wait stalls. Default: cores − 1 (at least 1). */
    threads: z.number().int().positive().optional(),
    /** Flash attention; on CPU it speeds up the starter's decoding and slows appending a result, and moved its sampled answers for the worse (README). Default "auto" on GPU, off on CPU. */
    flashAttention: z.boolean().optional(),
    /** LoRA adapter files applied on load. Default []. */
    lora: z.array(z.string()).default([]),
    /** Remote endpoint base URL (backend "remote"), e.g. http://gpu-1:8000/v1. */
    remoteUrl: z.string().url().optional(),
    /** Model name sent to the remote endpoint. */
    remoteModel: z.string().optional(),
    /** Bearer key for the remote endpoint. */
    remoteApiKey: z.string().optional(),
    /** Longest wait for the remote endpoint (response headers, or between streamed chunks), ms. Default 120000. */
    remoteTimeoutMs: z.number().int().positive().default(120_000),
    /**
     * Prompt template for the remote endpoint (completions take raw text), with `{system}` and `{user}`
     * placeholders; default ChatML. See docs/scale-out.md.
     */
    remoteChatTemplate: z.string().optional(),
  })
  .strict();

export const agentSchema = z
  .object({
    /** Probe/result rounds before the model must answer. Default 10. */
    maxInteractions: z.number().int().min(0).max(50).default(10),
    /** Tokens sampled per trajectory at most. Default 1024. */
    maxTokens: z.number().int().positive().default(1024),
    /** What the model sees of probe results. Default "full". */
    feedback: z.enum(FEEDBACK_MODES).default("full"),
    /** Rows shown per probe result. Default 3. */
    feedbackRows: z.number().int().min(0).max(50).default(3),
    /** A probe's missing-column or missing-table error lists the real columns or tables. Default true. */
    schemaHints: z.boolean().default(true),
    /** Tokens of maxTokens kept for the answer: past them the server closes the open segment and opens `<final_sql>`. 0 = off. Default 0. */
    finalReserve: z.number().int().min(0).default(0),
    /** The Nth repeated probe of a rollout opens `<final_sql>` for the model instead of being answered again (for models that loop). 0 = off. Default 0. */
    repeatLimit: z.number().int().min(0).max(100).default(0),
    /** Times a final SQL that fails to run goes back to the model as a probe with its error (execution-aware family; tree-prune prunes it instead). 0 = off. Default 1. */
    finalRetries: z.number().int().min(0).max(10).default(1),
    /** A final SQL that fails on a missing column is rebound, before any retry, to the tables that hold its columns when exactly one fits each misplaced table (serving only). Default true. */
    repairTables: z.boolean().default(true),
    /** A final SQL that runs (or was rebound) has its string comparisons fitted to the column's values: a string no row holds rewritten to the column's date format, its one value of another case or spacing, the one value the question names for the column, or the one other column of the table that holds it; one it holds in several such spellings widened to all (serving only). Default true. */
    repairLiterals: z.boolean().default(true),
    /** A final SQL that runs (or was rebound) gets what the question names and it leaves out: one more `AND column = 'value'` for the one value the question names exactly in a column of its tables that it never reads, `date LIKE '2022%'` for a year the question names when its tables have one date column, and the question's row count ("the five most …") for its `LIMIT` (serving only). Default true. */
    repairCoverage: z.boolean().default(true),
  })
  .strict();

export const decodingSchema = z
  .object({
    /** Strategy used when a request names none. Default "greedy". */
    strategy: z.enum(STRATEGIES).default("greedy"),
    /** Candidates for linear/tree strategies. Default 16. */
    candidates: z.number().int().positive().default(16),
    /** Most children per tree node. Default 3. */
    branching: z.number().int().min(2).default(3),
    /** Sampling temperature of non-greedy strategies. Default 0.7. */
    temperature: z.number().min(0).max(2).default(0.7),
    /**
     * Nucleus (top-p) sampling of non-greedy strategies: each token is drawn from the most likely
     * tokens whose probabilities sum to this, so a rare garbled token does not derail a branch. Default 0.95.
     */
    topP: z.number().gt(0).max(1).default(0.95),
    /** Upper bound a request may ask for. Default 32. */
    maxCandidates: z.number().int().positive().default(32),
    /**
     * Constrained decoding when a request does not say: "auto" turns it on for the project's starter
     * model (GGUF `general.name` `reex-starter…`), which then writes only the schema's names, and off
     * for any other model (the grammar caps reasoning and covers a subset of SQLite). Default "auto".
     */
    constrained: z.enum(["auto", "on", "off"]).default("auto"),
    /**
     * With constrained decoding, also bind SQL names to their FROM lists as they are drawn
     * (PICARD-style; README "SQL that binds"): "from" holds the FROM list to the columns named
     * before it and aliases to their tables; "full" also holds every column after FROM to the
     * tables in scope; "off". Default "from".
     */
    bindNames: z.enum(["off", "from", "full"]).default("from"),
    /**
     * With name binding, draw a SQL's FROM list again, once, when columns named after it are in none
     * of its tables (README "SQL that binds"): the model picks the tables that hold them. Default true.
     */
    redrawFrom: z.boolean().default(true),
    /**
     * An answer whose confidence (README "How sure an answer is") is below this is marked not
     * answerable, its SQL still shown, with the doubts in words; 0 marks none. Default 0.5.
     */
    confidenceThreshold: z.number().min(0).max(1).default(0.5),
    /**
     * Tree strategies decode one branch greedily (temperature 0, never pruned for its probes), so the
     * greedy answer is always among the candidates the vote chooses from. Default true.
     */
    greedyBranch: z.boolean().default(true),
    /** Speculative decoding: "ngram" drafts from the prompt, the trajectory's text and its probe results, verified exactly; see README's Benchmarks. Default "off". */
    speculative: z.enum(SPECULATIVE_MODES).default("off"),
    /** Most tokens drafted in one decode step (the length adapts below it to the acceptance seen). Default 8. */
    draftMax: z.number().int().min(1).max(64).default(8),
    /**
     * Tokens of earlier answers' text kept per schema for drafting (the same database's earlier
     * answers repeat their reasoning and SQL); 0 drafts from the prompt and the answer's own text only. Default 32768.
     */
    draftHistory: z.number().int().min(0).max(4_194_304).default(32768),
    /**
     * "sized": each step drafts as many tokens as pay on the measured step costs; "fixed": a lone
     * generating sequence evaluates draftMax + 1 tokens every step (its draft filled with guesses),
     * so a GPU's step keeps one shape (llama.cpp captures its CUDA graph again after a change). Default "sized".
     */
    draftShape: z.enum(["sized", "fixed"]).default("sized"),
  })
  .strict();

export const teachSchema = z
  .object({
    /** Verified examples of the database shown in each prompt (the most similar questions, BM25); a request's `examples` overrides it. Default 3. */
    examples: z.number().int().min(0).max(20).default(3),
    /** Verified examples one key keeps per database; past it adding one is EXAMPLES_FULL. Default 500. */
    maxExamples: z.number().int().positive().max(100_000).default(500),
    /** Share of the schema's token budget the examples may take (the lowest-scored are dropped first); the schema gets what they leave. Default 0.25. */
    examplesTokenShare: z.number().min(0).max(0.5).default(0.25),
    /** Share of the schema's token budget a conversation's earlier turns may take (the oldest are dropped first). Default 0.25. */
    historyTokenShare: z.number().min(0).max(0.5).default(0.25),
    /** A conversation unused this long is forgotten, ms. Default 3600000 (1 h). */
    conversationTtlMs: z.number().int().positive().default(3_600_000),
    /** Turns a conversation keeps (the oldest are forgotten). Default 20. */
    conversationTurns: z.number().int().positive().max(1000).default(20),
    /** Conversations one key keeps at once (the least recently used is forgotten). Default 100. */
    conversationsPerKey: z.number().int().positive().default(100),
    /** How long an answer can be cited by a correction (`answerId`), ms. Default 86400000 (24 h). */
    answerTtlMs: z.number().int().positive().default(86_400_000),
    /** Answers kept per key for corrections (the oldest are forgotten). Default 1000. */
    answersKept: z.number().int().positive().default(1000),
  })
  .strict();

/** The `agent` section's defaults, read off its schema (the rollout and the decoder use these). */
export const AGENT_DEFAULTS: Readonly<z.infer<typeof agentSchema>> = Object.freeze(agentSchema.parse({}));

/** The `decoding` section's defaults, read off its schema. */
export const DECODING_DEFAULTS: Readonly<z.infer<typeof decodingSchema>> = Object.freeze(decodingSchema.parse({}));

/** The `teach` section's defaults, read off its schema (the prompt builder's shares when it is given no config). */
export const TEACH_DEFAULTS: Readonly<z.infer<typeof teachSchema>> = Object.freeze(teachSchema.parse({}));

/** The whole configuration; every field has a default, so `{}` is valid. */
export const configSchema = z
  .object({
    server: serverSchema.default(() => serverSchema.parse({})),
    sql: sqlSchema.default(() => sqlSchema.parse({})),
    policy: policySchema.default(() => policySchema.parse({})),
    agent: agentSchema.default(() => agentSchema.parse({})),
    decoding: decodingSchema.default(() => decodingSchema.parse({})),
    teach: teachSchema.default(() => teachSchema.parse({})),
  })
  .strict();

/** The parsed configuration. */
export type Config = z.infer<typeof configSchema>;
/** A partial configuration as a file, environment or flags may give it. */
export type ConfigInput = z.input<typeof configSchema>;

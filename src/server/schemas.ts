/**
 * The zod schemas of the HTTP and WebSocket API: every body, parameter and query is parsed with
 * one of these, every JSON response is registered with one (and typed from it), and /openapi.json
 * is generated from them.
 */
import { z } from "zod";
import { REWRITE_RULES, type RewriteFields } from "../agent/index.js";
import { DECIDED_BY, type Config } from "../config/index.js";
import { answerRequestFields, CONVERSATION_ID, teachingRequestFields } from "../decoding/index.js";
import { ReexError, issuesFrom } from "../errors/index.js";

const componentNames = new WeakMap<object, string>();

/** `schema`, named as an OpenAPI component: /openapi.json shows it once under #/components/schemas/`name` and refers to it there. */
function component<S extends z.ZodType>(name: string, schema: S): S {
  componentNames.set(schema, name);
  return schema;
}

/** The OpenAPI component name of `schema`; undefined for a schema shown inline. */
export function componentName(schema: object): string | undefined {
  return componentNames.get(schema);
}

/** The body of POST /v1/sql (and the one message a /v1/stream client sends), bounded by `config`. */
export function sqlRequestSchema(config: Config) {
  return component(
    "SqlRequest",
    z
      .object({
        database: z.string().min(1).max(200).describe("Id of a registered database."),
        ...answerRequestFields(config),
        ...teachingRequestFields(config),
        includeTrace: z.boolean().optional().describe("Return the event list as `trace`. Default false."),
      })
      .strict(),
  );
}

/** A parsed POST /v1/sql body. */
export type SqlRequest = z.infer<ReturnType<typeof sqlRequestSchema>>;

/** The one request message a /v1/stream client sends: the POST /v1/sql body, optionally tagged `type: "ask"`. */
export function streamRequestSchema(config: Config) {
  return sqlRequestSchema(config).extend({ type: z.literal("ask").optional() });
}

/** The query of GET /v1/stream, which authentication reads (fastify does not validate it). */
export const streamQuerySchema = z.object({ key: z.string().optional().describe("API key for browsers, which cannot set WebSocket headers.") });

/** A message a /v1/stream client may send after its request. */
export const streamControlSchema = z.object({ type: z.literal("cancel") }).strict();

/** Control, format (bidi overrides, zero-width) and line/paragraph separator characters. */
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

/** A database's display name: 1–128 characters, none of them control, format or bidi characters. */
const displayName = z
  .string()
  .min(1)
  .max(128)
  .refine((n) => !UNPRINTABLE.test(n), "a database name may not hold control, format or bidirectional characters (NUL, newlines, U+202E, …)")
  .refine((n) => n.trim() === n, "a database name may not begin or end with spaces");

/** JSON body of POST /v1/databases registering a server-side path. */
export const registerPathSchema = component(
  "RegisterPath",
  z
    .object({
      path: z.string().min(1).max(4096).describe("Absolute path of a SQLite file under one of server.allowedRoots."),
      name: displayName.optional().describe("Display name; default the file name."),
    })
    .strict(),
);

/** Query of POST /v1/databases for raw uploads. */
export const uploadQuerySchema = z.object({ name: displayName.optional().describe("Display name of the uploaded database.") }).strict();

/** Path parameters of /v1/databases/:id. */
export const databaseParamsSchema = z.object({ id: z.string().min(1).max(200) }).strict();

/** A result cell as the API sends it. */
export const cellSchema = z
  .union([z.string(), z.number(), z.null(), z.object({ base64: z.string() })])
  .describe("A cell: text, number (integers beyond 2^53 as decimal strings), null, or a BLOB as {base64}.");

/** A query result as the API shows it. */
export const resultSchema = z.object({
  columns: z.array(z.string()),
  rows: z.array(z.array(cellSchema)),
  rowCount: z.number().int(),
  truncated: z.boolean(),
});

/** Each rewrite rule's candidate field (`repairs`, …), from the rule's `api`: its fixes' fields and its description. */
function rewriteFieldSchemas(): { [F in keyof RewriteFields]-?: z.ZodOptional<z.ZodArray<z.ZodType<NonNullable<RewriteFields[F]>[number]>>> } {
  const fields = REWRITE_RULES.map((rule) => {
    const shape = Object.fromEntries(Object.entries(rule.api.shape).map(([key, values]) => [key, values === "string" ? z.string() : z.enum(values)]));
    return [rule.field, z.array(z.object(shape)).optional().describe(rule.api.description)] as const;
  });
  return Object.fromEntries(fields) as unknown as ReturnType<typeof rewriteFieldSchemas>;
}

/** One candidate of an answer; each rewrite rule's field comes from the agent's `REWRITE_RULES`. */
export const candidateSchema = z.object({
  index: z.number().int(),
  path: z.string(),
  sql: z.string().nullable(),
  answerable: z.boolean(),
  votes: z.number().int(),
  group: z.number().int().nullable(),
  error: z.string().optional(),
  ...rewriteFieldSchemas(),
  binding: z
    .object({
      mode: z.enum(["decoder", "fallback", "unavailable"]),
      redrawn: z.number().int(),
      fromRedraws: z.number().int().optional(),
      unbound: z.string().optional(),
    })
    .optional()
    .describe(
      "How its SQL's names were bound to their FROM lists (`decoding.bindNames`, constrained requests only): `decoder` when every SQL token was checked as it was drawn, `fallback` when the check gave up on some segment (a token refused too often), `unavailable` when the backend could not apply it (a remote engine); `redrawn`: tokens drawn again because they would not bind; `fromRedraws`: SQL whose FROM list was drawn again because columns named after it were in none of its tables (`decoding.redrawFrom`); `unbound`: why the final SQL's names do not bind, from the check after generation.",
    ),
});

/** Token counts of an answer. */
export const usageSchema = z.object({
  promptTokens: z.number().int(),
  evaluatedTokens: z.number().int(),
  generatedTokens: z.number().int(),
  draftedTokens: z.number().int().optional().describe("Tokens drafted by speculative decoding (`decoding.speculative`); present only where it is on."),
  acceptedTokens: z.number().int().optional().describe("Drafted tokens the model sampled as drafted."),
  forwardPassesSaved: z.number().int().optional().describe("Decode steps the answer took fewer than plain decoding."),
  exampleTokens: z.number().int().optional().describe("Estimated prompt tokens the verified examples took (present when some were offered)."),
  historyTokens: z.number().int().optional().describe("Estimated prompt tokens the conversation's earlier turns took (present when some were offered)."),
});

/** The response of POST /v1/sql (and the `answer` of the stream's `done` message). */
export const sqlResponseSchema = component(
  "SqlResponse",
  z.object({
    sql: z.string().nullable(),
    answerable: z
      .boolean()
      .describe(
        "False when the model declared the question unanswerable, when the final SQL failed, when there is no final SQL, or when `confidence` is below `decoding.confidenceThreshold`; `reason` says which.",
      ),
    reason: z.string().optional(),
    confidence: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .describe(
        'Estimated chance that the answer is right, in [0, 1] (README "How sure an answer is"): 0 without SQL that ran; null only from a decoder that does not compute it.',
      ),
    doubts: z.array(z.string()).optional().describe("What lowered `confidence`, in words, most first; absent when nothing did."),
    error: z.object({ code: z.string(), message: z.string() }).optional().describe("The final SQL's error, when it failed."),
    notice: z.string().optional().describe("Set when a random-weight placeholder model wrote the answer: its SQL is noise."),
    result: resultSchema.nullable(),
    candidates: z.array(candidateSchema),
    winner: z.number().int().nullable(),
    decidedBy: z.enum(DECIDED_BY).describe("How the vote chose the winner; fallback-logprob means no candidate's SQL ran, and the winner's `error` says why."),
    shortfall: z.string().optional(),
    trace: z.array(z.record(z.string(), z.unknown())).optional().describe("The request's events in order (when includeTrace)."),
    answerId: z
      .string()
      .describe(
        "This answer's id: POST /v1/databases/:id/examples with {answerId} stores it as right, with {answerId, sql} stores the right SQL for its question.",
      ),
    examples: z
      .array(z.object({ id: z.string(), question: z.string(), score: z.number() }))
      .describe("The verified examples of this database the prompt showed, most similar first (BM25 score of their question against this one)."),
    conversation: z
      .object({
        id: z.string(),
        turn: z.number().int().describe("This answer's turn in the conversation, from 1."),
        turnsShown: z.number().int().describe("Earlier turns the prompt showed (the oldest are dropped past teach.historyTokenShare)."),
      })
      .optional()
      .describe("Present when the request named a conversation."),
    usage: usageSchema,
    timings: z.object({
      totalMs: z.number().describe("Server-side time from accepting the request to the answer."),
      queueMs: z.number().describe("Time spent waiting for a generation slot."),
      decodeMs: z.number().describe("Time the decoder reported for itself."),
      firstTokenMs: z.number().optional(),
    }),
  }),
);

/** The API's view of an answer (POST /v1/sql response body and the stream's `done.answer`). */
export type SqlResponse = z.output<typeof sqlResponseSchema>;

/** A registered database as the API shows it: never its owner or its path on the server. */
export const databaseSchema = component(
  "Database",
  z.object({
    id: z.string(),
    name: z.string(),
    source: z.enum(["path", "upload", "postgres"]),
    tables: z.array(z.string()),
    sizeBytes: z.number().int(),
    registeredAt: z.string(),
  }),
);

/** A registered database as the API shows it. */
export type DatabaseView = z.output<typeof databaseSchema>;

/** The response of GET /v1/databases. */
export const databaseListSchema = z.object({ databases: z.array(databaseSchema) });

/** The response of GET /v1/databases/:id. */
export const databaseDetailSchema = component(
  "DatabaseDetail",
  databaseSchema.extend({ schema: z.unknown().describe("The database's schema as the SQL layer describes it, or null.") }),
);

/** The response of POST /v1/databases (201). */
export const databaseCreatedSchema = component(
  "DatabaseCreated",
  databaseSchema.pick({ id: true, name: true, tables: true, source: true }).extend({
    warning: z.string().optional().describe("Set when the database has no tables: every question about it will fail."),
  }),
);

/** Path parameters of /v1/databases/:id/examples/:exampleId. */
export const exampleParamsSchema = z.object({ id: z.string().min(1).max(200), exampleId: z.string().min(1).max(200) }).strict();

/** The body of POST /v1/databases/:id/examples: a verified example, or a correction citing an answer. */
export const exampleBodySchema = component(
  "ExampleInput",
  z.union([
    z
      .object({
        question: z.string().trim().min(1).max(8000).describe("The question."),
        sql: z.string().trim().min(1).max(100_000).describe("Its right SQL: it must run on the database (guarded, read-only), or nothing is stored."),
        evidence: z.string().max(8000).optional().describe("The hint it was asked with, if any."),
      })
      .strict(),
    z
      .object({
        answerId: z.string().min(1).max(200).describe("An answer's `answerId` (this key's, on this database, recent)."),
        sql: z
          .string()
          .trim()
          .min(1)
          .max(100_000)
          .optional()
          .describe("The right SQL for the answer's question; left out, the answer's own SQL is stored (\"this is right\")."),
      })
      .strict(),
  ]),
);

/** A verified example as the API shows it. */
export const exampleSchema = component(
  "Example",
  z.object({
    id: z.string(),
    question: z.string(),
    sql: z.string(),
    evidence: z.string().optional(),
    columns: z.array(z.string()).describe("The result's columns when it was verified."),
    rowCount: z.number().int().describe("Rows the result had when it was verified (at most sql.maxRows, then `truncated`)."),
    truncated: z.boolean(),
    origin: z
      .enum(["added", "confirmed", "corrected"])
      .describe("added: given as question and SQL; confirmed: an answer marked right; corrected: an answer's question with the right SQL."),
    answerId: z.string().optional(),
    shared: z.boolean().describe("True for an example every key sees (added without a key, or with the CLI)."),
    createdAt: z.string(),
  }),
);

/** The response of POST /v1/databases/:id/examples: the stored example, and whether it is new (201) or replaced the key's example of the same question (200). */
export const exampleCreatedSchema = exampleSchema.extend({ created: z.boolean() });

/** The response of GET /v1/databases/:id/examples. */
export const exampleListSchema = z.object({ examples: z.array(exampleSchema) });

/** Path parameters of /v1/conversations/:id. */
export const conversationParamsSchema = z.object({ id: z.string().regex(CONVERSATION_ID) }).strict();

/** A conversation as GET /v1/conversations lists it. */
export const conversationSummarySchema = z.object({
  id: z.string(),
  turns: z.number().int(),
  databases: z.array(z.string()),
  createdAt: z.string(),
  updatedAt: z.string(),
  expiresAt: z.string().describe("When it is forgotten unless used again (teach.conversationTtlMs after its last use)."),
});

/** The response of GET /v1/conversations. */
export const conversationListSchema = z.object({ conversations: z.array(conversationSummarySchema) });

/** The response of GET /v1/conversations/:id. */
export const conversationSchema = component(
  "Conversation",
  conversationSummarySchema.extend({
    turns: z.array(
      z.object({ database: z.string(), question: z.string(), sql: z.string().nullable(), summary: z.string(), answerId: z.string(), at: z.string() }),
    ),
  }),
);

/** The response of GET /healthz. */
export const healthSchema = z.object({ status: z.literal("ok") });

/** The response of GET /readyz (200): the loaded model, the defaults requests get, and the generation queue. */
export const readySchema = z.object({
  status: z.literal("ready"),
  modelName: z.string(),
  policy: z.object({
    backend: z.enum(["llama", "remote", "scripted"]),
    model: z.string(),
    device: z.string(),
    contextSize: z.number().int(),
    maxSequences: z.number().int(),
    lora: z.array(z.string()).optional().describe("File names of the LoRA adapters applied, in order."),
  }),
  modelOrigin: z
    .enum(["configured", "default", "starter", "placeholder"])
    .optional()
    .describe("Where the model came from, when the runtime says: policy.model, policy.defaultModel (pulled), the starter, or the random placeholder."),
  modelReason: z.string().optional().describe("Why this model is served, e.g. that the default model is not pulled and the starter serves instead."),
  profile: z.object({ id: z.string(), reason: z.string() }).optional().describe("The profile requests get when they name none, and why."),
  constrained: z.boolean().optional().describe("Whether requests that do not say `constrained` are decoded constrained."),
  queue: z.object({ running: z.number().int(), waiting: z.number().int(), maxConcurrent: z.number().int(), maxQueued: z.number().int() }),
});

/** The response of GET /openapi.json, in outline. */
export const openApiSchema = z.object({
  openapi: z.string(),
  info: z.object({ title: z.string(), version: z.string(), description: z.string() }),
  components: z.record(z.string(), z.unknown()),
  paths: z.record(z.string(), z.record(z.string(), z.unknown())),
});

/** The OpenAPI document /openapi.json serves. */
export type OpenApiDocument = z.output<typeof openApiSchema>;

/** The body of every error response. */
export const errorSchema = component(
  "Error",
  z.object({
    code: z.string(),
    message: z.string(),
    issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string(), code: z.string().optional() })).optional(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
);

/** The response of a status without a body (204). */
export const noBodySchema = z.undefined();

/** `schema.response` entries for every error status: each error body is {@link errorSchema}. */
export const errorResponses = { "4xx": errorSchema, "5xx": errorSchema } as const;

/**
 * Parses `value` with `schema`; on failure throws BAD_REQUEST whose issues carry the zod paths
 * prefixed with where the value came from ("body", "query", "params", "message").
 */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, where: string): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = issuesFrom(parsed.error.issues).map((i) => ({ ...i, path: [where, ...i.path] }));
  throw new ReexError("BAD_REQUEST", `invalid ${where}: ${issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, { issues });
}

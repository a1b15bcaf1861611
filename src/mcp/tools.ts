/** The tools: their zod input schemas and what each runs (registry, prompt builder, executor, decoder, and the teaching store where given). */
import { z } from "zod";
import type { Config } from "../config/index.js";
import { answerRequestFields, teachingRequestFields, type AnswerRequest, type PromptBuilder } from "../decoding/index.js";
import { familyFor, getProfile, type ModelProfile, type PromptFamily } from "../agent/index.js";
import { ReexError } from "../errors/index.js";
import type { ReexEvent } from "../events/index.js";
import type { DatabaseEntry } from "../sql/index.js";
import { TraceCollector, answerOf, rowsOf } from "./format.js";
import { progressSink, type ProgressUpdate } from "./progress.js";
import type { McpDeps, McpTeaching } from "./types.js";

/** What a tool call gets besides its arguments. */
export interface ToolContext {
  /** Aborts when the client cancels the call or the connection closes. */
  signal: AbortSignal;
  /** Sends one progress notification; absent when the client asked for none. */
  progress?: (update: ProgressUpdate) => void;
}

/** A tool's answer: structured content, and the same as JSON text for clients that read only text. */
export type ToolOutput = Record<string, unknown>;

/** One tool: name, description, zod input schema, hints, and its handler. */
export interface ToolDef {
  name: string;
  title: string;
  description: string;
  input: z.ZodObject;
  annotations: { readOnlyHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<ToolOutput>;
}

const databaseField = z.string().min(1).max(200).describe("Id or unique name of a registered database (see list_databases).");

/** Input schemas of the tools, bounded by `config` as the REST API's are; `ask` takes `examples` and `conversation` where a teaching store is given (`teaching`, default true). */
export function toolSchemas(config: Config, teaching = true) {
  const asked = answerRequestFields(config);
  const taught = teachingRequestFields(config);
  return {
    list_databases: z.object({}).strict(),
    describe_database: z
      .object({
        database: databaseField,
        question: z
          .string()
          .trim()
          .min(1)
          .max(8000)
          .optional()
          .describe("A question: the answer then also shows the database values its words match, as the model sees them."),
      })
      .strict(),
    run_sql: z
      .object({
        database: databaseField,
        sql: z
          .string()
          .min(1)
          .max(100_000)
          .describe(
            `One read-only query (SELECT, WITH … SELECT, VALUES). Runs with a ${config.sql.timeoutMs} ms limit and returns at most ${config.sql.maxRows} rows.`,
          ),
      })
      .strict(),
    ask: z
      .object({
        database: databaseField,
        question: asked.question,
        evidence: asked.evidence,
        strategy: asked.strategy,
        candidates: asked.candidates,
        ...(teaching ? taught : {}),
      })
      .strict(),
    add_example: z
      .object({
        database: databaseField,
        question: z.string().trim().min(1).max(8000).optional().describe("The question (with `sql`)."),
        sql: z
          .string()
          .trim()
          .min(1)
          .max(100_000)
          .optional()
          .describe("Its right SQL; it must run on the database. With `answerId`: the right SQL for that answer's question."),
        evidence: z.string().max(8000).optional().describe("The hint the question was asked with, if any."),
        answerId: z
          .string()
          .min(1)
          .max(200)
          .optional()
          .describe("An `ask` answer's `answerId`: store its question with `sql`, or, without `sql`, with the answer's own SQL (it was right)."),
      })
      .strict(),
    list_examples: z.object({ database: databaseField }).strict(),
  };
}

/** `add_example`'s arguments as the teaching store takes them: question and SQL, or an answer id (BAD_REQUEST for neither or both). */
function exampleInput(args: { question?: string; sql?: string; evidence?: string; answerId?: string }): Parameters<McpTeaching["addExample"]>[2] {
  if (args.answerId !== undefined) {
    if (args.question !== undefined || args.evidence !== undefined)
      throw new ReexError("BAD_REQUEST", "give either answerId (and optionally sql) or question and sql, not both");
    return { answerId: args.answerId, ...(args.sql !== undefined ? { sql: args.sql } : {}) };
  }
  if (args.question === undefined || args.sql === undefined)
    throw new ReexError("BAD_REQUEST", "give question and sql, or the answerId of an answer", {
      issues: [{ path: ["arguments"], message: "question and sql, or answerId" }],
    });
  return { question: args.question, sql: args.sql, ...(args.evidence !== undefined ? { evidence: args.evidence } : {}) };
}

/** The tools that read and write verified examples, over `teaching`. */
function exampleTools(deps: McpDeps, teaching: McpTeaching, schemas: ReturnType<typeof toolSchemas>): ToolDef[] {
  const { registry, owner } = deps;
  return [
    {
      name: "add_example",
      title: "Teach a verified example",
      description:
        "Stores a question with its right SQL for a database, so that ask shows it to the model for similar questions. The SQL must run (read-only, guarded), or nothing is stored (EXAMPLE_SQL_FAILED with the database's error). Give question and sql, or the answerId of an ask answer: without sql it is stored as right, with sql as corrected.",
      input: schemas.add_example,
      annotations: { readOnlyHint: false, idempotentHint: true, openWorldHint: false },
      run: async (raw) => {
        const args = raw as z.infer<typeof schemas.add_example>;
        const entry = await registry.get(args.database, owner);
        const { example, created } = await teaching.addExample(entry, owner, exampleInput(args));
        return { database: entry.id, ...example, created };
      },
    },
    {
      name: "list_examples",
      title: "List verified examples",
      description: "The verified examples of a database (question, SQL, the shape of its result) that ask retrieves from.",
      input: schemas.list_examples,
      annotations: { readOnlyHint: true, idempotentHint: true, openWorldHint: false },
      run: async (raw) => {
        const args = raw as z.infer<typeof schemas.list_examples>;
        const entry = await registry.get(args.database, owner);
        return { database: entry.id, examples: teaching.listExamples(entry, owner) };
      },
    },
  ];
}

function entryView(entry: DatabaseEntry): { id: string; name: string; tables: string[] } {
  return { id: entry.id, name: entry.name, tables: entry.tables };
}

/** A profile and the prompt family the decoder uses with it by default (execution-aware where the profile has it). */
export interface PromptStyle {
  profile: ModelProfile;
  family: PromptFamily;
}

/** The prompt style of the profile with this id (default "reex"); BAD_REQUEST for an unknown id. */
export function promptStyle(profileId = "reex"): PromptStyle {
  const profile = getProfile(profileId);
  return { profile, family: familyFor(profile, profile.families.includes("execution-aware") ? "execution-aware" : undefined) };
}

/** The schema section of the prompt the model sees for `entry`: the decoder's own prompt builder, without a question. */
export async function schemaText(prompts: PromptBuilder, entry: DatabaseEntry, style: PromptStyle = promptStyle()): Promise<string> {
  return (await prompts.promptFor(entry.path, "", undefined, style.family, style.profile)).sharedPrefix.trim();
}

/** The tools over `deps`, with `prompts` as the schema source. */
export function createTools(deps: McpDeps, prompts: PromptBuilder): ToolDef[] {
  const { config, registry, owner, teaching } = deps;
  const schemas = toolSchemas(config, teaching !== undefined);
  const style = promptStyle(deps.profile);
  const readOnly = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };

  return [
    {
      name: "list_databases",
      title: "List databases",
      description: "The SQLite databases reex can query: id, name and tables of each.",
      input: schemas.list_databases,
      annotations: readOnly,
      run: async () => ({ databases: (await registry.list(owner)).map(entryView) }),
    },
    {
      name: "describe_database",
      title: "Describe a database",
      description:
        "The schema text the model sees for a database (tables, columns with types and example values, keys). With a question, the whole prompt text: the schema, the database values the question's words match, and the question.",
      input: schemas.describe_database,
      annotations: readOnly,
      run: async (raw) => {
        const args = raw as z.infer<typeof schemas.describe_database>;
        const entry = await registry.get(args.database, owner);
        const schema = await schemaText(prompts, entry, style);
        if (args.question === undefined) return { ...entryView(entry), schema };
        const built = await prompts.promptFor(entry.path, args.question, undefined, style.family, style.profile);
        const user = built.messages.find((m) => m.role === "user")?.content ?? "";
        return { ...entryView(entry), schema, prompt: user };
      },
    },
    {
      name: "run_sql",
      title: "Run read-only SQL",
      description:
        "Runs one read-only SQL query with reex's guarded executor: the database is opened read-only, writes, ATTACH, PRAGMA and several statements are refused (SQL_REFUSED), and the query is stopped past its time limit (SQL_TIMEOUT).",
      input: schemas.run_sql,
      annotations: readOnly,
      run: async (raw, ctx) => {
        const args = raw as z.infer<typeof schemas.run_sql>;
        const entry = await registry.get(args.database, owner);
        const result = await deps.executor.execute(entry.path, args.sql, { timeoutMs: config.sql.timeoutMs, maxRows: config.sql.maxRows, signal: ctx.signal });
        if (!result.ok) throw new ReexError(result.error.code, result.error.message, { details: { category: result.error.category } });
        return { database: entry.id, ...rowsOf(result) };
      },
    },
    {
      name: "ask",
      title: "Answer a question with SQL",
      description:
        "Answers a natural-language question over a database with reex's execution-aware agent: the model probes the database while it reasons, and linear or tree strategies vote on the executed results of several candidates. Returns the final SQL, its rows, the candidates with their votes and a short trace. Reports progress while it decodes and stops when cancelled. Where verified examples are kept, the model is shown the database's most similar ones (the answer's examples names them), a conversation id makes the question a follow-up of the earlier ones asked under it, and the answer's answerId lets add_example store it as right or corrected.",
      input: schemas.ask,
      annotations: { readOnlyHint: true, idempotentHint: false, openWorldHint: false },
      run: async (raw, ctx) => {
        const args = raw as z.infer<typeof schemas.ask>;
        const entry = await registry.get(args.database, owner);
        const trace = new TraceCollector();
        const progress = ctx.progress ? progressSink(ctx.progress, deps.progressIntervalMs ?? 250) : undefined;
        const sink = (event: ReexEvent): void => {
          trace.add(event);
          progress?.(event);
        };
        const taught = args as { examples?: number; conversation?: string };
        const extras = teaching?.prepare(entry, owner, args.question, { examples: taught.examples, conversation: taught.conversation });
        const request: AnswerRequest = {
          dbPath: entry.path,
          question: args.question,
          deadlineMs: config.server.requestTimeoutMs,
          ...(args.evidence !== undefined ? { evidence: args.evidence } : {}),
          ...(args.strategy !== undefined ? { strategy: args.strategy } : {}),
          ...(args.candidates !== undefined ? { candidates: args.candidates } : {}),
          ...(extras?.examples.length ? { examples: extras.examples } : {}),
          ...(extras?.turns.length ? { turns: extras.turns } : {}),
        };
        const answer = await deps.decode(request, { sink, signal: ctx.signal, database: entry.id });
        const memo = teaching?.remember(entry, owner, { ...args, conversation: taught.conversation }, answer);
        const shown = memo
          ? {
              answerId: memo.answerId,
              examples: answer.shown?.examples ?? [],
              ...(memo.conversation ? { conversation: { ...memo.conversation, turnsShown: answer.shown?.turns ?? 0 } } : {}),
            }
          : {};
        return { database: entry.id, ...answerOf(answer, trace.finish()), ...shown };
      },
    },
    ...(teaching ? exampleTools(deps, teaching, schemas) : []),
  ];
}

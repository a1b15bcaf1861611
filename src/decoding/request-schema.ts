/**
 * The caller-facing fields of an {@link AnswerRequest} as zod schemas, bounded and described by the
 * configuration: the HTTP body (src/server) and the MCP `ask` tool (src/mcp) both take them from here.
 */
import { z } from "zod";
import { FEEDBACK_MODES, PROFILE_IDS, STRATEGIES, type Config } from "../config/index.js";
import type { AnswerRequest } from "./types.js";

/** The question fields a front end accepts (each optional one falls back to the decoder's default, named in its description). */
export function answerRequestFields(config: Config) {
  return {
    question: z.string().trim().min(1).max(8000).describe("The natural-language question."),
    evidence: z.string().max(8000).optional().describe("Optional hint / external knowledge (BIRD's evidence)."),
    strategy: z.enum(STRATEGIES).optional().describe(`Decoding strategy. Default "${config.decoding.strategy}".`),
    candidates: z
      .number()
      .int()
      .min(1)
      .max(config.decoding.maxCandidates)
      .optional()
      .describe(`Candidates voted on by the linear and tree strategies. Default ${config.decoding.candidates}.`),
    branching: z.number().int().min(2).max(16).optional().describe(`Most children per tree node. Default ${config.decoding.branching}.`),
    maxInteractions: z.number().int().min(0).max(50).optional().describe(`Probe rounds per trajectory. Default ${config.agent.maxInteractions}.`),
    maxTokens: z
      .number()
      .int()
      .min(1)
      .max(config.agent.maxTokens)
      .optional()
      .describe(`Tokens sampled per trajectory at most. Default ${config.agent.maxTokens}.`),
    feedback: z.enum(FEEDBACK_MODES).optional().describe(`What the model sees of probe results. Default "${config.agent.feedback}".`),
    schemaHints: z
      .boolean()
      .optional()
      .describe(`A probe's missing-column or missing-table error lists the real columns or tables. Default ${config.agent.schemaHints}.`),
    temperature: z.number().min(0).max(2).optional().describe(`Sampling temperature of non-greedy strategies. Default ${config.decoding.temperature}.`),
    topP: z.number().gt(0).max(1).optional().describe(`Nucleus (top-p) threshold of non-greedy strategies. Default ${config.decoding.topP}.`),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .optional()
      .describe("Seed for reproducible sampling."),
    profile: z
      .enum(PROFILE_IDS)
      .optional()
      .describe(
        `The model's protocol (prompt, tags, parser): ${PROFILE_IDS.join(", ")}. Default the server's (policy.profile, or detected from the model; /readyz says which).`,
      ),
    constrained: z
      .boolean()
      .optional()
      .describe(
        "Constrain output to the tag structure and the schema's identifiers. Default the server's (decoding.constrained: on for the starter model only; /readyz says which).",
      ),
  } satisfies { [K in keyof AnswerRequest]?: z.ZodType<AnswerRequest[K] | undefined> } & Record<string, z.ZodType>;
}

/** A conversation id: 1–100 letters, digits and `._:-`, starting with a letter or digit. */
export const CONVERSATION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;

/**
 * The fields of a front end that keeps verified examples and conversations (the HTTP body, the
 * WebSocket request and the MCP `ask` tool): how many examples to show, and the conversation.
 */
export function teachingRequestFields(config: Config) {
  return {
    examples: z
      .number()
      .int()
      .min(0)
      .max(20)
      .optional()
      .describe(
        `Verified examples of this database to show the model: the ones whose questions are most like this one (BM25), as many as fit their share of the prompt. 0 shows none. Default ${config.teach.examples} (teach.examples).`,
      ),
    conversation: z
      .string()
      .regex(CONVERSATION_ID, "1–100 letters, digits and ._:- starting with a letter or digit")
      .optional()
      .describe(
        `A conversation id of your choosing: the earlier turns asked under it (question, final SQL, a summary of the result) go into the prompt, so a follow-up may refer to them, and this turn is added. It belongs to this API key and is forgotten after ${config.teach.conversationTtlMs} ms unused (teach.conversationTtlMs).`,
      ),
  };
}

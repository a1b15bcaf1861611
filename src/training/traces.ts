/** SFT traces: their file format, the injected feedback text they mask out of the loss, and one trace as an experience record. */
import { z } from "zod";
import { reexProfile, type ModelProfile, type PromptFamily } from "../agent/index.js";
import { ReexError, issuesFrom } from "../errors/index.js";
import type { ChatMessage, Policy } from "../policy/index.js";
import { type ExperienceRecord } from "./experience.js";

/** One SFT trace: a prompt (chat messages, or already-rendered text) and the model's response with `<result>` blocks. */
export interface SftTrace {
  messages?: ChatMessage[];
  prompt?: string;
  response: string;
  question_id?: string | number;
}

const traceSchema = z
  .object({
    messages: z
      .array(z.object({ role: z.enum(["system", "user", "assistant"]), content: z.string() }).strict())
      .min(1)
      .optional(),
    prompt: z.string().min(1).optional(),
    response: z.string().min(1),
    question_id: z.union([z.string(), z.number()]).optional(),
  })
  .strict()
  .refine((t) => (t.messages === undefined) !== (t.prompt === undefined), { message: "give exactly one of `messages` or `prompt`" });

/**
 * Parses traces: JSONL (blank lines ignored) or one JSON array; DATASET_INVALID naming the line (or
 * array index) of the first problem.
 */
export function parseTraces(text: string, source = "traces"): SftTrace[] {
  const out: SftTrace[] = [];
  const check = (value: unknown, where: string, at: number): void => {
    const parsed = traceSchema.safeParse(value);
    if (!parsed.success) {
      const issues = issuesFrom(parsed.error.issues).map((x) => ({ ...x, path: [at, ...x.path] }));
      throw new ReexError(
        "DATASET_INVALID",
        `${source}${where}: ${issues[0] ? `${issues[0].path.slice(1).join(".") || "(trace)"}: ${issues[0].message}` : "invalid trace"}`,
        { issues },
      );
    }
    out.push(parsed.data as SftTrace);
  };
  if (text.trimStart().startsWith("[")) {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (err) {
      throw new ReexError("DATASET_INVALID", `${source}: not JSON: ${(err as Error).message}`);
    }
    (data as unknown[]).forEach((value, i) => check(value, `[${i}]`, i));
  } else {
    text.split("\n").forEach((line, i) => {
      if (!line.trim()) return;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch (err) {
        throw new ReexError("DATASET_INVALID", `${source}:${i + 1}: not JSON: ${(err as Error).message}`);
      }
      check(value, `:${i + 1}`, i + 1);
    });
  }
  if (out.length === 0) throw new ReexError("DATASET_INVALID", `${source}: no traces`);
  return out;
}

/** The family a trace written from a verified example is prompted in: `direct` where the profile has it (the example holds no probes), else its default. */
export function exampleFamily(profile: ModelProfile): PromptFamily {
  return profile.families.includes("direct") ? "direct" : profile.families[0]!;
}

/** The one reasoning line of a trace written from a verified example, for families that reason before they answer. */
const EXAMPLE_THINK = "This question has a verified query on this database; I write it.";

/**
 * What a model of `profile` writes to answer with `sql` and nothing else, in `family`'s format: a
 * one-line reasoning block where the family reasons, then the SQL in the profile's answer wrapper
 * (`<final_sql>`, `<solution>`, `<answer>` or a ```sql fence). Checked with the profile's own
 * format check: INTERNAL if it would not pass it.
 */
export function answerOnlyResponse(profile: ModelProfile, family: PromptFamily, sql: string): string {
  const think = profile.think && family !== "direct" ? `${profile.think.open}${EXAMPLE_THINK}${profile.think.close}\n` : "";
  const body = profile.answer.open.endsWith("\n") ? `${sql.trim()}\n` : sql.trim();
  const response = `${think}${profile.answer.open}${body}${profile.answer.close}`;
  const verdict = profile.formatCheck(response, family);
  if (!verdict.ok) throw new ReexError("INTERNAL", `a ${profile.id} answer fails its own format check: ${verdict.problems.join("; ")}`);
  return response;
}

/** An SFT trace from a verified example: the prompt the server builds for its question (`messages`), and the profile's answer with its SQL. */
export function exampleTrace(
  example: { id: string; sql: string },
  messages: ChatMessage[],
  profile: ModelProfile,
  family: PromptFamily = exampleFamily(profile),
): SftTrace {
  return { question_id: example.id, messages, response: answerOnlyResponse(profile, family, example.sql) };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Splits a response into the model's own text (mask 1) and the profile's injected feedback blocks
 * (`<result>…</result>` for reex, `<observation>…</observation>` for skyrl-sql) with their trailing
 * newline (mask 0). A profile without feedback (single-turn) masks nothing. Default profile `reex`.
 */
export function splitInjected(response: string, profile: ModelProfile = reexProfile): { text: string; sampled: 0 | 1 }[] {
  const out: { text: string; sampled: 0 | 1 }[] = [];
  if (!profile.feedback) return response ? [{ text: response, sampled: 1 }] : [];
  const re = new RegExp(`${escapeRegExp(profile.feedback.open)}[\\s\\S]*?${escapeRegExp(profile.feedback.close)}\\n?`, "gi");
  let pos = 0;
  for (const m of response.matchAll(re)) {
    if (m.index > pos) out.push({ text: response.slice(pos, m.index), sampled: 1 });
    out.push({ text: m[0], sampled: 0 });
    pos = m.index + m[0].length;
  }
  if (pos < response.length) out.push({ text: response.slice(pos), sampled: 1 });
  return out;
}

/**
 * The experience record of one SFT trace: prompt tokens exactly as a rollout would start from them,
 * response pieces tokenised in order (loss only on the model's own segments, the profile's feedback
 * blocks masked), then `endOfTurn`. Default profile `reex`.
 */
export async function sftRecord(
  policy: Policy,
  trace: SftTrace,
  endOfTurn: string,
  questionId: string | number,
  profile: ModelProfile = reexProfile,
): Promise<ExperienceRecord> {
  const spec = trace.messages ? policy.renderChat(trace.messages) : { prefix: "", suffix: trace.prompt! };
  const trajectory = await policy.start(spec);
  let promptTokens: number[];
  try {
    promptTokens = trajectory.promptTokens.slice();
  } finally {
    await trajectory.release();
  }
  const tokens: number[] = [];
  const mask: (0 | 1)[] = [];
  const pieces = splitInjected(trace.response, profile);
  for (const piece of [...pieces, ...(endOfTurn ? [{ text: endOfTurn, sampled: 1 as const }] : [])]) {
    for (const t of policy.tokenize(piece.text)) {
      tokens.push(t);
      mask.push(piece.sampled);
    }
  }
  return {
    prompt_tokens: promptTokens,
    tokens,
    mask,
    old_logprobs: null,
    advantage: 0,
    reward: 0,
    components: {},
    truncated: false,
    interactions: pieces.filter((p) => p.sampled === 0).length,
    question_id: trace.question_id ?? questionId,
  };
}

// ---------------------------------------------------------------------------------------------
// Checkpoints and schedule
// ---------------------------------------------------------------------------------------------

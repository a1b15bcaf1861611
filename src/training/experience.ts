/**
 * The on-disk experience format the Python learner reads (docs/training.md, docs/learner.md): one
 * JSONL file per training step, `<run>/experience/step-000001.jsonl`, one JSON object per rollout.
 * Token ids are the policy's; `mask[i]` is 1 for a token the model sampled and 0 for injected text
 * (executor `<result>` blocks), and `old_logprobs[i]` the sampling log-probability (0 where mask 0).
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import { ReexError, issuesFrom } from "../errors/index.js";

/** One rollout as the learner reads it; the last three fields are extras the learner ignores. */
export interface ExperienceRecord {
  prompt_tokens: number[];
  tokens: number[];
  /** 1 = sampled by the model (in the loss), 0 = injected (context only). */
  mask: (0 | 1)[];
  /**
   * Sampling log-probs per token (0 where mask is 0); null lets the learner score them with the current
   * weights, and so does a null entry (a token appended after sampling, such as the end of turn).
   */
  old_logprobs: (number | null)[] | null;
  advantage: number;
  reward: number;
  /** The reward's components, unweighted. */
  components: Record<string, number>;
  truncated: boolean;
  interactions: number;
  question_id: string | number;
  /** Ignored by the learner: the final SQL of the rollout. */
  final_sql?: string | null;
  /** Ignored by the learner: the reward's weights (`reward = Σ weights · components`). */
  weights?: Record<string, number>;
  /** Ignored by the learner: why the rollout ended. */
  stop_reason?: string;
  /** Ignored by the learner: the reward the advantage came from, when the group rule changed it (correctness-first). */
  signal?: number;
}

const finite = z.number().refine(Number.isFinite, "must be a finite number");
const tokenId = z.number().int().min(0);

const recordSchema = z
  .looseObject({
    prompt_tokens: z.array(tokenId),
    tokens: z.array(tokenId),
    mask: z.array(z.union([z.literal(0), z.literal(1)])),
    old_logprobs: z.array(finite.nullable()).nullable(),
    advantage: finite,
    reward: finite,
    components: z.record(z.string(), finite),
    truncated: z.boolean(),
    interactions: z.number().int().min(0),
    question_id: z.union([z.string(), z.number()]),
    final_sql: z.string().nullable().optional(),
    weights: z.record(z.string(), finite).optional(),
    stop_reason: z.string().optional(),
    signal: finite.optional(),
  })
  .superRefine((r, ctx) => {
    if (r.mask.length !== r.tokens.length)
      ctx.addIssue({ code: "custom", path: ["mask"], message: `has ${r.mask.length} entries for ${r.tokens.length} tokens` });
    if (r.old_logprobs && r.old_logprobs.length !== r.tokens.length) {
      ctx.addIssue({ code: "custom", path: ["old_logprobs"], message: `has ${r.old_logprobs.length} entries for ${r.tokens.length} tokens` });
    }
    if (r.old_logprobs?.some((lp, i) => r.mask[i] === 1 && lp !== null && lp > 1e-6))
      ctx.addIssue({ code: "custom", path: ["old_logprobs"], message: "must be ≤ 0 where mask is 1" });
    if (r.prompt_tokens.length === 0 && r.mask[0] === 1)
      ctx.addIssue({ code: "custom", path: ["prompt_tokens"], message: "is empty: the first sampled token has no context" });
  });

/** Path of a step's experience file: `<runDir>/experience/step-000001.jsonl`. */
export function experiencePath(runDir: string, step: number): string {
  return join(runDir, "experience", `step-${stepLabel(step)}.jsonl`);
}

/** A step number zero-padded to six digits, as every per-step file name uses it. */
export function stepLabel(step: number): string {
  return String(step).padStart(6, "0");
}

/**
 * Old log-probs fit for the file: the given ones, with 0 where the mask is 0; null when a sampled
 * token's log-prob is not a finite number ≤ 0 (the learner then scores the rollout itself).
 */
export function sanitizeLogprobs(logprobs: readonly number[], mask: readonly (0 | 1)[]): number[] | null {
  const out: number[] = [];
  for (let i = 0; i < mask.length; i++) {
    if (mask[i] === 0) {
      out.push(0);
      continue;
    }
    const lp = logprobs[i];
    if (lp === undefined || !Number.isFinite(lp) || lp > 1e-6) return null;
    out.push(Math.min(lp, 0));
  }
  return out;
}

/** Checks one parsed record; DATASET_INVALID with its issues when it does not fit the format. */
export function validateExperienceRecord(value: unknown, where = "experience"): ExperienceRecord {
  const parsed = recordSchema.safeParse(value);
  if (!parsed.success) {
    const issues = issuesFrom(parsed.error.issues);
    const first = issues[0];
    throw new ReexError("DATASET_INVALID", `${where}: ${first ? `${first.path.join(".") || "(root)"}: ${first.message}` : "invalid record"}`, { issues });
  }
  return parsed.data as ExperienceRecord;
}

/** The JSONL text of records, one per line. */
export function formatExperience(records: readonly ExperienceRecord[]): string {
  return records.map((r) => JSON.stringify(r)).join("\n") + (records.length ? "\n" : "");
}

/** Parses JSONL experience text (blank lines ignored), validating every record. */
export function parseExperience(text: string, source = "experience"): ExperienceRecord[] {
  const out: ExperienceRecord[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new ReexError("DATASET_INVALID", `${source}:${i + 1}: not JSON: ${(err as Error).message}`);
    }
    out.push(validateExperienceRecord(value, `${source}:${i + 1}`));
  });
  return out;
}

/** Writes records to `file` atomically (temporary file + rename), creating folders; validates each first. */
export async function writeExperience(file: string, records: readonly ExperienceRecord[]): Promise<void> {
  records.forEach((r, i) => validateExperienceRecord(r, `${file}: record ${i}`));
  await mkdir(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, formatExperience(records));
  await rename(tmp, file);
}

/** Reads and validates an experience file. */
export async function readExperience(file: string): Promise<ExperienceRecord[]> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `cannot read experience file ${file}: ${(err as Error).message}`);
  }
  return parseExperience(text, file);
}

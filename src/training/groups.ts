/**
 * Rollout groups for GRPO: G rollouts per question through the same agent code the server runs
 * (`runRollout` with the policy, the executor and the decoder's prompt builder), each scored by a
 * reward preset, then advantages over the step's groups. The token record of each rollout gives
 * the loss mask (sampled = 1; text the server appended, such as the profile's feedback blocks
 * `<result>` or `<observation>`, = 0) and the sampling log-probs.
 */
import {
  familyFor,
  reexProfile,
  OWN_ANSWERS,
  resolveRolloutOptions,
  runRollout,
  type FeedbackMode,
  type ModelProfile,
  type PromptFamily,
  type RolloutResult,
} from "../agent/index.js";
import type { GrammarFor, PromptFor } from "../decoding/index.js";
import { ReexError, toReexError, type ErrorCode } from "../errors/index.js";
import type { Policy } from "../policy/index.js";
import type { Executor } from "../sql/index.js";
import {
  advantageDiagnostics,
  computeAdvantages,
  correctnessFirst,
  type AdvantageDiagnostics,
  type AdvantageOptions,
  type AdvantageScaling,
} from "./advantages.js";
import { sanitizeLogprobs, type ExperienceRecord } from "./experience.js";
import { gatherFacts, resolveRewardSpec, rewardFromFacts, type RewardBreakdown, type RewardEnv, type RewardSpec } from "./rewards.js";

/** One training question. */
export interface TrainingQuestion {
  questionId: string | number;
  /** Absolute path of the SQLite file. */
  dbPath: string;
  /** The database's second row draw (src/eval's `EvalItem.dbPath2`): rewards count an answer right only when right on both; probes run on `dbPath`. Default none. */
  dbPath2?: string;
  question: string;
  evidence?: string;
  goldSql: string;
}

/** How a group is sampled and scored. */
export interface GroupOptions {
  policy: Policy;
  executor: Executor;
  /** The prompt of a question (the decoder's `createPromptBuilder().promptFor`). */
  promptFor: PromptFor;
  /** The protocol rollouts are prompted, parsed and scored in. Default the `reex` profile. */
  profile?: ModelProfile;
  /** Rollouts per question (G). Default 8. */
  groupSize?: number;
  /** Sampling temperature. Default 1.0. */
  temperature?: number;
  /** Probe rounds per rollout. Default 10. */
  maxInteractions?: number;
  /** Tokens sampled per rollout at most. Default 1024. */
  maxTokens?: number;
  /** Must be one the profile supports (BAD_REQUEST otherwise). Default the profile's first family. */
  family?: PromptFamily;
  /** Default "full". */
  feedback?: FeedbackMode;
  /** Rows shown per probe. Default 3. */
  feedbackRows?: number;
  /** Name errors list the real columns or tables. Default true. */
  schemaHints?: boolean;
  /** Per-probe limit, ms; default the executor's. */
  probeTimeoutMs?: number;
  /** Base seed; rollout i of a group uses seed + i. Default random. */
  seed?: number;
  /** Rollouts of a group running at once. Default the group size. */
  concurrency?: number;
  /** Default the "maxtune" preset. */
  reward?: RewardSpec;
  /** Where the rewards execute SQL; default `{executor}`. */
  rewardEnv?: RewardEnv;
  /**
   * Sample under these grammars (the decoding stage's `createServedGrammarFor`), as a constrained request is served; the
   * rollouts are then marked `constrained`. Default none (unconstrained).
   */
  grammarFor?: GrammarFor;
  signal?: AbortSignal;
}

/** One scored rollout of a group. */
export interface ScoredRollout {
  questionId: string | number;
  /** Position in its group. */
  index: number;
  rollout: RolloutResult;
  reward: RewardBreakdown;
  /** Loss mask over `rollout.record.tokens`: the record's `sampled`, all 0 for a rollout that failed. */
  mask: (0 | 1)[];
  /** Filled by {@link assignAdvantages}. Default 0. */
  advantage: number;
  /** The reward the advantage was computed from (the total, or its correctness-first form). Default the total. */
  signal?: number;
  /** Sampled under a grammar: its log-probs are the masked distribution's, not the policy's. Default false. */
  constrained?: boolean;
}

/** G scored rollouts of one question. */
export interface RolloutGroup {
  question: TrainingQuestion;
  rollouts: ScoredRollout[];
}

/** Groups of one step with their advantages. */
export interface StepBatch {
  groups: RolloutGroup[];
  zeroVarianceGroups: number;
}

const FATAL: readonly string[] = ["CANCELLED", "MODEL_NOT_FOUND", "MODEL_LOAD_FAILED", "EXECUTOR_UNAVAILABLE", "SHUTTING_DOWN"] satisfies ErrorCode[];

async function mapLimit<T, R>(items: readonly T[], limit: number, work: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/** Samples G rollouts of one question and scores each; advantages are left at 0 (see {@link assignAdvantages}). */
export async function runGroup(question: TrainingQuestion, options: GroupOptions): Promise<RolloutGroup> {
  const g = options.groupSize ?? 8;
  if (!Number.isInteger(g) || g < 1) throw new ReexError("BAD_REQUEST", `group size must be a positive integer, got ${g}`);
  const profile = options.profile ?? reexProfile;
  const family = familyFor(profile, options.family);
  const spec = resolveRewardSpec(options.reward);
  const env: RewardEnv = options.rewardEnv ?? { executor: options.executor };
  const prompt = await options.promptFor(question.dbPath, question.question, question.evidence, family, profile);
  const grammar = options.grammarFor
    ? await options.grammarFor(question.dbPath, family, profile, { question: question.question, ...(question.evidence ? { evidence: question.evidence } : {}) })
    : undefined;
  const rollouts = await mapLimit(
    Array.from({ length: g }, (_, i) => i),
    options.concurrency ?? g,
    async (index) => {
      if (options.signal?.aborted) throw new ReexError("CANCELLED", "training cancelled");
      const rollout = await runRollout(
        options.policy,
        prompt,
        resolveRolloutOptions({
          executor: options.executor,
          dbPath: question.dbPath,
          profile,
          family,
          maxInteractions: options.maxInteractions,
          maxTokens: options.maxTokens,
          temperature: options.temperature ?? 1.0,
          topP: 1,
          ...(options.seed !== undefined ? { seed: options.seed + index } : {}),
          ...(options.feedback ? { feedback: options.feedback } : {}),
          ...(options.feedbackRows !== undefined ? { feedbackRows: options.feedbackRows } : {}),
          ...(options.schemaHints !== undefined ? { schemaHints: options.schemaHints } : {}),
          ...(options.probeTimeoutMs !== undefined ? { timeoutMs: options.probeTimeoutMs } : {}),
          ...(options.signal ? { signal: options.signal } : {}),
          ...(grammar ? { grammar } : {}),
          path: `${question.questionId}/${index}`,
          ...OWN_ANSWERS,
        }),
      );
      if (rollout.stopReason === "aborted") throw new ReexError("CANCELLED", "training cancelled");
      if (rollout.error && FATAL.includes(rollout.error.code)) throw new ReexError(rollout.error.code as ErrorCode, rollout.error.message);
      const generatedTokens = rollout.record.sampled.reduce<number>((a, s) => a + s, 0);
      const facts = await gatherFacts(
        {
          response: rollout.text,
          profile,
          family,
          finalSql: rollout.finalSql,
          probes: rollout.probes.filter((p) => !p.overLimit).map((p) => ({ sql: p.sql, repeated: p.repeated })),
          interactions: rollout.interactions,
          goldSql: question.goldSql,
          dbPath: question.dbPath,
          ...(question.dbPath2 ? { dbPath2: question.dbPath2 } : {}),
          generatedTokens,
        },
        env,
        spec,
      );
      const mask: (0 | 1)[] = rollout.stopReason === "error" ? rollout.record.sampled.map(() => 0) : rollout.record.sampled.slice();
      const scored: ScoredRollout = {
        questionId: question.questionId,
        index,
        rollout,
        reward: rewardFromFacts(facts, spec),
        mask,
        advantage: 0,
        ...(grammar ? { constrained: true } : {}),
      };
      return scored;
    },
  );
  return { question, rollouts };
}

/** How rewards become the signal advantages are computed from. */
export interface GroupRule {
  /** "correctness-first" (see `correctnessFirst`) or the reward totals "as-is". Default "as-is". */
  rule?: "correctness-first" | "as-is";
  /** Shaping span under correctness-first. Default 0.1. */
  shapingScale?: number;
}

/**
 * Sets every rollout's advantage from its group's rewards (under the group rule); returns how many
 * groups had zero variance and where the advantage mass comes from.
 */
export function assignAdvantages(
  groups: readonly RolloutGroup[],
  scaling: AdvantageScaling,
  options: AdvantageOptions & GroupRule = {},
): { zeroVarianceGroups: number; diagnostics: AdvantageDiagnostics } {
  const ranked = groups.map((g) => g.rollouts.map((r) => ({ total: r.reward.total, correct: r.reward.correct })));
  const signals = options.rule === "correctness-first" ? correctnessFirst(ranked, options.shapingScale ?? 0.1) : ranked.map((g) => g.map((r) => r.total));
  const result = computeAdvantages(signals, scaling, options);
  groups.forEach((g, i) =>
    g.rollouts.forEach((r, j) => {
      r.advantage = result.advantages[i]![j]!;
      r.signal = signals[i]![j]!;
    }),
  );
  return { zeroVarianceGroups: result.zeroVarianceGroups, diagnostics: advantageDiagnostics(ranked, result.advantages) };
}

/** Whether a group carries a contrast: some but not all rollouts correct ("correctness"), or unequal rewards ("reward"). */
export function isInformative(group: RolloutGroup, on: "correctness" | "reward"): boolean {
  const rs = group.rollouts;
  if (on === "correctness") return rs.some((r) => r.reward.correct) && rs.some((r) => !r.reward.correct);
  return rs.some((r) => Math.abs(r.reward.total - rs[0]!.reward.total) > 1e-9);
}

/**
 * Samples a question's group (or scores a trace), or returns the CONTEXT_EXHAUSTED error when its prompt does not fit
 * the policy's context window, so the caller can skip it (a pool of real schemas holds a few too long for a small
 * context); any other error is thrown.
 */
export async function sampleIfFits<T = RolloutGroup>(sample: () => Promise<T>): Promise<T | ReexError> {
  try {
    return await sample();
  } catch (err) {
    const e = toReexError(err);
    if (e.code !== "CONTEXT_EXHAUSTED") throw err;
    return e;
  }
}

/** Runs one group per question (one question at a time, G rollouts each) and assigns advantages over the batch. */
export async function collectStep(
  questions: readonly TrainingQuestion[],
  options: GroupOptions & { scaling?: AdvantageScaling; advantage?: AdvantageOptions; onGroup?: (group: RolloutGroup, done: number) => void },
): Promise<StepBatch> {
  const groups: RolloutGroup[] = [];
  for (const q of questions) {
    const group = await runGroup(q, options);
    groups.push(group);
    options.onGroup?.(group, groups.length);
  }
  const { zeroVarianceGroups } = assignAdvantages(groups, options.scaling ?? "group", options.advantage);
  return { groups, zeroVarianceGroups };
}

/**
 * The experience record of a scored rollout (learner format). `endOfTurn` (token ids) is appended, in the
 * loss, to a rollout that stopped after its final answer, so GRPO trains the end of turn as SFT does; its
 * old log-probs are null (the learner scores them). Default none. A constrained rollout's old log-probs are
 * null throughout: the grammar-masked sampler's are not the policy's, so the learner scores them before its update.
 */
export function toExperienceRecord(r: ScoredRollout, endOfTurn: readonly number[] = []): ExperienceRecord {
  const rec = r.rollout.record;
  const old = r.constrained ? null : sanitizeLogprobs(rec.logprobs, r.mask);
  const eot = r.rollout.stopReason === "final" && r.mask.some((m) => m === 1) ? endOfTurn : [];
  return {
    prompt_tokens: r.rollout.promptTokens.slice(),
    tokens: [...rec.tokens, ...eot],
    mask: [...r.mask, ...eot.map(() => 1 as const)],
    old_logprobs: old && eot.length ? [...old, ...eot.map(() => null)] : old,
    advantage: r.advantage,
    reward: r.reward.total,
    ...(r.signal !== undefined && r.signal !== r.reward.total ? { signal: r.signal } : {}),
    components: { ...r.reward.components },
    truncated: r.rollout.truncated,
    interactions: r.rollout.interactions,
    question_id: r.questionId,
    final_sql: r.rollout.finalSql,
    weights: { ...r.reward.weights },
    stop_reason: r.rollout.stopReason,
  };
}

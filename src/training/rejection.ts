/**
 * Rejection sampling (STaR, expert iteration): the cheapest alternative to GRPO at the same sampling budget. Groups
 * are sampled exactly as `reex train grpo` samples them, walking the run's own question schedule; the answers the
 * reward counts right (on both row draws) become SFT traces for one pass of `reex train sft`.
 */
import { ReexError } from "../errors/index.js";
import { fnv1a32 } from "../util/index.js";
import type { TrainConfig } from "./config.js";
import { checkGold } from "./curriculum.js";
import { sampleIfFits } from "./groups.js";
import { trainingQuestions } from "./loop.js";
import { openSampling, type SamplingOptions } from "./sampling.js";
import { scheduleFor } from "./schedule.js";
import type { SftTrace } from "./traces.js";

/** How {@link runRejectionSampling} runs. */
export interface RejectionOptions extends SamplingOptions {
  /** Groups to sample (each of the config's `groupSize`): the GRPO run's sampled groups, for the same compute. */
  groups: number;
  /** Groups already sampled by an earlier pass (their place in the schedule is skipped, so a pass can resume). Default 0. */
  start?: number;
  /** Called after each group with its outcome and how many of this pass's groups are done. Default none. */
  onGroup?: (group: RejectionGroup, done: number, total: number) => void;
}

/** One sampled group's outcome. */
export interface RejectionGroup {
  /** Place in the schedule. */
  index: number;
  questionId: string | number;
  sampled: number;
  /** Answers right on both row draws. */
  right: number;
  /** Answers right on exactly one draw (not kept). */
  oneDraw: number;
  /** The right answers as traces, one per distinct text. */
  traces: SftTrace[];
  /** Why nothing was sampled: the question's prompt overflowed the context window (`CONTEXT_EXHAUSTED: …`). Absent when sampled. */
  skipped?: string;
}

/** The groups this pass sampled. */
export interface RejectionResult {
  groups: RejectionGroup[];
  profile: string;
  seconds: number;
}

/** Samples groups `start`..`groups`-1 along the run's schedule (its first epoch's order) and keeps the right answers. */
export async function runRejectionSampling(config: TrainConfig, options: RejectionOptions): Promise<RejectionResult> {
  const t0 = performance.now();
  if (!Number.isInteger(options.groups) || options.groups < 1) throw new ReexError("BAD_REQUEST", `groups must be a positive integer, got ${options.groups}`);
  const all = trainingQuestions(config);
  const start = options.start ?? 0;
  const drawn = scheduleFor(1, Math.min(options.groups, all.length), all.length, config.seed)
    .slice(start)
    .map((i) => all[i]!);
  const session = await openSampling(config, options, (executor, goldCache) =>
    checkGold(drawn, executor, goldCache, config.reward.timeoutMs, config.data!.dataset),
  );
  try {
    const groups: RejectionGroup[] = [];
    for (const [i, q] of drawn.entries()) {
      const index = start + i;
      const group = await sampleIfFits(() => session.sample(q, config.groupSize, fnv1a32(`rejection:${config.seed}:${index}`) & 0x3fffffff));
      const outcome: RejectionGroup = { index, questionId: q.questionId, sampled: 0, right: 0, oneDraw: 0, traces: [] };
      if (group instanceof ReexError) {
        groups.push({ ...outcome, skipped: `${group.code}: ${group.message}` });
        options.onGroup?.(groups.at(-1)!, groups.length, drawn.length);
        continue;
      }
      const prompt = await session.promptFor(q.dbPath, q.question, q.evidence, session.family, session.profile);
      const texts = new Set<string>();
      for (const r of group.rollouts) {
        outcome.sampled++;
        if (r.reward.draws && r.reward.draws.first !== r.reward.draws.second) outcome.oneDraw++;
        if (!r.reward.correct) continue;
        outcome.right++;
        if (texts.has(r.rollout.text)) continue;
        texts.add(r.rollout.text);
        outcome.traces.push({ messages: prompt.messages, response: r.rollout.text, question_id: q.questionId });
      }
      groups.push(outcome);
      options.onGroup?.(outcome, groups.length, drawn.length);
    }
    return { groups, profile: session.profile.id, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await session.close();
  }
}

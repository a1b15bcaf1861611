/**
 * The GRPO pre-flight: before a long run, does the config's data give groups a contrast?
 * For questions drawn (seeded) from the config's `data`, `samples` rollouts sampled as `reex train grpo`
 * samples a group and one greedy answer decoded as the run's held-out evaluation decodes, all scored by
 * the run's reward (right = right on both row draws where the database has two). A drawn question whose prompt
 * overflows the context window is listed as skipped and left out of the figures. Used by
 * `npx tsx lab/grpo-heldout/grpo-preflight.ts`.
 */
import { ReexError, toReexError, type ErrorCode } from "../errors/index.js";
import { fnv1a32 } from "../util/index.js";
import type { TrainConfig } from "./config.js";
import { checkGold } from "./curriculum.js";
import { sampleIfFits, type TrainingQuestion } from "./groups.js";
import { trainingQuestions } from "./loop.js";
import { gatherFacts } from "./rewards.js";
import { openSampling, type SamplingOptions } from "./sampling.js";
import { permutation } from "./schedule.js";

/** One answer's verdict under the reward. */
export interface PreflightVerdict {
  /** Right as the reward counts it: on both row draws where the database has two. */
  correct: boolean;
  /** With a second row draw: right on each. Default none. */
  draws?: { first: boolean; second: boolean };
}

/** One question's sampled answers and its greedy answer. */
export interface PreflightOutcome {
  questionId: string | number;
  samples: PreflightVerdict[];
  greedy: PreflightVerdict & { sql: string | null };
}

/** The pre-flight's figures; a share is null when nothing it divides by was seen. */
export interface PreflightSummary {
  /** Questions. */
  n: number;
  /** Sampled answers over all questions. */
  sampled: number;
  /** Questions with some but not all samples right. */
  mixedShare: number | null;
  /** Questions greedy gets wrong and some sample right. */
  greedyWrongSampleRightShare: number | null;
  /** Mean over questions of the share of samples right. */
  meanPassRate: number | null;
  /** Questions greedy gets right. */
  greedyEx: number | null;
  /** Questions greedy gets right on the first row draw alone (the database the model saw). */
  greedyExFirstDraw: number | null;
  /** Sampled answers right on exactly one draw ÷ sampled answers scored on two draws. */
  spuriousRate: number | null;
  /** Sampled answers right on exactly one draw ÷ those right on the first (metrics.jsonl's `spurious_rate`). */
  spuriousOfFirstRight: number | null;
}

const share = (hits: number, of: number): number | null => (of === 0 ? null : hits / of);

const firstDraw = (v: PreflightVerdict): boolean => v.draws?.first ?? v.correct;

/** The pre-flight's figures over per-question outcomes. */
export function summarisePreflight(outcomes: readonly PreflightOutcome[]): PreflightSummary {
  const n = outcomes.length;
  const rights = outcomes.map((o) => o.samples.filter((s) => s.correct).length);
  const all = outcomes.flatMap((o) => o.samples);
  const drawn = all.filter((s) => s.draws);
  const oneDraw = drawn.filter((s) => s.draws!.first !== s.draws!.second).length;
  return {
    n,
    sampled: all.length,
    mixedShare: share(outcomes.filter((o, i) => rights[i]! > 0 && rights[i]! < o.samples.length).length, n),
    greedyWrongSampleRightShare: share(outcomes.filter((o, i) => !o.greedy.correct && rights[i]! > 0).length, n),
    meanPassRate: n === 0 ? null : outcomes.reduce((a, o, i) => a + (o.samples.length === 0 ? 0 : rights[i]! / o.samples.length), 0) / n,
    greedyEx: share(outcomes.filter((o) => o.greedy.correct).length, n),
    greedyExFirstDraw: share(outcomes.filter((o) => firstDraw(o.greedy)).length, n),
    spuriousRate: share(oneDraw, drawn.length),
    spuriousOfFirstRight: share(oneDraw, drawn.filter((s) => s.draws!.first).length),
  };
}

/** How {@link runPreflight} runs; every field has a default. */
export interface PreflightOptions extends SamplingOptions {
  /** Questions drawn from the config's data. Default 16. */
  questions?: number;
  /** Rollouts per question. Default the config's `groupSize`. */
  samples?: number;
  /** Question ids (as strings) left out before the draw. Default none. */
  exclude?: ReadonlySet<string>;
  /** Seed of the draw and of the rollouts. Default the config's `seed`. */
  seed?: number;
  /** Called after each question. Default none. */
  onQuestion?: (outcome: PreflightOutcome, done: number, total: number) => void;
}

/** A pre-flight's figures and what they came from. */
export interface PreflightResult {
  summary: PreflightSummary;
  outcomes: PreflightOutcome[];
  /** Drawn questions left out of the figures because their prompt overflowed the context window. */
  skipped: { questionId: string | number; message: string }[];
  /** Questions the draw was made from (after `exclude`). */
  pool: number;
  /** Questions `exclude` left out of the config's data. */
  excluded: number;
  profile: string;
  seconds: number;
}

function verdict(r: { correct: boolean; draws?: { first: boolean; second: boolean } }): PreflightVerdict {
  return { correct: r.correct, ...(r.draws ? { draws: { first: r.draws.first, second: r.draws.second } } : {}) };
}

const FATAL: readonly string[] = ["CANCELLED", "MODEL_NOT_FOUND", "MODEL_LOAD_FAILED", "EXECUTOR_UNAVAILABLE", "SHUTTING_DOWN"] satisfies ErrorCode[];

/** Runs the pre-flight of a GRPO config (see the module comment). */
export async function runPreflight(config: TrainConfig, options: PreflightOptions = {}): Promise<PreflightResult> {
  const t0 = performance.now();
  const samples = options.samples ?? config.groupSize;
  const seed = options.seed ?? config.seed;
  const signal = options.signal;
  if (!Number.isInteger(samples) || samples < 1) throw new ReexError("BAD_REQUEST", `samples must be a positive integer, got ${samples}`);
  const all = trainingQuestions(config);
  const available = options.exclude ? all.filter((q) => !options.exclude!.has(String(q.questionId))) : all;
  const order = permutation(available.length, `preflight:${seed}`);
  const drawn: TrainingQuestion[] = order.slice(0, options.questions ?? 16).map((i) => available[i]!);
  if (drawn.length === 0) throw new ReexError("DATASET_INVALID", `${config.data!.dataset}: no question left to draw`);

  const session = await openSampling(config, options, async (executor, goldCache) =>
    checkGold(drawn, executor, goldCache, config.reward.timeoutMs, config.data!.dataset),
  );
  try {
    const { sample, decoder, rewardEnv, reward, profile, family } = session;
    const outcomes: PreflightOutcome[] = [];
    const skipped: PreflightResult["skipped"] = [];
    for (const [i, q] of drawn.entries()) {
      const group = await sampleIfFits(() => sample(q, samples, fnv1a32(`preflight:${seed}:${i}`) & 0x3fffffff));
      if (group instanceof ReexError) {
        skipped.push({ questionId: q.questionId, message: `${group.code}: ${group.message}` });
        continue;
      }
      let sql: string | null = null;
      let response = "";
      try {
        const answer = await decoder(
          { dbPath: q.dbPath, question: q.question, ...(q.evidence ? { evidence: q.evidence } : {}), strategy: "greedy" },
          signal ? { signal } : {},
        );
        sql = answer.sql;
        response = answer.candidates.find((c) => c.index === answer.winner)?.text ?? "";
      } catch (err) {
        const e = toReexError(err);
        if (FATAL.includes(e.code) || signal?.aborted) throw e;
      }
      const facts = await gatherFacts(
        { response, profile, family, finalSql: sql, goldSql: q.goldSql, dbPath: q.dbPath, ...(q.dbPath2 ? { dbPath2: q.dbPath2 } : {}) },
        rewardEnv,
        reward,
      );
      const outcome: PreflightOutcome = { questionId: q.questionId, samples: group.rollouts.map((r) => verdict(r.reward)), greedy: { ...verdict(facts), sql } };
      outcomes.push(outcome);
      options.onQuestion?.(outcome, outcomes.length, drawn.length);
    }
    return {
      summary: summarisePreflight(outcomes),
      outcomes,
      skipped,
      pool: available.length,
      excluded: all.length - available.length,
      profile: profile.id,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await session.close();
  }
}

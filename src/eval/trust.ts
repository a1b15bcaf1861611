/**
 * Abstention scored the TrustSQL way (Lee et al., 2024): +1 for a right answer or for abstaining
 * on a question no SQL can answer, 0 for abstaining on one it can, −c for a wrong answer; plus
 * coverage, accuracy among answered items and the calibration of the confidence.
 */

/** What the trust metrics read of one scored item. */
export interface TrustInput {
  /** The final SQL is right (never for an unanswerable question). */
  correct: boolean;
  /** The answer was marked answerable. */
  answered: boolean;
  /** The question is marked unanswerable in the dataset. */
  unanswerable: boolean;
  /** The answer's confidence; null when the decoder gave none. */
  confidence: number | null;
}

/** The penalties of a wrong answer the report scores at. */
export const TRUST_PENALTIES = [0, 1, 10] as const;

/** A reliability score per penalty c (`c0`, `c1`, `c10`). */
export type ReliabilityScores = Record<"c0" | "c1" | "c10", number>;

/** One bin of the reliability diagram: items whose confidence falls in [lo, hi). */
export interface CalibrationBin {
  lo: number;
  hi: number;
  count: number;
  /** Mean confidence of the bin's items. */
  confidence: number;
  /** Share of them that are right. */
  accuracy: number;
}

/** How far answers can be trusted. Shares are 0..1. */
export interface TrustMetrics {
  /** Items marked unanswerable in the dataset, and how many of them were abstained on. */
  unanswerable: number;
  abstainedUnanswerable: number;
  /** Share of items marked answerable. */
  coverage: number;
  /** Share of answered items that are right; null when none was answered. */
  answeredAccuracy: number | null;
  /** Share of right answers that were marked answerable; null when none was right. */
  keptRight: number | null;
  /** The mean TrustSQL score of the answers as marked. */
  reliability: ReliabilityScores;
  /** The same, answering every item (the baseline abstention must beat). */
  answerAll: ReliabilityScores;
  /** Expected calibration error over ten equal-width bins of the items with a confidence; null when none has one. */
  ece: number | null;
  bins: CalibrationBin[];
}

function score(item: TrustInput, answered: boolean, c: number): number {
  if (item.unanswerable) return answered ? -c : 1;
  if (!answered) return 0;
  return item.correct ? 1 : -c;
}

function scores(items: readonly TrustInput[], answered: (i: TrustInput) => boolean): ReliabilityScores {
  const mean = (c: number): number => (items.length === 0 ? 0 : items.reduce((s, i) => s + score(i, answered(i), c), 0) / items.length);
  return { c0: mean(0), c1: mean(1), c10: mean(10) };
}

/** The reliability diagram's bins (ten, equal width; empty bins left out) and the expected calibration error. */
export function calibration(items: readonly TrustInput[]): { ece: number | null; bins: CalibrationBin[] } {
  const known = items.filter((i): i is TrustInput & { confidence: number } => i.confidence !== null);
  if (known.length === 0) return { ece: null, bins: [] };
  const bins: CalibrationBin[] = [];
  let ece = 0;
  for (let b = 0; b < 10; b++) {
    const lo = b / 10;
    const hi = (b + 1) / 10;
    const inBin = known.filter((i) => i.confidence >= lo && (i.confidence < hi || (b === 9 && i.confidence <= 1)));
    if (inBin.length === 0) continue;
    const confidence = inBin.reduce((s, i) => s + i.confidence, 0) / inBin.length;
    const accuracy = inBin.filter((i) => i.correct).length / inBin.length;
    ece += (inBin.length / known.length) * Math.abs(accuracy - confidence);
    bins.push({ lo, hi, count: inBin.length, confidence, accuracy });
  }
  return { ece, bins };
}

/** The trust metrics of a set of items; pure. */
export function trustMetrics(items: readonly TrustInput[]): TrustMetrics {
  const answered = items.filter((i) => i.answered);
  const right = items.filter((i) => i.correct);
  const unanswerable = items.filter((i) => i.unanswerable);
  return {
    unanswerable: unanswerable.length,
    abstainedUnanswerable: unanswerable.filter((i) => !i.answered).length,
    coverage: items.length === 0 ? 0 : answered.length / items.length,
    answeredAccuracy: answered.length === 0 ? null : answered.filter((i) => i.correct).length / answered.length,
    keptRight: right.length === 0 ? null : right.filter((i) => i.answered).length / right.length,
    reliability: scores(items, (i) => i.answered),
    answerAll: scores(items, () => true),
    ...calibration(items),
  };
}

/**
 * GRPO advantages from grouped rewards (docs/rewards.md "Advantages"). Standard deviations are population standard
 * deviations, the same as the Python learner's `--advantage group|batch|none`:
 *
 * - group: A = (R − mean_G) / (std_G + ε);
 * - batch: A = (R − mean_G) / (std_B + ε), where std_B is the standard deviation of all the
 *   group-centred rewards of the batch (group mean, batch scale — Think2SQL's "batch" scaling);
 * - none:  A = R − mean_G (Dr.GRPO: mean-centred, no scaling).
 *
 * A group whose rewards are all equal carries no learning signal: its advantages are exactly 0
 * under every scaling, and it is counted in `zeroVarianceGroups`.
 */
import { ReexError } from "../errors/index.js";

/** Advantage scalings: within the question's group, by the batch's spread, or rewards as they are. */
export type AdvantageScaling = "group" | "batch" | "none";

/** The advantage scalings, in documentation order. */
export const ADVANTAGE_SCALINGS: readonly AdvantageScaling[] = ["group", "batch", "none"];

/** Options of {@link computeAdvantages}. */
export interface AdvantageOptions {
  /** Added to the standard deviation before dividing. Default 1e-6. */
  epsilon?: number;
  /** A group whose population std is at most this counts as zero-variance. Default 1e-9. */
  zeroTolerance?: number;
}

/** Advantages shaped like the input groups, plus group statistics. */
export interface AdvantageResult {
  advantages: number[][];
  /** Groups whose rewards were all equal (their advantages are 0). */
  zeroVarianceGroups: number;
  groupMeans: number[];
  groupStds: number[];
}

function mean(xs: readonly number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}

function std(xs: readonly number[], m = mean(xs)): number {
  return xs.length === 0 ? 0 : Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / xs.length);
}

/** Computes per-rollout advantages for rewards grouped per question. */
export function computeAdvantages(groups: readonly (readonly number[])[], scaling: AdvantageScaling, options: AdvantageOptions = {}): AdvantageResult {
  if (!ADVANTAGE_SCALINGS.includes(scaling)) throw new ReexError("BAD_REQUEST", `unknown advantage scaling "${scaling}"; use ${ADVANTAGE_SCALINGS.join(", ")}`);
  const eps = options.epsilon ?? 1e-6;
  const tol = options.zeroTolerance ?? 1e-9;
  for (const g of groups) {
    for (const r of g) if (!Number.isFinite(r)) throw new ReexError("BAD_REQUEST", `rewards must be finite numbers, got ${r}`);
  }
  const groupMeans = groups.map((g) => mean(g));
  const groupStds = groups.map((g, i) => std(g, groupMeans[i]));
  const zero = groupStds.map((s, i) => s <= tol || (groups[i]?.length ?? 0) < 2);
  const centred = groups.map((g, i) => (zero[i] ? g.map(() => 0) : g.map((r) => r - groupMeans[i]!)));
  let advantages: number[][];
  if (scaling === "group") {
    advantages = centred.map((g, i) => g.map((c) => (zero[i] ? 0 : c / (groupStds[i]! + eps))));
  } else if (scaling === "batch") {
    const all = centred.flat();
    const batchStd = std(all);
    advantages = centred.map((g) => g.map((c) => (batchStd <= tol ? 0 : c / (batchStd + eps))));
  } else {
    advantages = centred.map((g) => g.slice());
  }
  return { advantages, zeroVarianceGroups: zero.filter(Boolean).length, groupMeans, groupStds };
}

/** One rollout as the group rules see it: its reward total and whether its answer is correct. */
export interface RankedReward {
  total: number;
  correct: boolean;
}

/**
 * The correctness-first signal of each group: `correct + scale · u`, where u ∈ [0, 1] is the rollout's
 * total min-max scaled among the rollouts of its group with the same correctness (0 when they tie).
 * With scale < 1 a right rollout always outranks a wrong one; shaping only orders equals. Default scale 0.1.
 */
export function correctnessFirst(groups: readonly (readonly RankedReward[])[], scale = 0.1): number[][] {
  if (!(scale >= 0 && scale < 1)) throw new ReexError("BAD_REQUEST", `shaping scale must be in [0, 1), got ${scale}`);
  return groups.map((g) => {
    const range = (c: boolean): [number, number] => {
      const xs = g.filter((r) => r.correct === c).map((r) => r.total);
      return [Math.min(...xs), Math.max(...xs)];
    };
    const ranges = new Map([true, false].map((c) => [c, range(c)] as const));
    return g.map((r) => {
      const [lo, hi] = ranges.get(r.correct)!;
      return (r.correct ? 1 : 0) + (hi > lo ? (scale * (r.total - lo)) / (hi - lo) : 0);
    });
  });
}

/** Where a step's advantage comes from. */
export interface AdvantageDiagnostics {
  /** Share of groups with some non-zero advantage. */
  informativeShare: number;
  /** Share of groups whose rollouts differ in correctness. */
  contrastShare: number;
  /**
   * Share of the advantage mass Σ|A| explained by correctness: per group, A splits into the mean A of the
   * rollout's correctness class (correctness) and the rest (shaping). Null when every advantage is 0.
   */
  correctnessShare: number | null;
  /** Σ|correctness part| + Σ|shaping part| over the step's rollouts. */
  mass: number;
}

/** Diagnostics of a step's advantages against the rollouts' correctness. */
export function advantageDiagnostics(groups: readonly (readonly RankedReward[])[], advantages: readonly (readonly number[])[]): AdvantageDiagnostics {
  let corr = 0;
  let shape = 0;
  let informative = 0;
  let contrast = 0;
  groups.forEach((g, i) => {
    const a = advantages[i] ?? [];
    if (a.some((x) => x !== 0)) informative++;
    if (g.some((r) => r.correct) && g.some((r) => !r.correct)) contrast++;
    for (const c of [true, false]) {
      const idx = g.map((r, j) => (r.correct === c ? j : -1)).filter((j) => j >= 0);
      if (idx.length === 0) continue;
      const m = idx.reduce((s, j) => s + (a[j] ?? 0), 0) / idx.length;
      for (const j of idx) {
        corr += Math.abs(m);
        shape += Math.abs((a[j] ?? 0) - m);
      }
    }
  });
  const n = Math.max(groups.length, 1);
  const total = corr + shape;
  return { informativeShare: informative / n, contrastShare: contrast / n, correctnessShare: total > 0 ? corr / total : null, mass: total };
}

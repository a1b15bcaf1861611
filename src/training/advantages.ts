/**
 * GRPO advantages from grouped rewards (SPEC §6). Standard deviations are population standard
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

/** Advantage scalings of SPEC §6. */
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

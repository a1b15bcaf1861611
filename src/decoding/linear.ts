/**
 * Linear decoding: k independent rollouts from the prompt, each its own `policy.start` (the
 * policy's prefix cache shares the schema part), run concurrently in as many sequences as the
 * request may hold; the rest queue. Greedy decoding is the one-rollout, temperature-0 case.
 */
import { continueRollout, createRolloutState } from "../agent/index.js";
import type { TrackedTrajectory } from "./control.js";
import { branchOptions, settleAll, stopPruneReason, type Run, type StrategyOutcome } from "./run.js";

/** Runs `k` independent rollouts; paths are "0".."k-1" (each a branch of the prompt, parent null). */
export async function runLinear(run: Run, k: number): Promise<StrategyOutcome> {
  const { control } = run;
  let fatal: unknown;

  const one = async (i: number): Promise<void> => {
    const path = String(i);
    try {
      await control.acquire();
    } catch {
      return;
    }
    let trajectory: TrackedTrajectory;
    try {
      trajectory = await control.start(run.policy, run.spec);
    } catch (err) {
      if (!control.stopped) {
        fatal ??= err;
        control.stop("failed");
      }
      return;
    }
    try {
      run.emit({ type: "branch", path, parent: null, depth: 0 });
      const rollout = await continueRollout(trajectory, createRolloutState(), branchOptions(run, path));
      if (rollout.stopReason === "aborted") {
        run.emit({ type: "prune", path, reason: stopPruneReason(run) });
        return;
      }
      await trajectory.release();
      run.leaves.add(path, rollout, await run.leaves.execute(rollout));
    } finally {
      await trajectory.release();
    }
  };

  await settleAll(Array.from({ length: k }, (_, i) => one(i)));
  if (fatal !== undefined) throw fatal;
  return {};
}

/**
 * Tree decoding (ReEx §3.4). A node is a trajectory's state right after the prompt (the root, "R")
 * or right after a probe's `<result>` was injected; its children are forks of that state, so they
 * share its KV cache instead of re-evaluating the prefix.
 *
 * Budget: every running branch carries a quota of leaves it owes. The root starts with all
 * `candidates` and spawns min(branching, candidates) children that split it. A branch that answers
 * a probe with quota q ≥ 2 becomes a node with min(branching, q) children splitting q; it forks
 * them all and keeps its own state while its subtree runs (when no sequence is free for the last
 * child, it continues itself as that child instead). A branch that finishes is one leaf and gives
 * back q − 1; a pruned branch gives back q. Budget given back goes first to the nearest node above
 * the branch (not the root) that still holds its state or is still forking: a new child there
 * re-samples only what follows that node's probe result. Else it is spent by the shallowest held
 * node that still has room for a child (fewer than `branching`); when none has, the root spawns as
 * many children as there are free sequences (at least `branching`), so the batch stays full. So
 * exactly `candidates` leaves finish unless a stop, the spawn limit or a failure intervenes.
 *
 * Pruning (tree-prune): a branch whose probe fails is dropped; of siblings whose first probes
 * returned identical rows only the first is kept and the duplicate's quota moves to a live branch
 * of the kept one's subtree (when none is live any more, the duplicate is kept instead); a leaf
 * whose final SQL fails is dropped and replaced (kept aside, and added back only if the tree ends
 * short, so the vote can still fall back to it).
 *
 * Sequences: held node states (the root's for the whole decode; another node's until its subtree
 * has no live branch and it has `branching` children) count against the request's slots. Forks take free slots without waiting; when none is free a node forks fewer children
 * (the continuing child keeps the rest of the quota) after first giving up the deepest held node
 * state. Only the budget pump waits for a slot, and only while a running branch holds one; when
 * none does, it hands a held node's state itself to the new child.
 */
import { createRolloutState, finishRollout, forkRollout, rolloutStep, cloneRolloutState, type RolloutResult, type RolloutState } from "../agent/index.js";
import { toReexError } from "../errors/index.js";
import { resultKey } from "../sql/index.js";
import type { ExecResult } from "../sql/index.js";
import type { TrackedTrajectory } from "./control.js";
import { branchOptions, settleAll, stopPruneReason, type Run, type StrategyOutcome } from "./run.js";

/** Path of the tree's root (the prompt); children are "R.0", "R.1", …, grandchildren "R.0.0", …. */
export const ROOT_PATH = "R";

/** Most trajectories a tree may spawn, as a multiple of `candidates` (room for pruned and replaced branches). Default 4. */
export const TREE_SPAWN_FACTOR = 4;

/** How a tree runs. */
export interface TreeOptions {
  candidates: number;
  branching: number;
  prune: boolean;
}

interface NodeRec {
  path: string;
  depth: number;
  /** The node this one grew from; null for the root. */
  parent: NodeRec | null;
  /** Live branches in this node's subtree; a full node's state is freed when it drops to 0. */
  running: number;
  /** While the branch that became this node is still forking its children: the quotas it has yet to fork. */
  expanding: number[] | null;
  /** Next child index (for paths). */
  next: number;
  /** Children spawned so far. */
  children: number;
  /** The node's own state, held so it can take more children; null once given up. */
  held: { trajectory: TrackedTrajectory; state: RolloutState } | null;
  /** First-probe result keys of this node's children (pruning only). */
  firstResults: Map<string, Branch>;
}

interface Branch {
  path: string;
  depth: number;
  quota: number;
  trajectory: TrackedTrajectory;
  state: RolloutState;
  parent: NodeRec;
  probed: boolean;
  live: boolean;
  /** The branch's state became a held node: its trajectory is the node's now. */
  becameNode: boolean;
  /** Branches forked off this one (its subtree). */
  forks: Branch[];
}

/** Splits `total` into `parts` near-equal shares, largest first. */
export function splitQuota(total: number, parts: number): number[] {
  const base = Math.floor(total / parts);
  const extra = total % parts;
  return Array.from({ length: parts }, (_, i) => base + (i < extra ? 1 : 0));
}

/** Runs a tree (optionally pruned) until `candidates` leaves finished, or says why fewer. */
export async function runTree(run: Run, options: TreeOptions): Promise<StrategyOutcome> {
  const { control, emit } = run;
  const maxBranches = TREE_SPAWN_FACTOR * options.candidates;
  const live = new Set<Branch>();
  /** The branch forking each node that is still being expanded. */
  const expanding = new Map<NodeRec, Branch>();
  const tasks: Promise<void>[] = [];
  const reserve: { path: string; rollout: RolloutResult; exec: ExecResult | undefined }[] = [];
  const root: NodeRec = { path: ROOT_PATH, depth: 0, parent: null, running: 0, expanding: null, next: 0, children: 0, held: null, firstResults: new Map() };
  /** Nodes holding their state, in creation order (the root first). */
  const heldNodes: NodeRec[] = [];
  let pool = options.candidates;
  let spawned = 0;
  let pruned = 0;
  let pumping = false;
  let wakers: (() => void)[] = [];
  let fatal: unknown;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));

  const canSpawn = (): boolean => !control.stopped && fatal === undefined && spawned < maxBranches;
  const runningHoldSlots = (): boolean => control.liveCount() > heldNodes.length;
  const checkDone = (): void => {
    if (live.size === 0 && !pumping && (pool === 0 || !canSpawn())) finish();
  };
  /** Wakes a pump waiting for a slot: a branch ended or became a node, so the slot picture changed. */
  const changed = (): void => {
    const w = wakers;
    wakers = [];
    for (const wake of w) wake();
  };
  /** Resolves when a slot is released, a branch ends or becomes a node, or the decode stops. */
  const nextChange = (): Promise<void> => Promise.race([control.nextRelease(), new Promise<void>((resolve) => wakers.push(resolve))]);
  const fail = (err: unknown): void => {
    if (control.stopped) return;
    fatal ??= err;
    control.stop("failed");
  };
  const giveBack = (quota: number, to?: Branch): void => {
    if (quota <= 0) return;
    if (to?.live) to.quota += quota;
    else pool += quota;
    void pump();
  };

  const hold = (node: NodeRec, trajectory: TrackedTrajectory, state: RolloutState): void => {
    node.held = { trajectory, state };
    heldNodes.push(node);
  };
  /** Takes a node's held state away (for a child to continue from, or to free its sequence). */
  const unhold = (node: NodeRec): { trajectory: TrackedTrajectory; state: RolloutState } | null => {
    const held = node.held;
    node.held = null;
    const i = heldNodes.indexOf(node);
    if (i >= 0) heldNodes.splice(i, 1);
    return held;
  };
  /** Frees the deepest held node's sequence (never the root's); false when there is none. */
  const reclaim = async (): Promise<boolean> => {
    const victim = [...heldNodes].reverse().find((n) => n !== root);
    if (!victim) return false;
    await unhold(victim)?.trajectory.release();
    return true;
  };
  /** Where spare budget goes: the shallowest held node with room for a child, else the root (or null: start afresh). */
  const target = (): { node: NodeRec | null; room: number } => {
    let best: NodeRec | undefined;
    for (const n of heldNodes) if (n.children < options.branching && (!best || n.depth < best.depth)) best = n;
    if (best) return { node: best, room: options.branching - best.children };
    // budget that came back to the root (its first children ended without a probe to fork at): as
    // many children as there are free sequences, so the batch stays full
    return { node: root.held ? root : null, room: Math.max(options.branching, control.freeSlots()) };
  };

  const newBranch = (parent: NodeRec, quota: number, trajectory: TrackedTrajectory, state: RolloutState): Branch => {
    parent.children++;
    return {
      path: `${parent.path}.${parent.next++}`,
      depth: parent.depth + 1,
      quota,
      trajectory,
      state,
      parent,
      probed: false,
      live: true,
      becameNode: false,
      forks: [],
    };
  };

  const ancestry = (node: NodeRec | null): NodeRec[] => {
    const out: NodeRec[] = [];
    for (let n = node; n; n = n.parent) out.push(n);
    return out;
  };

  /** Frees the states of full nodes (no room for a child) whose subtrees have no live branch left. */
  const releaseIdle = async (nodes: NodeRec[]): Promise<void> => {
    for (const n of nodes) {
      if (n !== root && n.running === 0 && n.children >= options.branching && n.held) await unhold(n)?.trajectory.release();
    }
  };

  const launch = (b: Branch): void => {
    live.add(b);
    for (const n of ancestry(b.parent)) n.running++;
    emit({ type: "branch", path: b.path, parent: b.parent.path, depth: b.depth });
    const task = runBranch(b)
      .catch(fail)
      .finally(async () => {
        const chain = ancestry(b.parent);
        for (const n of chain) n.running--;
        live.delete(b);
        await releaseIdle(chain).catch(fail);
        changed();
        checkDone();
      });
    tasks.push(task);
  };

  /**
   * Spends budget that `b` gives back on the nearest held node above it (not the root): a new child
   * there re-samples only what follows that node's probe result, where a child of the root would
   * sample the whole rollout again. False when there is no such node or no sequence for the child.
   */
  const respawnBelow = async (b: Branch, quota: number): Promise<boolean> => {
    const node = ancestry(b.parent).find((n) => n !== root && (n.held !== null || n.expanding !== null));
    if (node?.expanding) {
      const owner = live.has(expanding.get(node)!) ? expanding.get(node)! : undefined;
      if (owner) {
        owner.quota += quota;
        node.expanding.push(quota);
        return true;
      }
    }
    if (!node?.held || !canSpawn() || !control.tryAcquire()) return false;
    const source = node.held;
    let child: TrackedTrajectory | null;
    try {
      child = await control.forkHeld(source.trajectory);
    } catch (err) {
      fail(err);
      return false;
    }
    if (!child) return false;
    spawned++;
    launch(newBranch(node, quota, child, cloneRolloutState(source.state)));
    return true;
  };

  /** Gives back `b`'s spare budget: to a live heir, else below its nearest held node, else to the pool. */
  const giveBackFrom = async (b: Branch, quota: number, to?: Branch): Promise<void> => {
    if (quota <= 0) return;
    if (to?.live) return giveBack(quota, to);
    if (await respawnBelow(b, quota)) return;
    giveBack(quota);
  };

  /** A live branch in `b`'s subtree (itself first), if any. */
  const liveIn = (b: Branch): Branch | undefined => {
    if (b.live) return b;
    for (const f of b.forks) {
      const hit = liveIn(f);
      if (hit) return hit;
    }
    return undefined;
  };

  /** Spends the pool: children of the shallowest node with room (else the root, else fresh starts). */
  async function pump(): Promise<void> {
    if (pumping) return;
    pumping = true;
    try {
      while (pool > 0 && canSpawn()) {
        const { node, room } = target();
        const parent = node ?? root;
        if (!control.tryAcquire()) {
          if (runningHoldSlots()) {
            await nextChange();
            continue;
          } else if (node) {
            const state = unhold(node)!;
            spawned++;
            const quota = pool;
            pool = 0;
            launch(newBranch(node, quota, state.trajectory, cloneRolloutState(state.state)));
            continue;
          } else break;
        }
        let slots = 1;
        const k = Math.min(room, pool);
        while (slots < k && control.tryAcquire()) slots++;
        const quotas = splitQuota(pool, slots);
        pool = 0;
        let refused = false;
        for (const quota of quotas) {
          if (!canSpawn() || refused || (node !== null && node.held === null)) {
            pool += quota;
            control.releaseSlot();
            continue;
          }
          const source = node?.held ?? null;
          let child: TrackedTrajectory | null;
          try {
            child = source ? await control.forkHeld(source.trajectory) : await control.start(run.policy, run.spec);
          } catch (err) {
            pool += quota;
            fail(err);
            continue;
          }
          if (!child) {
            pool += quota;
            refused = true;
            continue;
          }
          spawned++;
          launch(newBranch(parent, quota, child, source ? cloneRolloutState(source.state) : createRolloutState()));
        }
        if (node && node !== root && node.children >= options.branching && node.running === 0) await unhold(node)?.trajectory.release();
        if (!refused || pool === 0) continue;
        if (runningHoldSlots()) await nextChange();
        else if (!(await reclaim())) {
          const state = node ? unhold(node) : null;
          if (!state) break;
          spawned++;
          const quota = pool;
          pool = 0;
          launch(newBranch(node!, quota, state.trajectory, cloneRolloutState(state.state)));
        }
      }
    } finally {
      pumping = false;
      checkDone();
    }
  }

  /** Turns a branch that just answered a probe into a node and forks its children. */
  async function expand(b: Branch): Promise<void> {
    const k = Math.min(options.branching, b.quota);
    const queue = splitQuota(b.quota, k);
    const node: NodeRec = { path: b.path, depth: b.depth, parent: b.parent, running: 0, expanding: queue, next: 0, children: 0, held: null, firstResults: new Map() };
    expanding.set(node, b);
    try {
      await forkChildren(b, node, queue);
    } finally {
      node.expanding = null;
      expanding.delete(node);
    }
  }

  /** Forks `node`'s children from `b` for the quotas in `queue` (which grows when the children give budget back meanwhile). */
  async function forkChildren(b: Branch, node: NodeRec, queue: number[]): Promise<void> {
    let forked = 0;
    for (let quota = queue.shift(); quota !== undefined; quota = queue.shift()) {
      if (!canSpawn()) break;
      // the last child would only free this branch to become a held node: not worth another node's state
      if (control.freeSlots() === 0 && (queue.length === 0 || !(await reclaim()))) break;
      let child: { trajectory: TrackedTrajectory; state: RolloutState };
      try {
        const f = await forkRollout(b.trajectory, b.state);
        child = { trajectory: f.trajectory as TrackedTrajectory, state: f.state };
      } catch (err) {
        if (toReexError(err).code !== "CONTEXT_EXHAUSTED") fail(err);
        break;
      }
      spawned++;
      b.quota -= quota;
      forked++;
      const fork = newBranch(node, quota, child.trajectory, child.state);
      b.forks.push(fork);
      launch(fork);
    }
    if (forked === 0) return;
    if (b.quota === 0) {
      b.live = false;
      b.becameNode = true;
      hold(node, b.trajectory, b.state);
      changed();
      return;
    }
    const takeover = newBranch(node, b.quota, b.trajectory, b.state);
    b.path = takeover.path;
    b.depth = takeover.depth;
    b.parent = node;
    node.running++;
    b.probed = false;
    emit({ type: "branch", path: b.path, parent: node.path, depth: b.depth });
  }

  const drop = async (b: Branch, reason: "probe_error" | "duplicate_result", to?: Branch): Promise<void> => {
    const quota = b.quota;
    b.quota = 0;
    b.live = false;
    pruned++;
    emit({ type: "prune", path: b.path, reason });
    await b.trajectory.release();
    await giveBackFrom(b, quota, to);
  };

  async function runBranch(b: Branch): Promise<void> {
    try {
      for (;;) {
        const outcome = await rolloutStep(b.trajectory, b.state, branchOptions(run, b.path));
        if (outcome.kind === "limit") continue;
        if (outcome.kind === "done") break;
        const probe = outcome.probe;
        if (options.prune && probe.result && !probe.result.ok) return drop(b, "probe_error");
        if (!b.probed) {
          b.probed = true;
          if (options.prune && probe.result?.ok) {
            const key = resultKey(probe.result.rows);
            const kept = b.parent.firstResults.get(key);
            const heir = kept && kept !== b ? liveIn(kept) : undefined;
            if (heir) return drop(b, "duplicate_result", heir);
            if (!kept) b.parent.firstResults.set(key, b);
          }
        }
        if (b.quota >= 2 && canSpawn()) {
          await expand(b);
          if (b.becameNode) return;
        }
      }
      await leaf(b);
    } catch (err) {
      if (b.live) {
        const quota = b.quota;
        b.quota = 0;
        b.live = false;
        fail(err);
        giveBack(quota);
      }
    } finally {
      b.live = false;
      if (!b.becameNode) await b.trajectory.release();
    }
  }

  async function leaf(b: Branch): Promise<void> {
    const leftover = b.quota - 1;
    b.quota = 0;
    b.live = false;
    if (b.state.stopReason === "aborted") {
      emit({ type: "prune", path: b.path, reason: stopPruneReason(run) });
      return;
    }
    const rollout = finishRollout(b.trajectory, b.state, { path: b.path, ...(run.base.profile ? { profile: run.base.profile } : {}) });
    await b.trajectory.release();
    if (!options.prune) {
      await giveBackFrom(b, leftover);
      run.leaves.add(b.path, rollout, await run.leaves.execute(rollout));
      return;
    }
    const exec = await run.leaves.execute(rollout);
    if (rollout.finalSql !== null && exec && !exec.ok) {
      reserve.push({ path: b.path, rollout, exec });
      pruned++;
      emit({ type: "prune", path: b.path, reason: "sql_error" });
      await giveBackFrom(b, leftover + 1);
      return;
    }
    run.leaves.add(b.path, rollout, exec);
    await giveBackFrom(b, leftover);
  }

  try {
    let trajectory: TrackedTrajectory;
    try {
      await control.acquire();
      trajectory = await control.start(run.policy, run.spec);
    } catch (err) {
      if (control.stopped) return {};
      throw err;
    }
    hold(root, trajectory, createRolloutState());
    emit({ type: "branch", path: ROOT_PATH, parent: null, depth: 0 });
    void pump();
    await finished;
    await settleAll(tasks);
  } finally {
    await settleAll(tasks).catch(() => undefined);
    await Promise.all([...heldNodes].map((n) => unhold(n)?.trajectory.release()));
  }
  if (fatal !== undefined) throw fatal;

  const short = options.candidates - run.leaves.count;
  const addedBack = Math.min(Math.max(0, short), reserve.length);
  for (const r of reserve.slice(0, addedBack)) run.leaves.add(r.path, r.rollout, r.exec);
  if (short <= 0 || control.stopped) return {};
  const why =
    spawned >= maxBranches
      ? `the tree reached its limit of ${maxBranches} branches (${pruned} pruned) before ${options.candidates} leaves finished`
      : `only ${options.candidates - short} of ${options.candidates} leaves finished (${pruned} branches pruned)`;
  return { shortfall: addedBack > 0 ? `${why}; ${addedBack} pruned leaves whose final SQL failed were added back as candidates` : why };
}

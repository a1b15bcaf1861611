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
 * Pruning (tree-prune): a branch whose path has {@link PRUNE_PROBE_ERRORS} failed probes is dropped
 * (one failed probe gets its error and the real names back and goes on); of siblings whose first probes
 * returned identical rows only the first is kept and the duplicate's quota moves to a live branch
 * of the kept one's subtree (when none is live any more, the duplicate is kept instead); a leaf
 * whose final SQL fails is dropped and replaced (kept aside, and added back only if the tree ends
 * short, so the vote can still fall back to it).
 *
 * Sequences: held node states (the root's for the whole decode; another node's until its subtree
 * has no live branch and it has `branching` children) count against the request's slots. Forks
 * take free slots without waiting; when none is free a node forks fewer children (the continuing
 * child keeps the rest of the quota) after first giving up the deepest held node state. Only the
 * budget pump waits for a slot, and only while a running branch holds one; when none does, it
 * hands a held node's state itself to the new child.
 *
 * In the code: {@link TreeNode} and {@link Branch} hold the tree, {@link TreeDecoder} the decode's
 * state (budget pool, held nodes, set-aside leaves) and one method per step.
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

/** Failed probes on a branch's path at which tree-prune drops it: one failed probe gets its error and the real names back and goes on. Default 2. */
export const PRUNE_PROBE_ERRORS = 2;

/** How a tree runs. */
export interface TreeOptions {
  candidates: number;
  branching: number;
  prune: boolean;
  /**
   * One branch decodes greedily (temperature 0, `finalRetries` as given, never pruned for its probes
   * or as a duplicate), so the greedy answer is always among the candidates (`decoding.greedyBranch`); null for none. Default null.
   */
  greedy?: { finalRetries: number } | null;
}

/** Splits `total` into `parts` near-equal shares, largest first. */
export function splitQuota(total: number, parts: number): number[] {
  const base = Math.floor(total / parts);
  const extra = total % parts;
  return Array.from({ length: parts }, (_, i) => base + (i < extra ? 1 : 0));
}

/** A trajectory with its rollout progress: what a held node keeps and what a child starts from. */
interface Snapshot {
  trajectory: TrackedTrajectory;
  state: RolloutState;
}

/** A point the tree forks from: the prompt (the root) or a branch's state right after a probe's result. */
class TreeNode {
  /** Children spawned so far; the next child's path ends in this number. */
  children = 0;
  /** Live branches in this node's subtree; a full node's state is freed when it drops to 0. */
  liveBelow = 0;
  /** While the branch that became this node still forks its children: that branch, and the quotas it has yet to fork (budget given back meanwhile joins them). */
  expansion: { by: Branch; quotas: number[] } | null = null;
  /** The node's own state, held so it can take more children; null once given up. */
  held: Snapshot | null = null;
  /** First-probe result keys of this node's children (pruning only). */
  readonly firstResults = new Map<string, Branch>();
  /** The node's state is on the greedy path, so one of its children goes on greedily. */
  greedyLine = false;
  /** That child was launched. */
  greedyTaken = false;

  constructor(
    readonly path: string,
    readonly depth: number,
    /** The node this one grew from; null for the root. */
    readonly parent: TreeNode | null,
  ) {}

  /** This node and every node above it, nearest first. */
  ancestry(): TreeNode[] {
    const out: TreeNode[] = [];
    for (let n: TreeNode | null = this; n; n = n.parent) out.push(n);
    return out;
  }

  /** Counts a new child and returns its path. */
  nextChildPath(): string {
    return `${this.path}.${this.children++}`;
  }
}

/** A running trajectory of the tree, owing `quota` leaves. */
class Branch {
  /** Whether it has answered a probe since it started (or since it took over as its node's last child). */
  probed = false;
  /** Still owes leaves: false once it finished, was pruned, failed or became a node. */
  live = true;
  /** Its state became a held node: its trajectory is the node's now. */
  becameNode = false;
  /** Branches forked off this one (its subtree). */
  readonly forks: Branch[] = [];
  /** It decodes greedily (see `TreeOptions.greedy`). */
  greedy = false;
  path: string;
  depth: number;

  constructor(
    /** The node it grew from. */
    public parent: TreeNode,
    public quota: number,
    readonly trajectory: TrackedTrajectory,
    readonly state: RolloutState,
  ) {
    this.path = parent.nextChildPath();
    this.depth = parent.depth + 1;
  }

  /** Goes on as a new child of `node` (same trajectory and task, new place in the tree), not yet probed there; greedy only if no other child of the node is. */
  moveTo(node: TreeNode): void {
    this.parent = node;
    this.path = node.nextChildPath();
    this.depth = node.depth + 1;
    this.probed = false;
    this.greedy = this.greedy && node.greedyLine && !node.greedyTaken;
    if (this.greedy) node.greedyTaken = true;
  }

  /** A live branch in this branch's subtree (itself first), if any. */
  liveInSubtree(): Branch | undefined {
    if (this.live) return this;
    for (const f of this.forks) {
      const hit = f.liveInSubtree();
      if (hit) return hit;
    }
    return undefined;
  }
}

/** A leaf pruned because its final SQL failed, kept aside in case the tree ends short. */
interface SetAsideLeaf {
  path: string;
  rollout: RolloutResult;
  exec: ExecResult | undefined;
}

/** Runs a tree (optionally pruned) until `candidates` leaves finished, or says why fewer. */
export function runTree(run: Run, options: TreeOptions): Promise<StrategyOutcome> {
  return new TreeDecoder(run, options).decode();
}

/**
 * One tree decode. Its steps: {@link pump} spends the unassigned budget on new children,
 * {@link expand} turns a branch that answered a probe into a node and forks its children,
 * {@link prune} drops a branch and gives its budget back, {@link finishLeaf} turns a finished branch
 * into a candidate, and {@link voteInput} settles what goes to the vote once the tree has ended.
 */
export class TreeDecoder {
  private readonly control: Run["control"];
  private readonly maxBranches: number;
  private readonly root = new TreeNode(ROOT_PATH, 0, null);
  /** Branches whose task is still running (a branch that became a node stays until its task ends). */
  private readonly running = new Set<Branch>();
  private readonly tasks: Promise<void>[] = [];
  /** Leaves pruned for a failing final SQL, added back only if the tree ends short. */
  private readonly setAside: SetAsideLeaf[] = [];
  /** Nodes holding their state, in creation order (the root first). */
  private readonly heldNodes: TreeNode[] = [];
  /** Leaves owed by no branch yet: spent by {@link pump}. */
  private pool: number;
  private spawned = 0;
  private pruned = 0;
  private pumping = false;
  /** A pump waiting for a slot picture to change. */
  private pumpWakers: (() => void)[] = [];
  /** The first failure; the decode stops and rethrows it. */
  private fatal: unknown;
  private resolveFinished!: () => void;
  private readonly finished = new Promise<void>((resolve) => (this.resolveFinished = resolve));

  constructor(
    private readonly run: Run,
    private readonly options: TreeOptions,
  ) {
    this.control = run.control;
    this.maxBranches = TREE_SPAWN_FACTOR * options.candidates;
    this.pool = options.candidates;
    this.root.greedyLine = !!options.greedy;
  }

  /** Starts the root, runs the tree until it ends, releases every held state and returns the vote's input. */
  async decode(): Promise<StrategyOutcome> {
    const { control } = this;
    try {
      let trajectory: TrackedTrajectory;
      try {
        await control.acquire();
        trajectory = await control.start(this.run.policy, this.run.spec);
      } catch (err) {
        if (control.stopped) return {};
        throw err;
      }
      this.hold(this.root, trajectory, createRolloutState());
      this.run.emit({ type: "branch", path: ROOT_PATH, parent: null, depth: 0 });
      void this.pump();
      await this.finished;
      await settleAll(this.tasks);
    } finally {
      await settleAll(this.tasks).catch(() => undefined);
      await Promise.all([...this.heldNodes].map((n) => this.unhold(n)?.trajectory.release()));
    }
    if (this.fatal !== undefined) throw this.fatal;
    return this.voteInput();
  }

  /** Adds set-aside leaves back as candidates when the tree ended short, and says why it is short. */
  private voteInput(): StrategyOutcome {
    const { candidates } = this.options;
    const short = candidates - this.run.leaves.count;
    const addedBack = Math.min(Math.max(0, short), this.setAside.length);
    for (const r of this.setAside.slice(0, addedBack)) this.run.leaves.add(r.path, r.rollout, r.exec);
    if (short <= 0 || this.control.stopped) return {};
    const why =
      this.spawned >= this.maxBranches
        ? `the tree reached its limit of ${this.maxBranches} branches (${this.pruned} pruned) before ${candidates} leaves finished`
        : `only ${candidates - short} of ${candidates} leaves finished (${this.pruned} branches pruned)`;
    return { shortfall: addedBack > 0 ? `${why}; ${addedBack} pruned leaves whose final SQL failed were added back as candidates` : why };
  }

  private canSpawn(): boolean {
    return !this.control.stopped && this.fatal === undefined && this.spawned < this.maxBranches;
  }

  /** Running branches hold slots (beyond the held nodes'), so one will come free. */
  private runningHoldSlots(): boolean {
    return this.control.liveCount() > this.heldNodes.length;
  }

  private checkDone(): void {
    if (this.running.size === 0 && !this.pumping && (this.pool === 0 || !this.canSpawn())) this.resolveFinished();
  }

  /** Wakes a pump waiting for a slot: a branch ended or became a node, so the slot picture changed. */
  private changed(): void {
    const wakers = this.pumpWakers;
    this.pumpWakers = [];
    for (const wake of wakers) wake();
  }

  /** Resolves when a slot is released, a branch ends or becomes a node, or the decode stops. */
  private nextChange(): Promise<void> {
    return Promise.race([this.control.nextRelease(), new Promise<void>((resolve) => this.pumpWakers.push(resolve))]);
  }

  private fail(err: unknown): void {
    if (this.control.stopped) return;
    this.fatal ??= err;
    this.control.stop("failed");
  }

  /** Gives budget to a live heir, else back to the pool, and lets the pump spend it. */
  private giveBack(quota: number, to?: Branch): void {
    if (quota <= 0) return;
    if (to?.live) to.quota += quota;
    else this.pool += quota;
    void this.pump();
  }

  private hold(node: TreeNode, trajectory: TrackedTrajectory, state: RolloutState): void {
    node.held = { trajectory, state };
    this.heldNodes.push(node);
  }

  /** Takes a node's held state away (for a child to continue from, or to free its sequence). */
  private unhold(node: TreeNode): Snapshot | null {
    const held = node.held;
    node.held = null;
    const i = this.heldNodes.indexOf(node);
    if (i >= 0) this.heldNodes.splice(i, 1);
    return held;
  }

  /** Frees the deepest held node's sequence (never the root's); false when there is none. */
  private async reclaim(): Promise<boolean> {
    const victim = [...this.heldNodes].reverse().find((n) => n !== this.root);
    if (!victim) return false;
    await this.unhold(victim)?.trajectory.release();
    return true;
  }

  /** Where spare budget goes: the shallowest held node with room for a child, else the root (or null: start afresh). */
  private target(): { node: TreeNode | null; room: number } {
    const { branching } = this.options;
    let best: TreeNode | undefined;
    for (const n of this.heldNodes) if (n.children < branching && (!best || n.depth < best.depth)) best = n;
    if (best) return { node: best, room: branching - best.children };
    // budget that came back to the root (its first children ended without a probe to fork at): as
    // many children as there are free sequences, so the batch stays full
    return { node: this.root.held ? this.root : null, room: Math.max(branching, this.control.freeSlots()) };
  }

  /** Frees the states of full nodes (no room for a child) whose subtrees have no live branch left. */
  private async releaseIdle(nodes: TreeNode[]): Promise<void> {
    for (const n of nodes) {
      if (n !== this.root && n.liveBelow === 0 && n.children >= this.options.branching && n.held) await this.unhold(n)?.trajectory.release();
    }
  }

  /** Spawns a branch: counts it, announces it and runs it to its end. */
  private launch(parent: TreeNode, quota: number, from: Snapshot): Branch {
    this.spawned++;
    const b = new Branch(parent, quota, from.trajectory, from.state);
    b.greedy = parent.greedyLine && !parent.greedyTaken;
    if (b.greedy) parent.greedyTaken = true;
    this.running.add(b);
    for (const n of parent.ancestry()) n.liveBelow++;
    this.run.emit({ type: "branch", path: b.path, parent: parent.path, depth: b.depth });
    const task = this.runBranch(b)
      .catch((err: unknown) => this.fail(err))
      .finally(async () => {
        const chain = b.parent.ancestry();
        for (const n of chain) n.liveBelow--;
        this.running.delete(b);
        await this.releaseIdle(chain).catch((err: unknown) => this.fail(err));
        this.changed();
        this.checkDone();
      });
    this.tasks.push(task);
    return b;
  }

  /** A child state of a held node: its trajectory forked into a new sequence, its rollout state cloned. */
  private async forkHeld(held: Snapshot): Promise<Snapshot | null> {
    const child = await this.control.forkHeld(held.trajectory);
    return child ? { trajectory: child, state: cloneRolloutState(held.state) } : null;
  }

  /** Hands a held node's own state to a new child owing the whole pool (no sequence is free for a fork). */
  private launchFromOwnState(node: TreeNode): boolean {
    const state = this.unhold(node);
    if (!state) return false;
    const quota = this.pool;
    this.pool = 0;
    this.launch(node, quota, { trajectory: state.trajectory, state: cloneRolloutState(state.state) });
    return true;
  }

  /**
   * Spends budget that `b` gives back on the nearest held node above it (not the root): a new child
   * there re-samples only what follows that node's probe result, where a child of the root would
   * sample the whole rollout again. False when there is no such node or no sequence for the child.
   */
  private async respawnBelow(b: Branch, quota: number): Promise<boolean> {
    const node = b.parent.ancestry().find((n) => n !== this.root && (n.held !== null || n.expansion !== null));
    const expansion = node?.expansion;
    if (expansion && this.running.has(expansion.by)) {
      expansion.by.quota += quota;
      expansion.quotas.push(quota);
      return true;
    }
    if (!node?.held || !this.canSpawn() || !this.control.tryAcquire()) return false;
    let child: Snapshot | null;
    try {
      child = await this.forkHeld(node.held);
    } catch (err) {
      this.fail(err);
      return false;
    }
    if (!child) return false;
    this.launch(node, quota, child);
    return true;
  }

  /** Gives back `b`'s spare budget: to a live heir, else below its nearest held node, else to the pool. */
  private async giveBackFrom(b: Branch, quota: number, to?: Branch): Promise<void> {
    if (quota <= 0) return;
    if (to?.live) return this.giveBack(quota, to);
    if (await this.respawnBelow(b, quota)) return;
    this.giveBack(quota);
  }

  /** Spends the pool: children of the shallowest node with room (else the root, else fresh starts). */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    const { control } = this;
    try {
      while (this.pool > 0 && this.canSpawn()) {
        const { node, room } = this.target();
        if (!control.tryAcquire()) {
          if (this.runningHoldSlots()) {
            await this.nextChange();
            continue;
          } else if (node && this.launchFromOwnState(node)) continue;
          else break;
        }
        let slots = 1;
        const k = Math.min(room, this.pool);
        while (slots < k && control.tryAcquire()) slots++;
        const quotas = splitQuota(this.pool, slots);
        this.pool = 0;
        const refused = await this.spawnChildren(node, quotas);
        if (node && node !== this.root && node.children >= this.options.branching && node.liveBelow === 0) await this.unhold(node)?.trajectory.release();
        if (!refused || this.pool === 0) continue;
        if (this.runningHoldSlots()) await this.nextChange();
        else if (!(await this.reclaim()) && !(node && this.launchFromOwnState(node))) break;
      }
    } finally {
      this.pumping = false;
      this.checkDone();
    }
  }

  /**
   * Launches one child of `node` (or a fresh start from the prompt when null) per quota, each in a
   * slot the pump already holds; a quota that cannot spawn goes back to the pool and frees its slot.
   * True when the policy refused a fork for want of a sequence.
   */
  private async spawnChildren(node: TreeNode | null, quotas: number[]): Promise<boolean> {
    const { control } = this;
    let refused = false;
    for (const quota of quotas) {
      if (!this.canSpawn() || refused || (node !== null && node.held === null)) {
        this.pool += quota;
        control.releaseSlot();
        continue;
      }
      const source = node?.held ?? null;
      let child: Snapshot | null;
      try {
        child = source ? await this.forkHeld(source) : { trajectory: await control.start(this.run.policy, this.run.spec), state: createRolloutState() };
      } catch (err) {
        this.pool += quota;
        this.fail(err);
        continue;
      }
      if (!child) {
        this.pool += quota;
        refused = true;
        continue;
      }
      this.launch(node ?? this.root, quota, child);
    }
    return refused;
  }

  /**
   * Turns a branch that just answered a probe into a node and forks min(branching, quota) children
   * splitting its quota. When it forked them all it becomes the node (its state held); when fewer,
   * it continues as the node's last child with the rest of its quota.
   */
  private async expand(b: Branch): Promise<void> {
    const k = Math.min(this.options.branching, b.quota);
    const node = new TreeNode(b.path, b.depth, b.parent);
    node.greedyLine = b.greedy;
    node.expansion = { by: b, quotas: splitQuota(b.quota, k) };
    let forked: number;
    try {
      forked = await this.forkChildren(b, node, node.expansion.quotas);
    } finally {
      node.expansion = null;
    }
    if (forked === 0) return;
    if (b.quota === 0) {
      b.live = false;
      b.becameNode = true;
      this.hold(node, b.trajectory, b.state);
      this.changed();
      return;
    }
    this.takeOver(b, node);
  }

  /** Forks `node`'s children from `b` for the quotas in `queue` (which grows when the children give budget back meanwhile); returns how many. */
  private async forkChildren(b: Branch, node: TreeNode, queue: number[]): Promise<number> {
    let forked = 0;
    for (let quota = queue.shift(); quota !== undefined; quota = queue.shift()) {
      if (!this.canSpawn()) break;
      // the last child would only free this branch to become a held node: not worth another node's state
      if (this.control.freeSlots() === 0 && (queue.length === 0 || !(await this.reclaim()))) break;
      let child: Snapshot;
      try {
        const f = await forkRollout(b.trajectory, b.state);
        child = { trajectory: f.trajectory as TrackedTrajectory, state: f.state };
      } catch (err) {
        if (toReexError(err).code !== "CONTEXT_EXHAUSTED") this.fail(err);
        break;
      }
      b.quota -= quota;
      forked++;
      b.forks.push(this.launch(node, quota, child));
    }
    return forked;
  }

  /** `b` goes on as `node`'s last child (keeping the quota it did not fork away), under a new path. */
  private takeOver(b: Branch, node: TreeNode): void {
    b.moveTo(node);
    node.liveBelow++;
    this.run.emit({ type: "branch", path: b.path, parent: node.path, depth: b.depth });
  }

  /** Drops a live branch (pruning), releases its trajectory and gives its quota to `to` or back to the tree. */
  private async prune(b: Branch, reason: "probe_error" | "duplicate_result", to?: Branch): Promise<void> {
    const quota = b.quota;
    b.quota = 0;
    b.live = false;
    this.pruned++;
    this.run.emit({ type: "prune", path: b.path, reason });
    await b.trajectory.release();
    await this.giveBackFrom(b, quota, to);
  }

  /** Under tree-prune, the sibling whose identical first-probe result `b` repeats, when that sibling's subtree still has a live branch to inherit `b`'s budget. */
  private duplicateHeir(b: Branch, result: ExecResult | null): Branch | undefined {
    if (!this.options.prune || !result?.ok || b.greedy) {
      if (b.greedy && result?.ok && !b.parent.firstResults.has(resultKey(result.rows))) b.parent.firstResults.set(resultKey(result.rows), b);
      return undefined;
    }
    const key = resultKey(result.rows);
    const kept = b.parent.firstResults.get(key);
    const heir = kept && kept !== b ? kept.liveInSubtree() : undefined;
    if (!kept) b.parent.firstResults.set(key, b);
    return heir;
  }

  /** A branch's rollout options: the run's, or greedy ones for the greedy branch. */
  private optionsOf(b: Branch): ReturnType<typeof branchOptions> {
    const options = branchOptions(this.run, b.path);
    const greedy = this.options.greedy;
    return b.greedy && greedy ? { ...options, temperature: 0, topP: 1, finalRetries: greedy.finalRetries } : options;
  }

  /** Runs a branch's rollout, expanding it after each probe while it owes two leaves or more, until it is a leaf, pruned or a node. */
  private async runBranch(b: Branch): Promise<void> {
    try {
      for (;;) {
        const outcome = await rolloutStep(b.trajectory, b.state, this.optionsOf(b));
        if (outcome.kind === "limit") continue;
        if (outcome.kind === "done") break;
        const probe = outcome.probe;
        if (this.options.prune && !b.greedy && probe.result && !probe.result.ok && failedProbes(b.state) >= PRUNE_PROBE_ERRORS)
          return this.prune(b, "probe_error");
        if (!b.probed) {
          b.probed = true;
          const heir = this.duplicateHeir(b, probe.result);
          if (heir) return this.prune(b, "duplicate_result", heir);
        }
        // a failed probe is a step to recover from, not a point to branch at: its children would all start from the error
        if (b.quota >= 2 && this.canSpawn() && probe.result?.ok !== false) {
          await this.expand(b);
          if (b.becameNode) return;
        }
      }
      await this.finishLeaf(b);
    } catch (err) {
      if (b.live) {
        const quota = b.quota;
        b.quota = 0;
        b.live = false;
        this.fail(err);
        this.giveBack(quota);
      }
    } finally {
      b.live = false;
      if (!b.becameNode) await b.trajectory.release();
    }
  }

  /**
   * A branch that ended: one leaf, giving back the rest of its quota. Its final SQL is executed;
   * under tree-prune a leaf whose SQL fails is set aside and its quota given back whole.
   */
  private async finishLeaf(b: Branch): Promise<void> {
    const { run } = this;
    const leftover = b.quota - 1;
    b.quota = 0;
    b.live = false;
    if (b.state.stopReason === "aborted") {
      run.emit({ type: "prune", path: b.path, reason: stopPruneReason(run) });
      return;
    }
    const rollout = finishRollout(b.trajectory, b.state, {
      path: b.path,
      profile: run.base.profile,
      ...(run.base.grammar ? { grammar: run.base.grammar } : {}),
    });
    await b.trajectory.release();
    if (!this.options.prune) {
      await this.giveBackFrom(b, leftover);
      run.leaves.add(b.path, rollout, await run.leaves.execute(rollout));
      return;
    }
    const exec = await run.leaves.execute(rollout);
    if (rollout.finalSql !== null && exec && !exec.ok) {
      this.setAside.push({ path: b.path, rollout, exec });
      this.pruned++;
      run.emit({ type: "prune", path: b.path, reason: "sql_error" });
      await this.giveBackFrom(b, leftover + 1);
      return;
    }
    run.leaves.add(b.path, rollout, exec);
    await this.giveBackFrom(b, leftover);
  }
}

/** Probes on a rollout's path whose SQL failed. */
function failedProbes(state: RolloutState): number {
  return state.probes.filter((p) => p.result !== null && !p.result.ok).length;
}

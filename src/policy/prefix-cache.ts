/**
 * Least-recently-used cache of evaluated prompt prefixes, each held in its own sequence. Entries
 * are pinned while a trajectory copies from them, and evicted when trajectories need sequences.
 */

/** Something that owns a sequence and can give it back. */
export interface Disposable {
  dispose(): Promise<void>;
}

interface Entry<S> {
  value: S;
  tokens: readonly number[];
  pins: number;
}

/** An LRU map from prefix token ids to the sequence holding them. */
export class PrefixCache<S extends Disposable> {
  private readonly entries = new Map<string, Entry<S>>();

  /** The cache key of a prefix. */
  static key(tokens: readonly number[]): string {
    return tokens.join(",");
  }

  get size(): number {
    return this.entries.size;
  }

  /** The entry for `key`, pinned (unpin when done) and marked most recently used. */
  acquire(key: string): { value: S; tokens: readonly number[]; unpin: () => void } | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    entry.pins++;
    let done = false;
    return {
      value: entry.value,
      tokens: entry.tokens,
      unpin: () => {
        if (!done) {
          done = true;
          entry.pins--;
        }
      },
    };
  }

  /** Adds an entry as most recently used; replaces (and disposes) an existing one for the key. */
  async add(key: string, tokens: readonly number[], value: S): Promise<void> {
    const old = this.entries.get(key);
    this.entries.delete(key);
    this.entries.set(key, { value, tokens, pins: 0 });
    if (old && old.value !== value) await old.value.dispose();
  }

  /** Disposes the least recently used unpinned entry; false when there is none. */
  async evictOne(): Promise<boolean> {
    for (const [key, entry] of this.entries) {
      if (entry.pins === 0) {
        this.entries.delete(key);
        await entry.value.dispose();
        return true;
      }
    }
    return false;
  }

  /** Disposes every entry (pinned ones too; callers stop using them first). */
  async clear(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    for (const e of all) await e.value.dispose();
  }
}

/** A seeded pseudo-random source (mulberry32): `uniform()` in [0, 1) and `normal()`, a standard normal draw (Box-Muller). */
export function seededRandom(seed: number): { uniform: () => number; normal: () => number } {
  let s = seed >>> 0;
  const uniform = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = (): number => {
    const u = Math.max(uniform(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  };
  return { uniform, normal };
}

/** Shuffles `items` in place (Fisher-Yates, drawing from `uniform`) and returns it. */
export function shuffleInPlace<T>(items: T[], uniform: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(uniform() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

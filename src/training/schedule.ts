/** Which questions or traces each step trains on: a seeded order per epoch, walked in step-sized slices. */
import { fnv1a32, seededRandom, shuffleInPlace } from "../util/index.js";

/** `0..n-1` in a seeded order. */
export function permutation(n: number, seed: string): number[] {
  return shuffleInPlace(
    Array.from({ length: n }, (_, i) => i),
    seededRandom(fnv1a32(seed) || 1).uniform,
  );
}

/**
 * Indices of the items a step trains on: a seeded shuffle per pass over the data, walked in order,
 * so the schedule depends only on (seed, step) and a resumed run sees the same questions.
 */
export function scheduleFor(step: number, perStep: number, count: number, seed: number): number[] {
  const out: number[] = [];
  const cache = new Map<number, number[]>();
  for (let j = 0; j < perStep; j++) {
    const p = (step - 1) * perStep + j;
    const epoch = Math.floor(p / count);
    let perm = cache.get(epoch);
    if (!perm) {
      perm = permutation(count, `${seed}:${epoch}`);
      cache.set(epoch, perm);
    }
    out.push(perm[p % count]!);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The loop
// ---------------------------------------------------------------------------------------------

/**
 * Small helpers every layer may use (layer 0, importing nothing): a seeded random source and
 * shuffle, and a string hash. Here so that the import rules do not breed copies of them.
 */
export { fnv1a32 } from "./hash.js";
export { seededRandom, shuffleInPlace } from "./random.js";

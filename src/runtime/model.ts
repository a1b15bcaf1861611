/** The model a runtime loads when the config names none: the starter policy, else a placeholder written for the occasion. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Config } from "../config/index.js";
import { buildTinyModel, writeFileAtomic } from "../policy/tooling.js";
import type { Runtime } from "./index.js";

/** File name of the project's own starter policy inside `policy.modelsDir`. */
export const STARTER_MODEL = "reex-starter.gguf";
/** Placeholder written when no starter model is present: random weights, real tokenizer and shapes. */
export const PLACEHOLDER_MODEL = "reex-tiny-random.gguf";

/**
 * Resolves the model to load: the configured one, else the starter policy in `modelsDir`, else a
 * random-weight placeholder written there (so a fresh clone starts; its answers are meaningless).
 */
export async function resolveModel(config: Config, log?: (m: string) => void): Promise<Runtime["model"]> {
  if (config.policy.model) return { path: config.policy.model, origin: "configured" };
  const dir = resolve(config.policy.modelsDir);
  const starter = join(dir, STARTER_MODEL);
  if (existsSync(starter)) return { path: starter, origin: "starter" };
  const placeholder = join(dir, PLACEHOLDER_MODEL);
  if (!existsSync(placeholder)) {
    log?.(`no ${STARTER_MODEL} in ${dir}: writing a random-weight placeholder model (${PLACEHOLDER_MODEL}); its SQL is noise`);
    await writeFileAtomic(placeholder, buildTinyModel({ seed: 1 }));
  }
  return { path: placeholder, origin: "placeholder" };
}

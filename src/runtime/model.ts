/**
 * The model a runtime loads when the config names none: the default model (`policy.defaultModel`, a
 * pulled Qwen2.5-Coder by default), else the starter policy, else a placeholder written for the occasion.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Config } from "../config/index.js";
import { ReexError } from "../errors/index.js";
import { PACKAGED_MODELS } from "../policy/index.js";
import { buildTinyModel, writeFileAtomic } from "../policy/tooling.js";

/** File name of the project's own starter policy inside `policy.modelsDir`. */
export const STARTER_MODEL = "reex-starter.gguf";
/** Placeholder written when no starter model is present: random weights, real tokenizer and shapes. */
export const PLACEHOLDER_MODEL = "reex-tiny-random.gguf";

/**
 * The packaged model `policy.defaultModel` names, or undefined for "starter"; CONFIG_INVALID for a
 * name `reex models pull` does not know.
 */
function defaultPackaged(name: string): (typeof PACKAGED_MODELS)[number] | undefined {
  if (name === "starter") return undefined;
  const found = PACKAGED_MODELS.find((m) => m.name === name);
  if (!found)
    throw new ReexError(
      "CONFIG_INVALID",
      `policy.defaultModel "${name}" is neither "starter" nor a model reex pulls (${PACKAGED_MODELS.map((m) => m.name).join(", ")})`,
    );
  return found;
}

/** Which model file was loaded and why: configured (`policy.model`), default (`policy.defaultModel`, pulled), starter, placeholder (a runtime's `model`). */
export interface ResolvedModel {
  path: string;
  origin: "configured" | "default" | "starter" | "placeholder";
  reason: string;
}

/**
 * Resolves the model to load: the configured one; else `policy.defaultModel` when it is pulled into
 * `modelsDir`; else the starter policy there (saying why when the default was wanted), else a
 * random-weight placeholder written there (so a fresh clone starts; its answers are meaningless).
 */
export async function resolveModel(config: Config, log?: (m: string) => void): Promise<ResolvedModel> {
  if (config.policy.model) return { path: config.policy.model, origin: "configured", reason: "policy.model" };
  const dir = resolve(config.policy.modelsDir);
  const packaged = defaultPackaged(config.policy.defaultModel);
  let reason = 'policy.defaultModel is "starter"';
  if (packaged) {
    const file = join(dir, packaged.file);
    if (existsSync(file)) return { path: file, origin: "default", reason: `policy.defaultModel ${packaged.name}` };
    reason = `the default model ${packaged.name} is not pulled (no ${file}); \`npx reex models pull ${packaged.name}\` installs it`;
    log?.(`${reason}: serving the starter instead`);
  }
  const starter = join(dir, STARTER_MODEL);
  if (existsSync(starter)) return { path: starter, origin: "starter", reason };
  const placeholder = join(dir, PLACEHOLDER_MODEL);
  if (!existsSync(placeholder)) {
    log?.(`no ${STARTER_MODEL} in ${dir}: writing a random-weight placeholder model (${PLACEHOLDER_MODEL}); its SQL is noise`);
    await writeFileAtomic(placeholder, buildTinyModel({ seed: 1 }));
  }
  return { path: placeholder, origin: "placeholder", reason: `${reason}, and no ${STARTER_MODEL} in ${dir}` };
}

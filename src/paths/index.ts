/**
 * Where reex's own files are: the package root (the folder holding package.json), found upwards
 * from this module, so it is the same from src/ (tsx) and dist/ (built); and how a model reference
 * that is not a path is told apart.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The folder holding package.json, found upwards from this module. Default the working directory if none. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}

/** A model given as a URI to download (`hf:`, `huggingface:`, `http(s)://`) rather than a file path. */
export function isModelUri(model: string): boolean {
  return /^(hf:|huggingface:|https?:\/\/)/i.test(model);
}

/** What front ends show of a loaded policy. */
import type { PolicyInfo } from "./types.js";

/**
 * The model's name for people: its GGUF `general.name`, else the file name without folders (a
 * path on the server's disk is not shown), else what the backend calls it.
 */
export function modelDisplayName(info: PolicyInfo): string {
  const meta = info.metadata ?? {};
  const named = meta.name?.trim();
  if (named) return named;
  if (meta.file?.trim()) return meta.file.trim();
  const last = info.model.split(/[\\/]/).filter(Boolean).pop();
  return last ?? info.model;
}

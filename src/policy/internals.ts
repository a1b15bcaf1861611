/**
 * The one place that touches node-llama-cpp internals: copying one sequence's KV state into
 * another (`LlamaContextSequence._copyStateFromOtherSequence`, which calls llama.cpp's
 * `llama_memory_seq_cp` and sets the copy's token history). Verified against node-llama-cpp
 * 3.22.1; on another version it is used only if present, else callers re-evaluate the tokens.
 */
import { getModuleVersion, type LlamaContextSequence, type Token } from "node-llama-cpp";

/** The node-llama-cpp version this module was verified against. */
export const VERIFIED_NODE_LLAMA_CPP_VERSION = "3.22.1";

interface SequenceInternals {
  _copyStateFromOtherSequence?: (other: LlamaContextSequence, upToTokenIndex: number) => Promise<boolean>;
}

/** Whether KV copying is available, and whether the installed version is the verified one. */
export async function kvCopySupport(): Promise<{ available: boolean; verified: boolean; version: string }> {
  const version = await getModuleVersion();
  const probe = (await import("node-llama-cpp")).LlamaContextSequence.prototype as unknown as SequenceInternals;
  return {
    available: typeof probe._copyStateFromOtherSequence === "function",
    verified: version === VERIFIED_NODE_LLAMA_CPP_VERSION,
    version,
  };
}

/**
 * Makes `target` (an empty sequence of the same context) hold `source`'s evaluated tokens without
 * evaluating them. Returns false when the copy did not happen; `target` is then empty again.
 */
export async function copySequenceState(target: LlamaContextSequence, source: LlamaContextSequence): Promise<boolean> {
  const copy = (target as unknown as SequenceInternals)._copyStateFromOtherSequence;
  if (typeof copy !== "function") return false;
  const length = source.nextTokenIndex;
  let ok = false;
  try {
    ok = await copy.call(target, source, length);
  } catch {
    ok = false;
  }
  if (ok && target.nextTokenIndex === length) return true;
  await target.clearHistory();
  return false;
}

/** Our plain token ids as node-llama-cpp's branded `Token` type. */
export function asTokens(tokens: readonly number[]): Token[] {
  return tokens as Token[];
}

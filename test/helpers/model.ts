/**
 * The tiny random GGUF models every test may load: fixed paths under test/.output, built on demand
 * (deterministic bytes, well under a second). test/global-setup.ts rebuilds them once per run.
 */
import { access, readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { LlamaPolicyOptions } from "../../src/policy/testing.js";
import { buildTinyLora, buildTinyModel, writeFileAtomic } from "../../src/policy/tiny-model.js";

const output = (name: string): string => fileURLToPath(new URL(`../.output/${name}`, import.meta.url));

/** The tiny llama model (seed 1, f32 weights). */
export const TEST_MODEL = output("tiny.gguf");
/** A second tiny model of the same shape with other weights (seed 2, f16), for reload tests. */
export const TEST_MODEL_ALT = output("tiny-alt.gguf");
/** A random LoRA adapter for {@link TEST_MODEL}. */
export const TEST_LORA = output("tiny-lora.gguf");

const files: [string, () => Buffer][] = [
  [TEST_MODEL, () => buildTinyModel({ seed: 1 })],
  [TEST_MODEL_ALT, () => buildTinyModel({ seed: 2, weightType: "f16" })],
  [TEST_LORA, () => buildTinyLora({ seed: 1 }, { seed: 7 })],
];

async function same(path: string, bytes: Buffer): Promise<boolean> {
  try {
    return (await readFile(path)).equals(bytes);
  } catch {
    return false;
  }
}

/** Writes every test model whose file is missing or differs from what the generator makes now. */
export async function buildTestModels(): Promise<void> {
  for (const [path, build] of files) {
    const bytes = build();
    if (!(await same(path, bytes))) await writeFileAtomic(path, bytes);
  }
}

let ready: Promise<void> | undefined;

/** The path of the tiny test model, built first if missing. */
export async function ensureTestModel(): Promise<string> {
  ready ??= (async () => {
    for (const [path, build] of files) {
      try {
        await access(path);
      } catch {
        await writeFileAtomic(path, build());
      }
    }
  })();
  await ready;
  return TEST_MODEL;
}

/**
 * Options that load the tiny model fast and safely on a shared 2-core machine: CPU, one thread
 * (llama.cpp's spinning worker threads slow to a crawl when other processes hold the cores).
 */
export function testPolicyOptions(overrides: Partial<LlamaPolicyOptions> = {}): LlamaPolicyOptions {
  return { model: TEST_MODEL, gpu: "cpu", contextSize: 2048, sequences: 8, threads: 1, ...overrides };
}

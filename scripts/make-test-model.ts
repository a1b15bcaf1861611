/**
 * Writes the tiny random llama GGUF used by tests and benchmarks.
 *
 *   npx tsx scripts/make-test-model.ts [OUT] [--seed N] [--f16] [--lora LORA_OUT]
 *
 * OUT defaults to test/.output/tiny.gguf; `--lora` also writes a matching random LoRA adapter.
 */
import { parseArgs } from "node:util";
import { buildTinyLora, buildTinyModel, writeFileAtomic } from "../src/policy/tiny-model.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seed: { type: "string", default: "1" },
    f16: { type: "boolean", default: false },
    lora: { type: "string" },
  },
});

const out = positionals[0] ?? "test/.output/tiny.gguf";
const seed = Number(values.seed);
if (!Number.isInteger(seed)) throw new Error(`--seed must be an integer, got ${values.seed}`);
const shape = { seed, weightType: values.f16 ? ("f16" as const) : ("f32" as const) };
const bytes = buildTinyModel(shape);
await writeFileAtomic(out, bytes);
console.log(`wrote ${out} (${bytes.length} bytes)`);
if (values.lora) {
  const lora = buildTinyLora(shape);
  await writeFileAtomic(values.lora, lora);
  console.log(`wrote ${values.lora} (${lora.length} bytes)`);
}

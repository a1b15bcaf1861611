// Prints llama.cpp's raw logits for a token sequence, as JSON, for the learner's parity test.
//
//   node src/training/learner/tests/llama_logits.mjs MODEL.gguf '[1,2,3]' [--exact | --no-flash | --kv f16|f32] [--positions all|last]
//
// Run it from this file (not `node -e`): node-llama-cpp's binding check fails under -e and then
// tries to build llama.cpp from source. `--exact` turns off flash attention and keeps the KV cache
// in F32 (llama.cpp's defaults store K/V as F16), so the comparison measures the maths, not the
// cache's rounding.
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, tokensJson, ...rest] = process.argv.slice(2);
if (!modelPath || !tokensJson) {
  console.error("usage: llama_logits.mjs MODEL.gguf '[tokens]' [--exact] [--positions all|last]");
  process.exit(2);
}
const exact = rest.includes("--exact");
const noFlash = exact || rest.includes("--no-flash");
const kvIdx = rest.indexOf("--kv");
const kvType = exact ? "F32" : kvIdx >= 0 ? rest[kvIdx + 1].toUpperCase() : undefined;
const posIdx = rest.indexOf("--positions");
const positions = posIdx >= 0 ? rest[posIdx + 1] : "all";
const tokens = JSON.parse(tokensJson);

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
const context = await model.createContext({
  contextSize: Math.max(64, tokens.length + 8),
  batchSize: Math.max(64, tokens.length + 8),
  sequences: 1,
  threads: 1,
  ...(noFlash ? { flashAttention: false } : {}),
  ...(kvType ? { experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType } : {}),
});
const sequence = context.getSequence();
const input = tokens.map((t, i) =>
  positions === "all" || i === tokens.length - 1 ? [t, { generateNext: { logits: true } }] : t,
);
const out = await sequence.controlledEvaluate(input);
const rows = [];
for (let i = 0; i < tokens.length; i++) {
  const logits = out[i]?.next?.logits;
  if (!logits) continue;
  const row = new Array(logits.size);
  for (const [tok, v] of logits) row[tok] = v;
  rows.push({ position: i, logits: row });
}
process.stdout.write(JSON.stringify({ exact, flashAttention: noFlash ? false : "auto", kv: kvType ?? "default", n_vocab: rows[0]?.logits.length ?? 0, rows }) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();

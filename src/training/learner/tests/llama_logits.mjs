// Prints llama.cpp's raw logits for a token sequence, as JSON, for the learner's parity test.
//
//   node src/training/learner/tests/llama_logits.mjs MODEL.gguf '[1,2,3]' [--exact | --no-flash | --kv f16|f32]
//        [--positions all|last|I,J,K] [--text [--tokenize-only]] [--out FILE] [--lora ADAPTER.gguf [--lora-scale S]]
//
// Run it from this file (not `node -e`): node-llama-cpp's binding check fails under -e and then
// tries to build llama.cpp from source. `--exact` turns off flash attention and keeps the KV cache
// in F32 (llama.cpp's defaults store K/V as F16), so the comparison measures the maths, not the
// cache's rounding.
//
// For big vocabularies (Gemma: 262144 logits a row) JSON is too slow: `--out FILE` writes the rows
// as little-endian float32 (rows x n_vocab, in `positions` order) to FILE and prints the JSON
// without `rows[].logits`. `--positions I,J,K` asks llama.cpp for those rows only. `--text` reads
// the second argument as text, tokenised by the model (special tokens parsed, BOS prepended when
// the model adds one); the JSON then carries `tokens` (`--tokenize-only`: and nothing is evaluated).
//
// `--lora FILE` (repeatable) loads a llama.cpp LoRA GGUF onto the context, as the server hot-loads one
// beside an unchanged base (node-llama-cpp's `createContext({ lora: { adapters: [{ filePath, scale }] } })`),
// each with `--lora-scale` (default 1).
import { writeFileSync } from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, tokensJson, ...rest] = process.argv.slice(2);
if (!modelPath || !tokensJson) {
  console.error("usage: llama_logits.mjs MODEL.gguf '[tokens]' [--exact] [--positions all|last|I,J,K] [--text] [--out FILE]");
  process.exit(2);
}
const exact = rest.includes("--exact");
const noFlash = exact || rest.includes("--no-flash");
const kvIdx = rest.indexOf("--kv");
const kvType = exact ? "F32" : kvIdx >= 0 ? rest[kvIdx + 1].toUpperCase() : undefined;
const posIdx = rest.indexOf("--positions");
const positions = posIdx >= 0 ? rest[posIdx + 1] : "all";
const outIdx = rest.indexOf("--out");
const outPath = outIdx >= 0 ? rest[outIdx + 1] : undefined;
const fromText = rest.includes("--text");
const scaleIdx = rest.indexOf("--lora-scale");
const loraScale = scaleIdx >= 0 ? Number(rest[scaleIdx + 1]) : 1;
const loras = rest.flatMap((a, i) => (a === "--lora" ? [{ filePath: rest[i + 1], scale: loraScale }] : []));

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath });
let tokens;
if (fromText) {
  tokens = [...model.tokenize(tokensJson, true)];
  if (model.tokens.shouldPrependBosToken && model.tokens.bos != null && tokens[0] !== model.tokens.bos) tokens.unshift(model.tokens.bos);
} else {
  tokens = JSON.parse(tokensJson);
}
if (rest.includes("--tokenize-only")) {
  process.stdout.write(JSON.stringify({ tokens }) + "\n");
  await model.dispose();
  await llama.dispose();
  process.exit(0);
}
const wanted =
  positions === "all" ? null : positions === "last" ? new Set([tokens.length - 1]) : new Set(positions.split(",").map(Number));
const context = await model.createContext({
  contextSize: Math.max(64, tokens.length + 8),
  batchSize: Math.max(64, tokens.length + 8),
  sequences: 1,
  threads: 1,
  ...(noFlash ? { flashAttention: false } : {}),
  ...(kvType ? { experimentalKvCacheKeyType: kvType, experimentalKvCacheValueType: kvType } : {}),
  ...(loras.length ? { lora: { adapters: loras } } : {}),
});
const sequence = context.getSequence();
const input = tokens.map((t, i) => (wanted == null || wanted.has(i) ? [t, { generateNext: { logits: true } }] : t));
const out = await sequence.controlledEvaluate(input);
const rows = [];
const chunks = [];
for (let i = 0; i < tokens.length; i++) {
  const logits = out[i]?.next?.logits;
  if (!logits) continue;
  if (outPath) {
    const row = new Float32Array(logits.size);
    for (const [tok, v] of logits) row[tok] = v;
    chunks.push(Buffer.from(row.buffer));
    rows.push({ position: i });
  } else {
    const row = new Array(logits.size);
    for (const [tok, v] of logits) row[tok] = v;
    rows.push({ position: i, logits: row });
  }
}
let n_vocab = rows[0]?.logits?.length ?? 0;
if (outPath) {
  writeFileSync(outPath, Buffer.concat(chunks));
  n_vocab = chunks.length ? chunks[0].length / 4 : 0;
}
process.stdout.write(
  JSON.stringify({
    exact,
    flashAttention: noFlash ? false : "auto",
    kv: kvType ?? "default",
    lora: loras,
    n_vocab,
    ...(fromText ? { tokens } : {}),
    ...(outPath ? { out: outPath } : {}),
    rows,
  }) + "\n",
);
await context.dispose();
await model.dispose();
await llama.dispose();

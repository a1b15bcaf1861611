/**
 * A LoRA adapter for a pretrained GGUF from the project's own execution-aware traces (lab/starter's
 * `makeLoraAdapter`): the shortest records of the chosen sources, tokenised by the base model's own
 * tokenizer and chat template, SFT of the adapter on the frozen base, a llama.cpp LoRA GGUF.
 *
 *   npx tsx lab/scripts/make-lora-adapter.ts --model models/gemma-3-270m-q4_k_m.gguf --traces DIR/train_sft.jsonl
 *       [--out models/gemma-3-270m-reex-lora.gguf] [--work .reex/gemma-lora] [--records 2000] [--sources wikisql_,spider_]
 *       [--families execution-aware] [--max-tokens 768] [--rank 16] [--alpha 32] [--targets all] [--minutes 30] [--steps 0]
 *       [--lr 2e-4] [--batch-tokens 4096] [--threads 2] [--device cpu|cuda|auto] [--seed 1] [--resume]
 *
 * DIR/train_sft.jsonl comes from `npx tsx lab/scripts/realdata.ts --out DIR` (its train split only).
 * --resume continues from the work folder's newest adapter (final or checkpoint) with a fresh
 * optimizer and schedule, so a long run can be split across sessions. Serve the result with
 * `--policy.model <base> --policy.lora <adapter> --policy.profile reex` (the traces' prompt layout).
 */
import { parseArgs } from "node:util";
import { makeLoraAdapter } from "../starter/index.js";

const { values: v } = parseArgs({
  options: {
    model: { type: "string" },
    traces: { type: "string" },
    out: { type: "string", default: "models/gemma-3-270m-reex-lora.gguf" },
    work: { type: "string", default: ".reex/gemma-lora" },
    records: { type: "string", default: "2000" },
    sources: { type: "string", default: "wikisql_" },
    families: { type: "string", default: "execution-aware" },
    "max-tokens": { type: "string", default: "768" },
    rank: { type: "string", default: "16" },
    alpha: { type: "string" },
    targets: { type: "string", default: "all" },
    minutes: { type: "string", default: "30" },
    steps: { type: "string", default: "0" },
    lr: { type: "string", default: "2e-4" },
    "batch-tokens": { type: "string", default: "4096" },
    threads: { type: "string", default: "2" },
    device: { type: "string", default: "cpu" },
    seed: { type: "string", default: "1" },
    resume: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (v.help || !v.model || !v.traces) {
  console.log("usage: npx tsx lab/scripts/make-lora-adapter.ts --model BASE.gguf --traces train_sft.jsonl [options] (see the file's header)");
  process.exit(v.help ? 0 : 2);
}

const started = Date.now();
const report = await makeLoraAdapter({
  model: v.model,
  traces: v.traces,
  out: v.out!,
  work: v.work!,
  records: Number(v.records),
  sources: v.sources!.split(","),
  families: v.families!.split(","),
  maxTokens: Number(v["max-tokens"]),
  rank: Number(v.rank),
  ...(v.alpha ? { alpha: Number(v.alpha) } : {}),
  targets: v.targets!,
  minutes: Number(v.minutes),
  steps: Number(v.steps),
  lr: Number(v.lr),
  batchTokens: Number(v["batch-tokens"]),
  threads: Number(v.threads),
  device: v.device!,
  seed: Number(v.seed),
  resume: v.resume!,
  onLog: (line) => console.log(`[${Math.round((Date.now() - started) / 1000)} s] ${line}`),
});
console.log(
  `done: ${report.sft.steps} steps, loss ${report.sft.first_loss?.toFixed(3)} → ${report.sft.last_loss?.toFixed(3)}, eval loss ${report.sft.eval_loss?.toFixed(3) ?? "–"}; ${report.adapter.path}`,
);

/**
 * Regenerates the project's own starter policy from scratch, deterministic for a seed:
 *
 *   npx tsx scripts/make-starter-model.ts [--seed 1] [--minutes 45] [--steps 0] [--out models/reex-starter.gguf]
 *       [--work .reex/starter] [--dbs 200] [--vocab 3072] [--layers 4] [--width 256] [--heads 4] [--ff 704]
 *       [--lr 1.5e-3] [--batch-tokens 4096] [--pack-tokens 1536] [--family-weights execution-aware=1,standard=0.15,direct=0.15]
 *       [--check 20] [--card models/MODEL_CARD.md]
 *   npx tsx scripts/make-starter-model.ts --card-from .reex/starter/report.json   (rewrite the card only)
 *
 * synthetic data → tokenizer → initial GGUF → pre-tokenized SFT records → SFT (PyTorch, one process,
 * time and/or step budget) → GGUF (f16) → quick greedy check on dev items → model card.
 * Progress on stdout; the learner's loss log is <work>/sft_loss.jsonl.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { makeStarterModel, type StarterReport } from "../src/starter/index.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    minutes: { type: "string", default: "45" },
    steps: { type: "string", default: "0" },
    out: { type: "string", default: "models/reex-starter.gguf" },
    work: { type: "string", default: ".reex/starter" },
    dbs: { type: "string", default: "200" },
    vocab: { type: "string", default: "3072" },
    layers: { type: "string", default: "4" },
    width: { type: "string", default: "256" },
    heads: { type: "string", default: "4" },
    ff: { type: "string", default: "704" },
    lr: { type: "string", default: "1.5e-3" },
    warmup: { type: "string", default: "30" },
    "batch-tokens": { type: "string", default: "4096" },
    "pack-tokens": { type: "string", default: "1536" },
    "family-weights": { type: "string", default: "execution-aware=1,standard=0.15,direct=0.15" },
    "eval-every": { type: "string", default: "150" },
    "save-every": { type: "string", default: "150" },
    check: { type: "string", default: "20" },
    card: { type: "string", default: "models/MODEL_CARD.md" },
    threads: { type: "string", default: "2" },
    "card-from": { type: "string" },
  },
});

const num = (name: keyof typeof values): number => {
  const v = Number(values[name]);
  if (!Number.isFinite(v)) throw new Error(`--${name} must be a number, got ${values[name]}`);
  return v;
};
const familyWeights = Object.fromEntries(
  String(values["family-weights"])
    .split(",")
    .filter(Boolean)
    .map((kv) => {
      const [k, v] = kv.split("=");
      return [k!, Number(v)];
    }),
);
const command = `npx tsx scripts/make-starter-model.ts ${process.argv.slice(2).join(" ")}`.trim();
const stamp = (): string => new Date().toISOString().slice(11, 19);

if (values["card-from"]) {
  // rewrite the model card from a finished run's report.json (no training)
  const saved = JSON.parse(readFileSync(String(values["card-from"]), "utf8")) as StarterReport & { command?: string };
  writeFileSync(String(values.card), modelCard(saved, saved.command ?? "npx tsx scripts/make-starter-model.ts --seed 1"));
  console.log(`wrote ${values.card} from ${values["card-from"]}`);
  process.exit(0);
}

const report = await makeStarterModel({
  seed: num("seed"),
  workDir: String(values.work),
  out: String(values.out),
  dbs: num("dbs"),
  vocabSize: num("vocab"),
  shape: { layers: num("layers"), embedding: num("width"), heads: num("heads"), kvHeads: num("heads"), feedForward: num("ff"), contextLength: 1024 },
  sft: {
    minutes: num("minutes"),
    steps: num("steps"),
    lr: num("lr"),
    warmup: num("warmup"),
    batchTokens: num("batch-tokens"),
    packTokens: num("pack-tokens"),
    familyWeights,
    evalEvery: num("eval-every"),
    saveEvery: num("save-every"),
    seed: num("seed"),
    threads: num("threads"),
    logEvery: 10,
  },
  checkItems: num("check"),
  log: (m) => console.log(`${stamp()} ${m}`),
});
writeFileSync(String(values.card), modelCard(report, command));
writeFileSync(`${String(values.work)}/report.json`, JSON.stringify({ command, ...report }, null, 2) + "\n");
console.log(`${stamp()} wrote ${values.out} (${report.outBytes} bytes), ${values.card}, ${values.work}/report.json in ${report.seconds.toFixed(0)} s`);

function modelCard(r: StarterReport, cmd: string): string {
  const s = r.sft;
  const c = r.check;
  const mb = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MB`;
  const evals = s.evals.map((e) => `${e.step}: ${e.eval_loss.toFixed(3)}`).join(", ");
  const lines = [
    `# reex-starter.gguf — model card`,
    ``,
    `The project's own starter policy: a ${(r.parameters / 1e6).toFixed(1)}M-parameter llama-architecture model trained from scratch on`,
    `the synthetic text-to-SQL data of \`src/synth\` (docs/synthetic-data.md), on CPU, by one command. It knows only`,
    `the synthetic domains' style of schema and question; it is a working default that exercises the whole`,
    `execution-aware loop (probes, injected results, final SQL), not a general text-to-SQL model.`,
    ``,
    `## How it was made`,
    ``,
    "```",
    cmd,
    "```",
    ``,
    `Seed ${r.seed}; work folder \`${r.workDir}\` (data, tokenizer, init model, tokens, loss log \`sft_loss.jsonl\`, \`report.json\`).`,
    `Total wall time ${(r.seconds / 60).toFixed(1)} min on a shared 2-core CPU (PyTorch ${"1.13"} with OpenBLAS, 2 threads).`,
    ``,
    `| step | what |`,
    `|---|---|`,
    `| data | \`generateSynth\` seed ${r.seed}: ${r.synth.manifest.dbs} databases, ${r.synth.train} train / ${r.synth.dev} dev items (dev = held-out domains ${r.synth.manifest.devDomains.join(", ")}), ${r.synth.traces} SFT records |`,
    `| tokenizer | byte-level BPE, ${r.vocabSize} tokens (256 bytes + merges + ChatML \`<|endoftext|>\` \`<|im_start|>\` \`<|im_end|>\`), GPT-2 split regex (\`tokenizer.ggml.pre = trillion\`: llama.cpp's GPT-2 regex without the detokeniser's space clean-up, which would turn \` , \` into \`,\` in generated text), trained on the train records in ${r.tokenizerSeconds.toFixed(1)} s |`,
    `| model | llama, ${r.shape.layers} layers, width ${r.shape.embedding}, ${r.shape.heads} heads (KV ${r.shape.kvHeads}), FFN ${r.shape.feedForward}, context ${r.shape.contextLength}, untied output; ${r.parameters} parameters; ChatML template |`,
    `| tokens | prompts rendered by the llama policy's \`renderChat\`, tokenised by llama.cpp; ${r.tokens.records} records (${Object.entries(r.tokens.byFamily).map(([k, v]) => `${k} ${v}`).join(", ")}); prompt ${r.tokens.prompt.mean} tokens mean (p95 ${r.tokens.prompt.p95}), response ${r.tokens.response.mean} (p95 ${r.tokens.response.p95}, max ${r.tokens.response.max}); loss mask 1 on model-written text and \`<|im_end|>\`, 0 on prompt and injected \`<result>\` blocks (${r.tokens.lossTokens} / ${r.tokens.injectedTokens} tokens) |`,
    `| SFT | \`reex_learner.sft_train\`: AdamW (β 0.9/0.95, wd 0.1), lr ${String(r.sftOptions.lr)} warmup ${String(r.sftOptions.warmup)} then cosine to 10% over the budget, ${String(r.sftOptions.batchTokens)} tokens per batch, prefix-shared packing (rows of ≤ ${String(r.sftOptions.packTokens)} tokens), family weights ${JSON.stringify(r.sftOptions.familyWeights)}, 2% of questions held out for the eval loss |`,
    `| export | GGUF, f16 matrices: ${mb(r.outBytes)} |`,
    ``,
    `## Measured`,
    ``,
    `| | |`,
    `|---|---|`,
    `| steps | ${s.steps} (${s.stop_reason} budget), ${s.epochs_done} epochs of the weighted data, ${(s.train_s / 60).toFixed(1)} min |`,
    `| throughput | ${s.tokens_per_s} packed tokens/s (${s.unpacked_tokens_per_s} tokens/s counted unpacked) |`,
    `| train loss (per loss token) | ${s.first_loss?.toFixed(3)} at step 1 → ${s.last_loss} at the end |`,
    `| held-out loss | ${s.eval_loss?.toFixed(4)} (evals: ${evals}) |`,
    `| loads in node-llama-cpp | ${r.loads ? "yes" : "NO"} |`,
  ];
  if (c) {
    lines.push(
      `| quick check | ${c.items} dev items (held-out domains), greedy, execution-aware, max 512 tokens: well-formed ${c.wellFormed}, with probes ${c.withProbes}, final SQL runs ${c.executable}, correct (BIRD EX) ${c.correct}; ${c.meanInteractions.toFixed(2)} probes and ${c.meanGeneratedTokens.toFixed(0)} generated tokens per item; ${c.seconds.toFixed(0)} s |`,
      ``,
      `### Quick-check examples`,
      ``,
    );
    for (const e of c.examples.slice(0, 3)) {
      lines.push(`Question: ${e.question}  `, `Gold: \`${e.gold}\`  `, `Final: \`${e.final ?? "(none)"}\` — ${e.ok ? "correct" : "wrong"}, format ${e.format ? "ok" : "bad"}, ${e.probes} probes`, ``, "```", e.text.slice(0, 1200), "```", ``);
    }
  }
  lines.push(
    ``,
    `## Limits and next steps`,
    ``,
    `- Trained only on synthetic schemas (10 train domains); the dev domains test transfer to unseen schemas.`,
    `- SFT only (cold start). GRPO with executor-in-the-loop rollouts (\`reex train\`, SPEC §6) starts from this file;`,
    `  the full evaluation table (greedy / linear / tree, EX by difficulty) is not produced by this command.`,
    `- The file is regenerated, not versioned by hand: rerun the command above (same seed → same data, tokenizer and`,
    `  initial weights; the SFT result depends on how many steps fit the time budget unless \`--steps\` is given).`,
    ``,
  );
  return lines.join("\n");
}

/**
 * The project's own starter policy, from scratch and deterministic for a seed: synthetic data
 * (`src/synth`) → byte-level BPE tokenizer → initial llama GGUF → pre-tokenized SFT records (prompt
 * rendered through the chat template exactly as the server does; loss mask 0 on prompt and injected
 * `<result>` blocks) → SFT in one PyTorch process (`reex_learner.sft_train`) → GGUF → a quick greedy
 * check on held-out dev items through the real rollout. `scripts/make-starter-model.ts` is the command.
 */
import { readFileSync, statSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { formatCheck, preparePrompt, runRollout } from "../agent/index.js";
import { compareResults } from "../eval/index.js";
import { createLlamaPolicy, writeFileAtomic } from "../policy/index.js";
import { ExecutorPool } from "../sql/index.js";
import { generateSynth, synthDbPath, type SftRecord, type SynthResult } from "../synth/index.js";
import { buildStarterModel, parameterCount, resolveShape, type StarterShape } from "./model.js";
import { pretokenize, type TokenStats } from "./pretokenize.js";
import { runSft, type SftEvent, type SftOptions, type SftSummary } from "./train.js";
import { trainTokenizer, type StarterVocabulary } from "./tokenizer.js";

export { buildStarterModel, parameterCount, resolveShape, type ResolvedShape, type StarterShape } from "./model.js";
export { encodeResponse, openTokenizer, pretokenize, readJsonl, splitResponse, tokenizeRecord, type PretokenizeOptions, type ResponsePiece, type StarterTokenizer, type TokenizedRecord, type TokenStats } from "./pretokenize.js";
export { runSft, sftArgs, type SftEvent, type SftOptions, type SftSummary } from "./train.js";
export { countWords, GPT2_PRETOKENIZE, learnMergesFast, STARTER_SPECIALS, trainTokenizer, vocabularyFromMerges, type StarterSpecial, type StarterVocabulary, type TokenizerOptions } from "./tokenizer.js";

/** Texts the tokenizer is trained on: every message and response of the SFT records. */
export function corpusTexts(sftPath: string): string[] {
  const texts: string[] = [];
  for (const line of readFileSync(sftPath, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const rec = JSON.parse(line) as SftRecord;
    for (const m of rec.messages) texts.push(m.content);
    texts.push(rec.response);
  }
  return texts;
}

/** Result of the quick held-out check. */
export interface QuickCheck {
  items: number;
  /** Responses that pass `formatCheck` for the family. */
  wellFormed: number;
  /** Responses with at least one probe (execution-aware). */
  withProbes: number;
  /** Final SQL that runs. */
  executable: number;
  /** Final SQL whose result equals gold (BIRD EX). */
  correct: number;
  meanInteractions: number;
  meanGeneratedTokens: number;
  seconds: number;
  examples: { question: string; gold: string; final: string | null; ok: boolean; format: boolean; probes: number; text: string }[];
}

/** Greedy execution-aware rollouts of `model` on the first `n` items of `items` (spread across databases). */
export async function quickCheck(model: string, synth: { outDir: string; items: { db_id: string; question: string; evidence: string; SQL: string }[] }, n: number, options: { maxTokens?: number; log?: (m: string) => void } = {}): Promise<QuickCheck> {
  const t0 = Date.now();
  const picked: typeof synth.items = [];
  const byDb = new Map<string, typeof synth.items>();
  for (const it of synth.items) byDb.set(it.db_id, [...(byDb.get(it.db_id) ?? []), it]);
  const dbs = [...byDb.values()];
  for (let round = 0; picked.length < n && round < 100; round++) {
    for (const list of dbs) if (picked.length < n && list[round]) picked.push(list[round]!);
  }
  const policy = await createLlamaPolicy({ model, gpu: "cpu", contextSize: 2048, sequences: 2, threads: 2 });
  const executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  const out: QuickCheck = { items: 0, wellFormed: 0, withProbes: 0, executable: 0, correct: 0, meanInteractions: 0, meanGeneratedTokens: 0, seconds: 0, examples: [] };
  let interactions = 0;
  let generated = 0;
  try {
    for (const item of picked) {
      const dbPath = synthDbPath(synth.outDir, item.db_id);
      const prompt = preparePrompt(dbPath, { family: "execution-aware", question: item.question, evidence: item.evidence });
      const r = await runRollout(policy, prompt, { executor, dbPath, family: "execution-aware", temperature: 0, maxTokens: options.maxTokens ?? 512 });
      const format = formatCheck(r.text, "execution-aware").ok;
      let ok = false;
      let runs = false;
      if (r.finalSql) {
        const [gold, pred] = await Promise.all([executor.execute(dbPath, item.SQL), executor.execute(dbPath, r.finalSql)]);
        runs = pred.ok;
        ok = compareResults(gold, pred, item.SQL).bird;
      }
      out.items++;
      if (format) out.wellFormed++;
      if (r.probes.length > 0) out.withProbes++;
      if (runs) out.executable++;
      if (ok) out.correct++;
      interactions += r.interactions;
      generated += r.usage.generatedTokens;
      out.examples.push({ question: item.question, gold: item.SQL, final: r.finalSql, ok, format, probes: r.probes.length, text: r.text });
      options.log?.(`  check ${out.items}/${picked.length}: format=${format} probes=${r.probes.length} runs=${runs} correct=${ok}`);
    }
  } finally {
    await Promise.allSettled([policy.close(), executor.close()]);
  }
  out.meanInteractions = out.items ? interactions / out.items : 0;
  out.meanGeneratedTokens = out.items ? generated / out.items : 0;
  out.seconds = (Date.now() - t0) / 1000;
  return out;
}

/** Options of the whole pipeline. */
export interface StarterOptions {
  seed?: number;
  /** Work folder (data, tokenizer, init model, tokens, logs). Default ".reex/starter". */
  workDir?: string;
  /** Final GGUF. Default "models/reex-starter.gguf". */
  out?: string;
  /** Synthetic databases. Default 200. */
  dbs?: number;
  vocabSize?: number;
  shape?: StarterShape;
  /** SFT options beyond the paths (steps/minutes, lr, packing, family weights …). */
  sft?: Omit<SftOptions, "model" | "data" | "out" | "onEvent" | "onStderr">;
  /** Dev items for the quick check (0 = skip). Default 20. */
  checkItems?: number;
  log?: (message: string) => void;
  onEvent?: (event: SftEvent) => void;
}

/** What the pipeline did, for the model card. */
export interface StarterReport {
  seed: number;
  workDir: string;
  out: string;
  outBytes: number;
  synth: Pick<SynthResult, "manifest" | "traces" | "traceTokens"> & { train: number; dev: number };
  vocabSize: number;
  tokenizerSeconds: number;
  shape: ReturnType<typeof resolveShape>;
  parameters: number;
  tokens: TokenStats;
  sft: SftSummary;
  sftOptions: Record<string, unknown>;
  check: QuickCheck | null;
  loads: boolean;
  seconds: number;
}

/** Runs the whole pipeline. */
export async function makeStarterModel(options: StarterOptions = {}): Promise<StarterReport> {
  const t0 = Date.now();
  const log = options.log ?? (() => undefined);
  const seed = options.seed ?? 1;
  const work = options.workDir ?? ".reex/starter";
  const out = options.out ?? "models/reex-starter.gguf";
  await mkdir(work, { recursive: true });

  log(`[1/6] synthetic data → ${join(work, "synth")} (seed ${seed})`);
  const synthDir = join(work, "synth");
  const synth = generateSynth(synthDir, { seed, dbs: options.dbs ?? 200 });
  log(`      ${synth.train.length} train / ${synth.dev.length} dev items, ${synth.traces} SFT records`);

  log(`[2/6] tokenizer (byte-level BPE, vocabulary ${options.vocabSize ?? 3072})`);
  const sftPath = join(synthDir, "train_sft.jsonl");
  const tt = Date.now();
  const vocab: StarterVocabulary = trainTokenizer(corpusTexts(sftPath), { vocabSize: options.vocabSize ?? 3072 });
  const tokenizerSeconds = (Date.now() - tt) / 1000;
  await writeFileAtomic(join(work, "tokenizer.json"), Buffer.from(JSON.stringify({ merges: vocab.merges, special: vocab.special, size: vocab.tokens.length })));

  const shape = resolveShape(options.shape);
  const init = join(work, "init.gguf");
  log(`[3/6] initial model ${init}: ${shape.layers} layers × ${shape.embedding}, ${shape.heads} heads, ff ${shape.feedForward}, ${parameterCount(shape, vocab.tokens.length)} parameters`);
  await writeFileAtomic(init, buildStarterModel(vocab, shape, { seed }));

  log(`[4/6] pre-tokenize SFT records through the chat template`);
  const tokPath = join(work, "sft_tokens.jsonl");
  const tokens = await pretokenize(init, sftPath, tokPath, { maxTokens: shape.contextLength, onProgress: (n) => log(`      ${n} records`) });
  log(`      ${tokens.records} records; prompt mean ${tokens.prompt.mean} (p95 ${tokens.prompt.p95}), response mean ${tokens.response.mean} (p95 ${tokens.response.p95}), ${tokens.lossTokens} loss tokens, ${tokens.droppedTooLong} dropped`);

  log(`[5/6] SFT → ${out}`);
  const sftOptions = { log: join(work, "sft_loss.jsonl"), checkpointDir: join(work, "checkpoints"), outType: "f16" as const, ...options.sft };
  const sft = await runSft({
    model: init,
    data: tokPath,
    out,
    ...sftOptions,
    onEvent: (ev) => {
      options.onEvent?.(ev);
      if (ev.event === "start") log(`      ${JSON.stringify(ev)}`);
      if (ev.event === "step") log(`      step ${ev.step} loss ${ev.loss} lr ${Number(ev.lr).toExponential(2)} ${ev.tokens_per_s} tok/s (${ev.unpacked_tokens_per_s} unpacked) epochs ${ev.epochs_done} ${ev.elapsed_s}s`);
      if (ev.event === "eval") log(`      eval loss ${ev.eval_loss} at step ${ev.step}`);
    },
    onStderr: (line) => log(`      [learner] ${line}`),
  });
  const outBytes = statSync(out).size;
  log(`      done: ${sft.steps} steps, loss ${sft.first_loss?.toFixed(3)} → ${sft.last_loss}, eval ${sft.eval_loss?.toFixed(4)}, ${outBytes} bytes`);

  let check: QuickCheck | null = null;
  let loads = false;
  const n = options.checkItems ?? 20;
  log(`[6/6] quick check: ${n} dev items, greedy, execution-aware`);
  try {
    check = await quickCheck(out, { outDir: synthDir, items: synth.dev }, n, { log });
    loads = true;
    log(`      well-formed ${check.wellFormed}/${check.items}, with probes ${check.withProbes}, executable ${check.executable}, correct ${check.correct}`);
  } catch (err) {
    log(`      check failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  const { onEvent: _e, ...sftRecord } = sftOptions as Record<string, unknown>;
  return {
    seed,
    workDir: work,
    out,
    outBytes,
    synth: { manifest: synth.manifest, traces: synth.traces, traceTokens: synth.traceTokens, train: synth.train.length, dev: synth.dev.length },
    vocabSize: vocab.tokens.length,
    tokenizerSeconds,
    shape,
    parameters: parameterCount(shape, vocab.tokens.length),
    tokens,
    sft,
    sftOptions: sftRecord,
    check,
    loads,
    seconds: (Date.now() - t0) / 1000,
  };
}

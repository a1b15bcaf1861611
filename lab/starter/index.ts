/**
 * The project's own starter policy, from scratch and deterministic for a seed: synthetic data
 * (`lab/synth`) → byte-level BPE tokenizer → initial llama GGUF → pre-tokenized SFT records (prompt
 * rendered through the chat template exactly as the server does; loss mask 0 on prompt and injected
 * `<result>` blocks) → SFT in one PyTorch process (`reex_learner step` with a run request) → GGUF → a quick greedy
 * check on held-out dev items through the real rollout. `lab/scripts/make-starter-model.ts` is the command.
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream, existsSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdir, rename } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { buildPrompt, formatCheck, runRollout, OWN_ANSWERS, resolveRolloutOptions } from "../../src/agent/index.js";
import { compareResults } from "../../src/eval/index.js";
import { createLlamaPolicy } from "../../src/policy/index.js";
import { writeFileAtomic } from "../../src/policy/tooling.js";
import { generateRealData, REAL_FILES, type RealDataManifest, type RealSource, type WikiTableNames } from "../realdata/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { birdRecord, generateSynth, ServerPromptParts, synthDbPath, type SynthResult } from "../synth/index.js";
import { buildStarterModel, parameterCount, resolveShape, type StarterShape } from "./model.js";
import { pretokenize, type TokenStats } from "./pretokenize.js";
import { runStarterGrpo, type StarterGrpoPick, type StarterGrpoSummary } from "./grpo.js";
import { exportGguf, ggufInfo, runSft, type SftEvent, type SftOptions, type SftSummary } from "./train.js";
import { trainTokenizer, type StarterVocabulary } from "./tokenizer.js";
import { corpusTexts, EVAL_FILES, heldOutSample, REAL_EVAL_FILES, REAL_EVAL_ITEMS, REPORT_FILE, spread } from "./work-files.js";
export { makeLoraAdapter } from "./adapter.js";
export { heldOutSample, spread } from "./work-files.js";
export { pickStep, type StarterGrpoPick } from "./grpo.js";

/** Result of the quick held-out check. */
interface QuickCheck {
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
async function quickCheck(
  model: string,
  synth: { outDir: string; items: { db_id: string; question: string; evidence: string; SQL: string }[] },
  n: number,
  options: { maxTokens?: number; log?: (m: string) => void } = {},
): Promise<QuickCheck> {
  const t0 = Date.now();
  const picked = spread(synth.items, n);
  const policy = await createLlamaPolicy({ model, gpu: "cpu", contextSize: 2048, sequences: 2, threads: 2 });
  const executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  const out: QuickCheck = {
    items: 0,
    wellFormed: 0,
    withProbes: 0,
    executable: 0,
    correct: 0,
    meanInteractions: 0,
    meanGeneratedTokens: 0,
    seconds: 0,
    examples: [],
  };
  let interactions = 0;
  let generated = 0;
  const prompts = new ServerPromptParts(join(synth.outDir, ".check-indexes"));
  try {
    for (const item of picked) {
      const dbPath = synthDbPath(synth.outDir, item.db_id);
      // the server's prompt, as the SFT records have it
      const prompt = buildPrompt({
        family: "execution-aware",
        question: item.question,
        evidence: item.evidence,
        ...prompts.for(dbPath, item.question, item.evidence),
      });
      const r = await runRollout(
        policy,
        prompt,
        resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, family: "execution-aware", temperature: 0, maxTokens: options.maxTokens ?? 512 }),
      );
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
    prompts.close();
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
  /** Type of the final GGUF's matrices: "q8_0" (half the file of f16; faster on a CPU) or "f16" (as trained). Default "q8_0". */
  outType?: "f16" | "q8_0";
  /** Synthetic databases. Default 300. */
  dbs?: number;
  /** Every Nth database of the training domains is held out for evaluation (`generateSynth`'s devEvery). Default 7. */
  devEvery?: number;
  /** Extra train databases imitating the example databases' schemas (`generateSynth`'s lookalikes). Default 0. */
  lookalikes?: number;
  /** Share of the look-alikes named exactly as the example databases (`generateSynth`'s lookalikeExact). Default 0. */
  lookalikeExact?: number;
  /** Share of train identifiers given a random prefix so names must be copied from the schema (`generateSynth`'s renameShare). Default 0. */
  renameShare?: number;
  /** Items in each evaluation file (`eval_seen.json`, `eval_unseen.json`), spread over the databases. Default 120. */
  evalItems?: number;
  /** Items of `val_seen.json` (GRPO's held-out curve): seen-domain dev databases that `eval_seen.json` does not use. Default 160. */
  valItems?: number;
  vocabSize?: number;
  shape?: StarterShape;
  /** SFT options beyond the paths (steps/minutes, lr, packing, family weights …). */
  sft?: Omit<SftOptions, "model" | "data" | "out" | "onEvent" | "onStderr">;
  /** Dev items for the quick check (0 = skip). Default 20. */
  checkItems?: number;
  /** GRPO stage settings; null skips GRPO (the SFT model is shipped). Default: the settings file's. */
  grpo?: { steps?: number; threads?: number; pick?: StarterGrpoPick } | null;
  /** Also run GRPO without the exploration reward, concurrently (the cores split between the two runs). Default false. */
  ablation?: boolean;
  /**
   * Continue SFT from `<work>/sft.gguf` for this long (fresh optimizer, its own warmup and cosine), before GRPO, on this
   * run's synthetic data (re-tokenized, so `dbs` may grow between stages). Default none; lr default 8e-4; batchTokens and
   * device default to the first stage's.
   */
  sftMore?: { minutes: number; steps?: number; lr?: number; batchTokens?: number; device?: string; dbWeights?: Record<string, number> };
  /**
   * Start from this GGUF (an earlier model of this pipeline, e.g. the shipped starter: its tokenizer, shape and chat
   * template are kept) instead of a new tokenizer, initial model and first SFT stage; this run's records are tokenized
   * by it, and `sftMore` stages train it. Recorded as the report's `from`. Default none.
   */
  from?: string;
  /** Reuse `<work>/sft.gguf` and the SFT record of `<work>/report.json` when both exist. Default false. */
  reuseSft?: boolean;
  /**
   * An SFT stage run elsewhere (e.g. lab/scripts/gpu-sft.sh on a GPU machine without Node) on the work
   * folder's `sft_tokens.jsonl`: its GGUF replaces `<work>/sft.gguf` and its log file's start and done lines become
   * a stage of the report, with its command. Needs the work folder's report.json. Default none.
   */
  importSft?: { model: string; log: string };
  /**
   * Real questions beside the synthetic ones (`lab/realdata`: WikiSQL, Advising, Spider's schemas), built into `<work>/real`;
   * their traces and the synthetic ones make `<work>/train_sft.jsonl`, which the tokenizer and every SFT stage read. Default none.
   */
  real?: {
    sources?: readonly RealSource[];
    dataDir?: string;
    wikisqlTables?: number;
    spiderDatabases?: number;
    wikisqlNames?: WikiTableNames;
    wikisqlOthers?: number;
  };
  /**
   * Stop after pre-tokenizing (stages 1–4): `<work>/sft.gguf` is the untrained initial model and report.json has no SFT
   * stage, ready for an `importSft` stage trained elsewhere on `<work>/sft_tokens.jsonl`. Default false.
   */
  prepareOnly?: boolean;
  /** The command line that ran this, appended to the report's `commands`. Default none. */
  command?: string;
  log?: (message: string) => void;
  onEvent?: (event: SftEvent) => void;
}

/** One continued-SFT stage: its budget, the data it was given and what it reached. */
interface SftMoreStage extends SftSummary {
  minutes: number;
  lr: number;
  /** Databases 0 … dbs-1 of the seed made its records. */
  dbs: number;
  /** Look-alike databases of the example schemas among its records (absent when none). */
  lookalikes?: number;
  /** Share of those named exactly as the examples (absent when 0). */
  lookalikeExact?: number;
  /** db_id prefix → weight of the records it was given (absent when all 1). */
  dbWeights?: Record<string, number>;
  /** The records it was given, as pre-tokenized. */
  data: TokenStats;
}

/** A model a run started from (`StarterOptions.from`). */
interface StartModel {
  path: string;
  sha256: string;
  bytes: number;
}

/** What the pipeline did, for the model card; also written to `<work>/report.json`. */
export interface StarterReport {
  /** The commands that made the work folder's model, oldest first (a reused SFT model's commands carried over). */
  commands: string[];
  seed: number;
  workDir: string;
  out: string;
  outBytes: number;
  /** Type of `out`'s matrices (absent in reports written before the export step: f16). */
  outType?: "f16" | "q8_0";
  /** `val`: items of `val_seen.json` (absent in reports written before it existed). */
  synth: Pick<SynthResult, "manifest" | "traces" | "traceTokens"> & { train: number; dev: number; val?: number };
  /** The real-question data mixed in (absent when the run used synthetic data only). */
  real?: { dir: string; manifest: RealDataManifest; trainSft: string };
  vocabSize: number;
  tokenizerSeconds: number;
  shape: ReturnType<typeof resolveShape>;
  parameters: number;
  tokens: TokenStats;
  /** The first SFT stage (null when the run started `from` a model). */
  sft: SftSummary | null;
  sftOptions: Record<string, unknown> | null;
  /** The model the run started from instead of a first SFT stage (absent when it trained one). */
  from?: StartModel;
  /** The databases the first SFT stage's records came from (databases 0 … sftDbs-1 of the seed). */
  sftDbs: number;
  /** The continued-SFT stages (`sftMore`) in order, those of a reused SFT model first; empty when none ran. */
  sftMore: SftMoreStage[];
  /** The SFT model (`<work>/sft.gguf`), the start of GRPO. */
  sftModel: string;
  /** The GRPO run whose model is shipped (null when skipped). */
  grpo: StarterGrpoSummary | null;
  /** The same run without the exploration reward (only with `ablation`). */
  ablation: StarterGrpoSummary | null;
  check: QuickCheck | null;
  loads: boolean;
  seconds: number;
  /** CPU cores of the machine that ran it (absent in reports written before it was recorded). */
  cpus?: number;
}

/** Runs the whole pipeline. */
export async function makeStarterModel(options: StarterOptions = {}): Promise<StarterReport> {
  const t0 = Date.now();
  const log = options.log ?? (() => undefined);
  const seed = options.seed ?? 1;
  const work = options.workDir ?? ".reex/starter";
  const out = options.out ?? "models/reex-starter.gguf";
  const sftModel = join(work, "sft.gguf");
  if (options.importSft && !(existsSync(join(work, REPORT_FILE)) && existsSync(sftModel))) {
    throw new Error(`importing an SFT stage needs ${join(work, REPORT_FILE)} and ${sftModel} (run the pipeline on this work folder first)`);
  }
  await mkdir(work, { recursive: true });

  const { synth, valItems, seenItems, sftPath, real, synthDir } = await starterData(options, work, seed, log);

  let sftPart: SftPart;
  /** sft_tokens.jsonl holds this invocation's records (SFT never changes the vocabulary, so later stages can reuse it). */
  let tokensCurrent = false;
  const reportPath = join(work, REPORT_FILE);
  let commands: string[] = [];
  if ((options.reuseSft || options.importSft) && existsSync(sftModel) && existsSync(reportPath)) {
    const saved = JSON.parse(readFileSync(reportPath, "utf8")) as StarterReport & { command?: string };
    sftPart = pickSftPart(saved);
    commands = saved.commands ?? (saved.command ? [saved.command] : []);
    log(`[2-5/7] reusing the SFT model ${sftModel} and its record in ${reportPath}`);
  } else if (options.from) {
    sftPart = await fromStage(options.from, work, sftPath, sftModel, synth.manifest.dbs, log);
    tokensCurrent = true;
  } else {
    sftPart = await sftStages(options, work, sftPath, sftModel, log);
    tokensCurrent = true;
  }
  if (options.prepareOnly) {
    const report = preparedReport(options, { seed, work, out, synth, valItems: valItems.length, real, sftPart, sftModel, commands, t0 });
    await writeFileAtomic(reportPath, Buffer.from(`${JSON.stringify(report, null, 2)}\n`));
    log(`[5/7] stopped after pre-tokenizing (prepareOnly): train ${join(work, "sft_tokens.jsonl")} from ${sftModel} elsewhere, then import the stage`);
    return report;
  }

  const sftMore = [...sftPart.sftMore];
  if (options.importSft) {
    const stage = importedStage(options.importSft.log, sftPart.tokens, synth.manifest.dbs);
    const tmp = `${sftModel}.import.gguf`;
    await copyFile(options.importSft.model, tmp);
    await rename(tmp, sftModel);
    sftMore.push(stage.stage);
    commands = [...commands, stage.command];
    log(
      `[5+/7] imported SFT stage ${sftMore.length + (sftPart.sft ? 1 : 0)} (${stage.stage.device ?? "cpu"}): ${stage.stage.steps} steps, eval loss ${stage.stage.eval_loss?.toFixed(4)} → ${sftModel}`,
    );
  }
  if (options.sftMore && (options.sftMore.minutes > 0 || (options.sftMore.steps ?? 0) > 0)) {
    sftMore.push(
      await moreSftStage(
        options,
        options.sftMore,
        { work, sftPath, sftModel, synth, sftPart, tokensCurrent, stage: sftMore.length + (sftPart.sft ? 2 : 1) },
        log,
      ),
    );
  }

  const { grpo, ablation } = await grpoStage(options, work, sftModel, out, log);
  const outType = options.outType ?? "q8_0";
  exportGguf(out, out, outType);
  const outBytes = statSync(out).size;
  log(`      ${out}: ${outType} matrices, ${(outBytes / 1e6).toFixed(1)} MB`);

  const { check, loads } = await checkStage(out, synthDir, seenItems, options.checkItems ?? 20, log);
  const report: StarterReport = {
    commands: options.command ? [...commands, options.command] : commands,
    seed,
    workDir: work,
    out,
    outBytes,
    outType,
    synth: {
      manifest: synth.manifest,
      traces: synth.traces,
      traceTokens: synth.traceTokens,
      train: synth.train.length,
      dev: synth.dev.length,
      val: valItems.length,
    },
    ...(real ? { real } : {}),
    ...sftPart,
    sftMore,
    sftModel,
    grpo,
    ablation,
    check,
    loads,
    seconds: (Date.now() - t0) / 1000,
    cpus: availableParallelism(),
  };
  await writeFileAtomic(reportPath, Buffer.from(`${JSON.stringify(report, null, 2)}\n`));
  return report;
}

/** The synthetic data a starter run trains and evaluates on. */
type Synth = ReturnType<typeof generateSynth>;

/** Step 1: synthetic databases, questions and traces, and the held-out eval and GRPO validation files written beside them. */
async function synthStage(
  options: StarterOptions,
  work: string,
  seed: number,
  log: (m: string) => void,
): Promise<{ synth: Synth; synthDir: string; seenItems: Synth["dev"]; valItems: Synth["dev"] }> {
  log(`[1/7] synthetic data → ${join(work, "synth")} (seed ${seed})`);
  const synthDir = join(work, "synth");
  const synth = generateSynth(synthDir, {
    seed,
    dbs: options.dbs ?? 300,
    devEvery: options.devEvery ?? 7,
    lookalikes: options.lookalikes ?? 0,
    lookalikeExact: options.lookalikeExact ?? 0,
    renameShare: options.renameShare ?? 0,
  });
  const heldOutDomain = new Set(synth.databases.filter((d) => d.heldOutDomain).map((d) => d.dbId));
  const evalN = options.evalItems ?? 120;
  const seenItems = spread(
    synth.dev.filter((i) => !heldOutDomain.has(i.db_id)),
    evalN,
  );
  const unseenItems = spread(
    synth.dev.filter((i) => heldOutDomain.has(i.db_id)),
    evalN,
  );
  const evalDbs = new Set(seenItems.map((i) => i.db_id));
  const valItems = spread(
    synth.dev.filter((i) => !heldOutDomain.has(i.db_id) && !evalDbs.has(i.db_id)),
    options.valItems ?? 160,
  );
  const birdFields = (items: typeof synth.dev) => items.map((it, k) => ({ ...birdRecord(it), question_id: k }));
  await writeFileAtomic(join(work, EVAL_FILES.seen), Buffer.from(`${JSON.stringify(birdFields(seenItems), null, 2)}\n`));
  await writeFileAtomic(join(work, EVAL_FILES.unseen), Buffer.from(`${JSON.stringify(birdFields(unseenItems), null, 2)}\n`));
  await writeFileAtomic(join(work, EVAL_FILES.val), Buffer.from(`${JSON.stringify(birdFields(valItems), null, 2)}\n`));
  log(
    `      ${synth.train.length} train / ${synth.dev.length} dev items (${synth.manifest.databases.dev} dev databases, ${synth.manifest.devSchemasSeenInTrain} with a schema seen in train), ${synth.traces} SFT records; eval files: ${seenItems.length} seen-domain, ${unseenItems.length} unseen-domain items; GRPO validation: ${valItems.length} items of ${new Set(valItems.map((i) => i.db_id)).size} other databases`,
  );
  return { synth, synthDir, seenItems, valItems };
}

/** What a continued-SFT stage starts from and trains on, and its number. */
interface MoreSftInput {
  work: string;
  /** The invocation's SFT records (synthetic, or synthetic and real). */
  sftPath: string;
  sftModel: string;
  synth: Synth;
  sftPart: SftPart;
  /** sft_tokens.jsonl holds this invocation's records. */
  tokensCurrent: boolean;
  stage: number;
}

/** Step 5+: one more SFT stage from the SFT model on this invocation's records (tokenized again unless this run tokenized them); the model is replaced in place. */
async function moreSftStage(
  options: StarterOptions,
  more: NonNullable<StarterOptions["sftMore"]>,
  input: MoreSftInput,
  log: (m: string) => void,
): Promise<SftPart["sftMore"][number]> {
  const { work, sftPath, sftModel, synth, sftPart, tokensCurrent, stage } = input;
  const lr = more.lr ?? 8e-4;
  const tmp = `${sftModel}.more.gguf`;
  log(
    `[5+/7] SFT stage ${stage} from ${sftModel}: ${more.minutes} min, lr ${lr} (fresh AdamW, warmup then cosine), on the records of ${synth.manifest.dbs} databases`,
  );
  let tokPath = join(work, "sft_more_tokens.jsonl");
  let tokens = sftPart.tokens;
  if (tokensCurrent) {
    tokPath = join(work, "sft_tokens.jsonl");
    log(`      reusing ${tokPath} (this run's records, tokenized above)`);
  } else {
    const onProgress = (n: number): void => {
      if (n % 10000 === 0) log(`      ${n} records`);
    };
    tokens = await pretokenize(sftModel, sftPath, tokPath, { maxTokens: sftPart.shape.contextLength, onProgress });
    log(`      ${tokens.records} records, ${tokens.lossTokens} loss tokens, ${tokens.droppedTooLong} dropped`);
  }
  const summary = await runSft({
    ...((sftPart.sftOptions ?? options.sft ?? {}) as Omit<SftOptions, "model" | "data" | "out">),
    model: sftModel,
    data: tokPath,
    out: tmp,
    minutes: more.minutes,
    steps: more.steps ?? 0,
    lr,
    ...(more.batchTokens ? { batchTokens: more.batchTokens } : {}),
    ...(more.device ? { device: more.device } : {}),
    ...(more.dbWeights ? { dbWeights: more.dbWeights } : {}),
    log: join(work, `sft_stage${stage}_loss.jsonl`),
    checkpointDir: join(work, `checkpoints-stage${stage}`),
    outType: "f16",
    ...sftProgress(options, log),
  });
  await rename(tmp, sftModel);
  const record = {
    ...summary,
    minutes: more.minutes,
    lr,
    dbs: synth.manifest.dbs,
    ...(synth.manifest.lookalikes ? { lookalikes: synth.manifest.lookalikes } : {}),
    ...(synth.manifest.lookalikes && synth.manifest.lookalikeExact ? { lookalikeExact: synth.manifest.lookalikeExact } : {}),
    ...(more.dbWeights ? { dbWeights: more.dbWeights } : {}),
    data: tokens,
  };
  log(`      done: ${summary.steps} more steps, loss → ${summary.last_loss}, eval ${summary.eval_loss?.toFixed(4)}`);
  return record;
}

/** Step 6: GRPO from the SFT model (and the no-exploration ablation beside it), or the SFT model shipped as is. */
async function grpoStage(
  options: StarterOptions,
  work: string,
  sftModel: string,
  out: string,
  log: (m: string) => void,
): Promise<{ grpo: StarterGrpoSummary | null; ablation: StarterGrpoSummary | null }> {
  let grpo: StarterGrpoSummary | null = null;
  let ablation: StarterGrpoSummary | null = null;
  if (options.grpo === null) {
    log(`[6/7] GRPO skipped`);
    await copyFile(sftModel, out);
  } else {
    const g = options.grpo ?? {};
    const runs = options.ablation ? 2 : 1;
    const threads = g.threads ?? Math.max(1, Math.floor(availableParallelism() / runs));
    log(`[6/7] GRPO from ${sftModel}${options.ablation ? " (and the no-exploration-reward ablation beside it)" : ""}, ${threads} thread(s) each`);
    const common = { workDir: work, model: sftModel, threads, ...(g.steps !== undefined ? { steps: g.steps } : {}), ...(g.pick ? { pick: g.pick } : {}) };
    const [main, abl] = await Promise.all([
      runStarterGrpo({ ...common, exploration: true, log: (l) => log(`      [grpo] ${l}`) }),
      options.ablation
        ? runStarterGrpo({ ...common, exploration: false, evalAtStart: false, log: (l) => log(`      [no-exploration] ${l}`) })
        : Promise.resolve(null),
    ]);
    grpo = main;
    ablation = abl;
    await copyFile(grpo.model, out);
    if (ablation) await copyFile(ablation.model, join(work, "grpo-no-exploration.gguf"));
    log(`      done: ${grpo.steps} steps in ${(grpo.seconds / 60).toFixed(1)} min; step ${grpo.picked.step} (${grpo.picked.rule}) → ${out}`);
  }
  return { grpo, ablation };
}

/** Step 7: a greedy quick check of the shipped model on held-out items of seen domains; `loads` says whether the model ran at all. */
async function checkStage(
  out: string,
  synthDir: string,
  seenItems: Synth["dev"],
  n: number,
  log: (m: string) => void,
): Promise<{ check: QuickCheck | null; loads: boolean }> {
  let check: QuickCheck | null = null;
  let loads = false;
  log(`[7/7] quick check: ${n} held-out items of seen domains, greedy, execution-aware`);
  try {
    check = await quickCheck(out, { outDir: synthDir, items: seenItems }, n, { log });
    loads = true;
    log(`      well-formed ${check.wellFormed}/${check.items}, with probes ${check.withProbes}, executable ${check.executable}, correct ${check.correct}`);
  } catch (err) {
    log(`      check failed: ${err instanceof Error ? err.message : String(err)}`);
  }
  return { check, loads };
}

/** Stage 1 alone: the synthetic (and, with `real`, the real-question) data and the evaluation files, in the work folder. */
export async function makeStarterData(options: StarterOptions = {}): Promise<{ sftPath: string; synth: SynthResult; real: StarterReport["real"] }> {
  const work = options.workDir ?? ".reex/starter";
  await mkdir(work, { recursive: true });
  const { synth, sftPath, real } = await starterData(options, work, options.seed ?? 1, options.log ?? (() => undefined));
  return { synth, sftPath, real };
}

/** Stage 1: data, evaluation files and the SFT records' path (the synthetic ones, or synthetic and real mixed). */
async function starterData(options: StarterOptions, work: string, seed: number, log: (m: string) => void) {
  const { synth, synthDir, seenItems, valItems } = await synthStage(options, work, seed, log);
  let sftPath = join(synthDir, "train_sft.jsonl");
  let real: StarterReport["real"];
  if (options.real) {
    const realDir = join(work, "real");
    log(`[1+/7] real questions → ${realDir} (${(options.real.sources ?? ["wikisql", "advising", "spider"]).join(", ")})`);
    const built = generateRealData(realDir, {
      seed,
      traces: true,
      ...(options.real.sources ? { sources: options.real.sources } : {}),
      ...(options.real.dataDir ? { dataDir: options.real.dataDir } : {}),
      ...(options.real.wikisqlTables ? { wikisqlTables: options.real.wikisqlTables } : {}),
      ...(options.real.spiderDatabases ? { spiderDatabases: options.real.spiderDatabases } : {}),
      ...(options.real.wikisqlNames ? { wikisqlNames: options.real.wikisqlNames } : {}),
      ...(options.real.wikisqlOthers !== undefined ? { wikisqlOthers: options.real.wikisqlOthers } : {}),
      onProgress: (line) => log(`      ${line}`),
    });
    sftPath = join(work, "train_sft.jsonl");
    await concatFiles([join(synthDir, "train_sft.jsonl"), join(realDir, REAL_FILES.traces)], sftPath);
    real = { dir: realDir, manifest: built.manifest, trainSft: sftPath };
    for (const source of ["wikisql", "advising"] as const) {
      const testFile = join(realDir, `${source}_test.json`);
      if (!existsSync(testFile)) continue;
      const items = JSON.parse(readFileSync(testFile, "utf8")) as { db_id: string }[];
      await writeFileAtomic(
        join(work, REAL_EVAL_FILES[source]),
        Buffer.from(`${JSON.stringify(heldOutSample(items, REAL_EVAL_ITEMS[source], `reex-eval:${source}:${seed}`), null, 2)}\n`),
      );
    }
    log(`      ${built.manifest.traces} real SFT records beside ${synth.traces} synthetic ones → ${sftPath}`);
  }

  return { synth, valItems, seenItems, sftPath, real, synthDir };
}

/** The progress callbacks of an SFT run: events to `options.onEvent`, readable lines to `log`. */
function sftProgress(options: StarterOptions, log: (m: string) => void): Pick<SftOptions, "onEvent" | "onStderr"> {
  return {
    onEvent: (ev) => {
      options.onEvent?.(ev);
      if (ev.event === "start") log(`      ${JSON.stringify(ev)}`);
      if (ev.event === "step")
        log(
          `      step ${ev.step} loss ${ev.loss} lr ${Number(ev.lr).toExponential(2)} ${ev.tokens_per_s} tok/s (${ev.unpacked_tokens_per_s} unpacked) epochs ${ev.epochs_done} ${ev.elapsed_s}s`,
        );
      if (ev.event === "eval") log(`      eval loss ${ev.eval_loss} at step ${ev.step}`);
    },
    onStderr: (line) => log(`      [learner] ${line}`),
  };
}

/** An SFT stage from a trainer's `--log` file: the stage record and the command that ran it. */
function importedStage(logPath: string, tokens: TokenStats, dbs: number): { stage: SftMoreStage; command: string } {
  const events = readFileSync(logPath, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as SftEvent);
  const start = events.findLast((e) => e.event === "start");
  const done = events.findLast((e) => e.event === "done") as (SftEvent & SftSummary) | undefined;
  if (!start || !done) throw new Error(`${logPath}: no start and done lines of an SFT run (did it finish?)`);
  if (start.records !== tokens.records) {
    throw new Error(
      `${logPath}: trained on ${String(start.records)} records; this work folder's sft_tokens.jsonl has ${tokens.records} (import a stage trained on it)`,
    );
  }
  const { event: _e, ...summary } = done;
  // a run before #88 logged its command line (argv), one since then its request file
  const argv = Array.isArray(start.argv) ? (start.argv as string[]) : [];
  const command =
    typeof start.request === "string" ? `python3 -m reex_learner step --request ${start.request}` : `python3 -m reex_learner.sft_train ${argv.join(" ")}`;
  return { stage: { ...summary, minutes: Number(start.minutes ?? 0), lr: Number(start.lr ?? 0), dbs, data: tokens }, command: command.trim() };
}

type SftPart = Pick<StarterReport, "vocabSize" | "tokenizerSeconds" | "shape" | "parameters" | "tokens" | "sft" | "sftOptions" | "sftDbs" | "sftMore" | "from">;

function pickSftPart(r: StarterReport): SftPart {
  return {
    vocabSize: r.vocabSize,
    tokenizerSeconds: r.tokenizerSeconds,
    shape: r.shape,
    parameters: r.parameters,
    tokens: r.tokens,
    sft: r.sft,
    sftOptions: r.sftOptions,
    sftDbs: r.sftDbs ?? r.synth.manifest.dbs,
    sftMore: r.sftMore ?? [],
    ...(r.from ? { from: r.from } : {}),
  };
}

/** Stages 2–4 for a run that starts from a model: copy it to `sftModel`, tokenize this run's records with it. */
async function fromStage(from: string, work: string, sftPath: string, sftModel: string, dbs: number, log: (m: string) => void): Promise<SftPart> {
  if (!existsSync(from)) throw new Error(`from: ${from}: no such file`);
  const { hparams: h, embeddingType } = ggufInfo(from);
  if (h.arch !== "llama") throw new Error(`from: ${from}: a ${h.arch} model; the starter pipeline trains llama models`);
  const bytes = readFileSync(from);
  const start: StartModel = { path: from, sha256: createHash("sha256").update(bytes).digest("hex"), bytes: bytes.length };
  await writeFileAtomic(sftModel, bytes);
  const shape = {
    ...resolveShape({ layers: h.n_layer, embedding: h.n_embd, heads: h.n_head, kvHeads: h.n_head_kv, feedForward: h.n_ff, contextLength: h.n_ctx_train }),
    weightType: embeddingType === "f16" ? ("f16" as const) : ("f32" as const),
  };
  log(
    `[2-4/7] starting from ${from} (sha256 ${start.sha256.slice(0, 12)}…, ${h.n_layer} layers × ${h.n_embd}, vocabulary ${h.n_vocab}): pre-tokenize SFT records with its tokenizer`,
  );
  const tokens = await pretokenize(sftModel, sftPath, join(work, "sft_tokens.jsonl"), {
    maxTokens: shape.contextLength,
    onProgress: (n) => {
      if (n % 10000 === 0) log(`      ${n} records`);
    },
  });
  log(`      ${tokens.records} records, ${tokens.lossTokens} loss tokens, ${tokens.droppedTooLong} dropped`);
  return {
    vocabSize: h.n_vocab,
    tokenizerSeconds: 0,
    shape,
    parameters: parameterCount(shape, h.n_vocab),
    tokens,
    sft: null,
    sftOptions: null,
    sftDbs: dbs,
    sftMore: [],
    from: start,
  };
}

/** Stages 2–5: tokenizer, initial model, pre-tokenized records, SFT into `sftModel`. */
async function sftStages(options: StarterOptions, work: string, sftPath: string, sftModel: string, log: (m: string) => void): Promise<SftPart> {
  const seed = options.seed ?? 1;
  log(`[2/7] tokenizer (byte-level BPE, vocabulary ${options.vocabSize ?? 3072}) on ${sftPath}`);
  const tt = Date.now();
  const vocab: StarterVocabulary = trainTokenizer(corpusTexts(sftPath), { vocabSize: options.vocabSize ?? 3072 });
  const tokenizerSeconds = (Date.now() - tt) / 1000;
  await writeFileAtomic(join(work, "tokenizer.json"), Buffer.from(JSON.stringify({ merges: vocab.merges, special: vocab.special, size: vocab.tokens.length })));

  const shape = resolveShape(options.shape);
  const init = join(work, "init.gguf");
  log(
    `[3/7] initial model ${init}: ${shape.layers} layers × ${shape.embedding}, ${shape.heads} heads, ff ${shape.feedForward}, ${parameterCount(shape, vocab.tokens.length)} parameters`,
  );
  await writeFileAtomic(init, buildStarterModel(vocab, shape, { seed }));

  log(`[4/7] pre-tokenize SFT records through the chat template`);
  const tokPath = join(work, "sft_tokens.jsonl");
  const tokens = await pretokenize(init, sftPath, tokPath, { maxTokens: shape.contextLength, onProgress: (n) => log(`      ${n} records`) });
  log(
    `      ${tokens.records} records; prompt mean ${tokens.prompt.mean} (p95 ${tokens.prompt.p95}), response mean ${tokens.response.mean} (p95 ${tokens.response.p95}), ${tokens.lossTokens} loss tokens, ${tokens.droppedTooLong} dropped`,
  );

  const base = {
    vocabSize: vocab.tokens.length,
    tokenizerSeconds,
    shape,
    parameters: parameterCount(shape, vocab.tokens.length),
    tokens,
    sftDbs: options.dbs ?? 300,
    sftMore: [],
  };
  if (options.prepareOnly) {
    await copyFile(init, sftModel);
    return { ...base, sft: null, sftOptions: null };
  }
  log(`[5/7] SFT → ${sftModel}`);
  const sftOptions = { log: join(work, "sft_loss.jsonl"), checkpointDir: join(work, "checkpoints"), outType: "f16" as const, ...options.sft };
  const sft = await runSft({
    model: init,
    data: tokPath,
    out: sftModel,
    ...sftOptions,
    ...sftProgress(options, log),
  });
  log(`      done: ${sft.steps} steps, loss ${sft.first_loss?.toFixed(3)} → ${sft.last_loss}, eval ${sft.eval_loss?.toFixed(4)}`);
  const { onEvent: _e, ...sftRecord } = sftOptions as Record<string, unknown>;
  return { ...base, sft, sftOptions: sftRecord };
}

/** Appends files into one (the mixed SFT records), replacing `out` only once all are written. */
async function concatFiles(inputs: readonly string[], out: string): Promise<void> {
  const tmp = `${out}.tmp`;
  const sink = createWriteStream(tmp);
  for (const input of inputs) {
    for await (const chunk of createReadStream(input)) {
      if (!sink.write(chunk)) await new Promise<void>((r) => sink.once("drain", () => r()));
    }
  }
  await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
  await rename(tmp, out);
}

/** The report of a `prepareOnly` run: data, tokenizer and initial model, no SFT stage yet. */
function preparedReport(
  options: StarterOptions,
  r: {
    seed: number;
    work: string;
    out: string;
    synth: SynthResult;
    valItems: number;
    real: StarterReport["real"];
    sftPart: SftPart;
    sftModel: string;
    commands: string[];
    t0: number;
  },
): StarterReport {
  return {
    commands: options.command ? [...r.commands, options.command] : r.commands,
    seed: r.seed,
    workDir: r.work,
    out: r.out,
    outBytes: 0,
    synth: {
      manifest: r.synth.manifest,
      traces: r.synth.traces,
      traceTokens: r.synth.traceTokens,
      train: r.synth.train.length,
      dev: r.synth.dev.length,
      val: r.valItems,
    },
    ...(r.real ? { real: r.real } : {}),
    ...r.sftPart,
    sftModel: r.sftModel,
    grpo: null,
    ablation: null,
    check: null,
    loads: false,
    seconds: (Date.now() - r.t0) / 1000,
    cpus: availableParallelism(),
  };
}

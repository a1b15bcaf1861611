/**
 * A LoRA adapter for a pretrained GGUF (Gemma 3 270M first) from the starter pipeline's own
 * execution-aware traces: pick the shortest records of the chosen sources → pre-tokenise them with
 * the base model's own tokenizer and chat template (as the server renders prompts) → SFT of a LoRA
 * on the frozen base in one PyTorch process → a llama.cpp LoRA GGUF the server loads beside the
 * base (`policy.lora`). Resumable: a later call with `resume` continues from the work folder's adapter.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { SftRecord } from "../synth/index.js";
import { pretokenize, readJsonl, type TokenStats } from "./pretokenize.js";
import { runSft, type SftEvent, type SftSummary } from "./train.js";

/** Options of {@link makeLoraAdapter}. */
export interface AdapterOptions {
  /** The frozen base GGUF. */
  model: string;
  /** SFT traces (lab/scripts/realdata.ts's train_sft.jsonl: `messages`, `response`, `db_id`, `family`). */
  traces: string;
  /** The adapter file written at the end. */
  out: string;
  /** Work folder (records, tokens, checkpoints, report). Default ".reex/adapter". */
  work?: string;
  /** Records kept: the shortest (prompt + response characters) of the chosen sources and families. Default 2000. */
  records?: number;
  /** db_id prefixes of the records kept. Default ["wikisql_"]. */
  sources?: readonly string[];
  /** Prompt families kept. Default ["execution-aware"]. */
  families?: readonly string[];
  /** Records longer than this many tokens of the base model are dropped. Default 768. */
  maxTokens?: number;
  /** LoRA rank. Default 16. */
  rank?: number;
  /** LoRA alpha. Default 2 × rank. */
  alpha?: number;
  /** llama.cpp matrices adapted. Default "all" (attention and feed-forward). */
  targets?: string;
  /** Wall-clock budget in minutes; 0 = until `steps`. Default 30. */
  minutes?: number;
  /** Optimizer steps; 0 = until `minutes`. Default 0. */
  steps?: number;
  /** Peak learning rate. Default 2e-4. */
  lr?: number;
  /** Tokens per optimizer step. Default 4096. */
  batchTokens?: number;
  /** Continue from `<work>/adapter.gguf` (a fresh optimizer and schedule). Default false. */
  resume?: boolean;
  /** PyTorch CPU threads. Default 2. */
  threads?: number;
  /** "cpu", "cuda[:N]" or "auto". Default "cpu". */
  device?: string;
  /** Seed of the trainer. Default 1. */
  seed?: number;
  /** Progress lines. Default none. */
  onLog?: (line: string) => void;
}

/** What {@link makeLoraAdapter} did, also written to `<work>/report.json`. */
export interface AdapterReport {
  base: { path: string; sha256: string };
  adapter: { path: string; sha256: string; bytes: number };
  selection: { traces: string; sources: readonly string[]; families: readonly string[]; kept: number; matching: number };
  tokens: TokenStats;
  sft: SftSummary;
  /** The adapter this run continued from (a copy in the work folder), or null. */
  resumedFrom: string | null;
  settings: { rank: number; alpha: number; targets: string; lr: number; batchTokens: number; minutes: number; steps: number; maxTokens: number };
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** The newest of the work folder's final adapter and its checkpoints (a run stopped early leaves only checkpoints). */
function latestAdapter(work: string): string | undefined {
  const dir = join(work, "checkpoints");
  const files = [
    join(work, "adapter.gguf"),
    ...readdirSync(dir)
      .filter((f) => f.endsWith(".lora.gguf"))
      .map((f) => join(dir, f)),
  ];
  return files.filter((f) => existsSync(f)).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
}

/** The shortest `keep` records of the traces whose db_id starts with a source and whose family is kept. */
async function selectRecords(
  traces: string,
  sources: readonly string[],
  families: readonly string[],
  keep: number,
): Promise<{ lines: string[]; matching: number }> {
  const found: { size: number; line: string }[] = [];
  for await (const rec of readJsonl<SftRecord & { db_id?: string }>(traces)) {
    if (!families.includes(rec.family) || !sources.some((s) => (rec.db_id ?? "").startsWith(s))) continue;
    const line = JSON.stringify(rec);
    found.push({ size: line.length, line });
  }
  found.sort((a, b) => a.size - b.size);
  return { lines: found.slice(0, keep).map((f) => f.line), matching: found.length };
}

/** Trains a LoRA adapter on the frozen base from the traces and writes it to `out`. */
export async function makeLoraAdapter(o: AdapterOptions): Promise<AdapterReport> {
  const work = o.work ?? ".reex/adapter";
  const log = o.onLog ?? (() => undefined);
  const sources = o.sources ?? ["wikisql_"];
  const families = o.families ?? ["execution-aware"];
  const rank = o.rank ?? 16;
  const settings = {
    rank,
    alpha: o.alpha ?? 2 * rank,
    targets: o.targets ?? "all",
    lr: o.lr ?? 2e-4,
    batchTokens: o.batchTokens ?? 4096,
    minutes: o.minutes ?? 30,
    steps: o.steps ?? 0,
    maxTokens: o.maxTokens ?? 768,
  };
  await mkdir(join(work, "checkpoints"), { recursive: true });
  const recordsPath = join(work, "records.jsonl");
  const { lines, matching } = await selectRecords(o.traces, sources, families, o.records ?? 2000);
  await writeFile(recordsPath, lines.map((l) => `${l}\n`).join(""));
  log(`records: ${lines.length} of ${matching} matching (${sources.join(", ")}; ${families.join(", ")}), shortest first`);
  const tokensPath = join(work, "tokens.jsonl");
  const tokens = await pretokenize(o.model, recordsPath, tokensPath, { maxTokens: settings.maxTokens });
  if (tokens.records === 0)
    throw new Error(`no records left to train on: ${lines.length} selected, ${tokens.droppedTooLong} longer than ${settings.maxTokens} tokens`);
  log(`tokens: ${tokens.records} records, mean ${tokens.total.mean} tokens (${tokens.droppedTooLong} over ${settings.maxTokens} dropped)`);
  const adapterPath = join(work, "adapter.gguf");
  const latest = o.resume ? latestAdapter(work) : undefined;
  const resumedFrom = latest ? join(work, "adapter-in.gguf") : null;
  if (latest && resumedFrom) await copyFile(latest, resumedFrom);
  const sft = await runSft({
    model: o.model,
    data: tokensPath,
    ...(resumedFrom ? { loraIn: resumedFrom } : { loraRank: settings.rank, loraAlpha: settings.alpha, loraTargets: settings.targets }),
    loraOut: adapterPath,
    minutes: settings.minutes,
    steps: settings.steps,
    lr: settings.lr,
    batchTokens: settings.batchTokens,
    checkpointDir: join(work, "checkpoints"),
    saveEvery: 25,
    log: join(work, "sft-log.jsonl"),
    threads: o.threads ?? 2,
    device: o.device ?? "cpu",
    seed: o.seed ?? 1,
    onEvent: (e: SftEvent) => {
      if (e.event === "step" || e.event === "eval") log(JSON.stringify(e));
    },
  });
  await copyFile(adapterPath, o.out);
  const report: AdapterReport = {
    base: { path: o.model, sha256: sha256(o.model) },
    adapter: { path: o.out, sha256: sha256(o.out), bytes: readFileSync(o.out).length },
    selection: { traces: o.traces, sources, families, kept: lines.length, matching },
    tokens,
    sft,
    resumedFrom,
    settings,
  };
  await writeFile(join(work, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
  log(`adapter: ${o.out} (${report.adapter.bytes} bytes, sha256 ${report.adapter.sha256.slice(0, 12)}…)`);
  return report;
}

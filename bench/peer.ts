/**
 * reex's decode path against llama.cpp itself, in one run on the same GGUF, prompt, threads and
 * sampling (temperature 1, top-k off, top-p 1), for 1 and 16 sequences of `--gen` tokens each:
 *
 *   - llama.cpp's `llama-batched-bench` (decode only: random tokens, no sampling; prompt shared);
 *   - node-llama-cpp alone: `sequence.evaluate` on sequences that hold the prompt, sampling as reex
 *     does (the whole vocabulary, no top-k: see WHOLE_VOCABULARY_TOP_K in src/policy/direct-decode.ts);
 *   - reex's policy: `start`, `n × fork`, `generate({stop: [], maxTokens})` on every fork, without
 *     log-probs (as a greedy answer is served) and with them (as the trainer and voting sample);
 *   - reex's full rollout on every fork: stop strings, executed probes, injected feedback, events.
 *
 * Every row's KV cache holds the same `CONTEXT` cells per sequence (llama-batched-bench gets
 * `width × CONTEXT`, one stream per sequence as node-llama-cpp makes them): llama.cpp decodes 16
 * sequences more slowly from larger streams (14.6–15.1 ms a step at 2,184 cells against 17.8–18.3
 * at 3,072, in llama-batched-bench itself), so a smaller context would flatter the reference.
 *
 * Each row is timed from the first generated token's request to the last one's (prompt evaluation
 * excluded); rows take turns `--repeat` times and the median is printed, with its ratio to
 * llama-batched-bench. Besides wall-clock tokens/s, each row prints the CPU time it spent per
 * generated token (all threads of the process; for llama-batched-bench, a run generating 1 token
 * per sequence subtracted from one generating `--gen`), which a machine shared with other busy
 * processes distorts far less than wall time. `reex generate` and the rollouts sample past
 * end-of-turn tokens (`ignoreEos`), as the other rows do, so every sequence generates `--gen`
 * tokens unless a rollout answers first (its final tag is a stop string).
 *
 *   npx tsx bench/peer.ts [--model PATH | --real qwen2|qwen3|llama3|gemma] [--prompt-tokens N] [--gen N]
 *                         [--threads N] [--sequences 1,16] [--repeat R] [--no-llama]
 *                         [--speculative] [--draft-costs measured|assumed] [--draft-shape sized|fixed] [--history N]
 *                         [--temperature T] [--gpu cpu|cuda]
 *                         [--flash-attention on|off]
 *
 * `--speculative` adds `reex generate` and `reex rollout` rows on a second policy with n-gram
 * drafting (`speculative: "ngram"`), the drafting counts, and, last, the line
 * `drafting 1seq X× plain Y× llama-batched-bench`: reex generate with drafting against reex generate
 * without it and against llama-batched-bench, at 1 sequence. Before measuring, the drafting policy
 * answers `--history` (default 14) other questions of the prompt's database greedily on the same
 * schema section, as a server would have before, and drafts from their text (its draft history);
 * the measured rows are never remembered, so a repeat cannot draft from an earlier repeat.
 * `--history 0` turns the history off. `--draft-shape fixed` makes the drafting policy evaluate
 * draftMax + 1 tokens every step at one sequence (createLlamaPolicy's draftShape: one step shape,
 * which keeps llama.cpp's CUDA graph on a GPU). `--temperature` (default 1) sets every
 * reex row's sampling temperature (0: greedy, as a single answer is served); llama-batched-bench
 * does not sample.
 *
 * `--flash-attention` (default off, as every figure before the CPU default changed) sets llama.cpp's
 * flash attention in every row alike (the policy's own default is on for the starter's 64-dimension
 * heads, src/policy/llama.ts).
 *
 * `--gpu cuda` (default cpu) puts every layer on the CUDA device in every row (llama-batched-bench
 * `-ngl 99`); on the lent GPU machine, which has no Node, scripts/device-bench.sh packs and runs it.
 *
 * Without --model it uses the starter model (models/reex-starter.gguf); `--real NAME` builds a
 * random-weight GGUF of a real architecture with that family's real tokenizer
 * (test/helpers/real-models.ts), whose 128k–262k vocabulary shows what sampling costs a real model. llama-batched-bench is built
 * from the llama.cpp source node-llama-cpp ships (see test/helpers/llama-tools.ts), cached outside the clone.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { getLlama, type LlamaContextSequence, type Token } from "node-llama-cpp";
import { buildPrompt, rollout, type RolloutResult, OWN_ANSWERS, resolveRolloutOptions } from "../src/agent/index.js";
import type { ReexEvent } from "../src/events/index.js";
import { buildExamples } from "../src/examples/index.js";
import { createLlamaPolicy, type Policy, type PromptSpec, type StepCost, type Trajectory } from "../src/policy/index.js";
import { WHOLE_VOCABULARY_TOP_K } from "../src/policy/direct-decode.js";
import { packageRoot } from "../src/paths/index.js";
import { ExecutorPool, loadSchema, schemaPrompt } from "../src/sql/index.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    real: { type: "string" },
    "prompt-tokens": { type: "string", default: "2040" },
    gen: { type: "string", default: "128" },
    threads: { type: "string", default: "1" },
    sequences: { type: "string", default: "1,16" },
    repeat: { type: "string", default: "3" },
    "no-llama": { type: "boolean", default: false },
    speculative: { type: "boolean", default: false },
    temperature: { type: "string", default: "1" },
    gpu: { type: "string", default: "cpu" },
    "draft-costs": { type: "string", default: "measured" },
    "draft-shape": { type: "string", default: "sized" },
    history: { type: "string", default: "14" },
    "flash-attention": { type: "string", default: "off" },
  },
});

/** The GGUF every row runs. */
async function modelPath(): Promise<string> {
  if (values.model) return values.model;
  if (!values.real) return join(packageRoot(), "models", "reex-starter.gguf");
  const { buildRealModel, REAL_MODEL_NAMES } = await import("../test/helpers/real-models.js");
  if (!(REAL_MODEL_NAMES as string[]).includes(values.real)) throw new Error(`--real must be one of ${REAL_MODEL_NAMES.join(", ")}`);
  return buildRealModel(values.real as (typeof REAL_MODEL_NAMES)[number]);
}

const MODEL = await modelPath();
const PROMPT_TOKENS = Number(values["prompt-tokens"]);
const GEN = Number(values.gen);
const THREADS = Number(values.threads);
const WIDTHS = values.sequences.split(",").map(Number);
const REPEAT = Number(values.repeat);
const MAX_WIDTH = Math.max(...WIDTHS);
const SPECULATIVE = values.speculative;
const TEMPERATURE = Number(values.temperature);
if (values.gpu !== "cpu" && values.gpu !== "cuda") throw new Error(`--gpu must be cpu or cuda, got ${values.gpu}`);
if (values["draft-costs"] !== "measured" && values["draft-costs"] !== "assumed")
  throw new Error(`--draft-costs must be measured or assumed, got ${values["draft-costs"]}`);
if (values["draft-shape"] !== "sized" && values["draft-shape"] !== "fixed")
  throw new Error(`--draft-shape must be sized or fixed, got ${values["draft-shape"]}`);
/** Whether the drafting policy's steps keep one shape (createLlamaPolicy's draftShape). */
const DRAFT_SHAPE: "sized" | "fixed" = values["draft-shape"];
/** How the drafting policy sizes its drafts (createLlamaPolicy's draftCosts). */
const DRAFT_COSTS: "measured" | "assumed" = values["draft-costs"];
/** Other example questions answered on the drafting policy before measuring, for its draft history (0: history off). */
const HISTORY = Number(values.history);
if (!(Number.isInteger(HISTORY) && HISTORY >= 0)) throw new Error(`--history must be a whole number, got ${values.history}`);
if (values["flash-attention"] !== "on" && values["flash-attention"] !== "off")
  throw new Error(`--flash-attention must be on or off, got ${values["flash-attention"]}`);
/** llama.cpp flash attention in every row (llama-batched-bench `-fa`). */
const FLASH = values["flash-attention"] === "on";
/** Where every row runs: all layers on the CUDA device, or none. */
const GPU: "cpu" | "cuda" = values.gpu;
/** KV cells per sequence in every row: the prompt, the generated tokens and what a rollout injects. */
const CONTEXT = PROMPT_TOKENS + 4 * GEN + 512;

type Row =
  | "llama-batched-bench"
  | "node-llama-cpp"
  | "reex generate"
  | "reex generate+logprobs"
  | "reex rollout"
  | "reex generate+draft"
  | "reex rollout+draft";
const ROWS: Row[] = [
  "llama-batched-bench",
  "node-llama-cpp",
  "reex generate",
  "reex generate+logprobs",
  "reex rollout",
  ...(SPECULATIVE ? (["reex generate+draft", "reex rollout+draft"] as Row[]) : []),
];

interface Sample {
  tokens: number;
  seconds: number;
  /** CPU seconds (user + system, all threads) spent on these tokens. */
  cpu?: number;
}

const samples = new Map<string, Sample[]>();
const add = (row: Row, width: number, sample: Sample): void => {
  const key = `${row}/${width}`;
  samples.set(key, [...(samples.get(key) ?? []), sample]);
};
const seconds = (t0: number): number => (performance.now() - t0) / 1000;
const cpuSeconds = (c0: NodeJS.CpuUsage): number => {
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1e6;
};

/**
 * The example retail question's execution-aware prompt, its schema section padded with more
 * tables of the same form until the rendered prompt has about `target` tokens.
 */
async function peerPrompt(policy: Policy, target: number): Promise<{ spec: PromptSpec; others: PromptSpec[]; dbPath: string; tokens: number }> {
  const sets = await buildExamples();
  const set = sets[0]!;
  const base = schemaPrompt(loadSchema(set.path)).text;
  const build = (extra: string[], q = set.questions[0]!): PromptSpec => {
    const schema = [base, ...extra].join("\n");
    const built = buildPrompt({ family: "execution-aware", schema, question: q.question, evidence: q.evidence });
    return policy.renderChat(built.messages, { sharedPrefix: built.sharedPrefix });
  };
  const count = (spec: PromptSpec): number => policy.tokenize(spec.prefix + spec.suffix).length;
  const extra: string[] = [];
  let spec = build(extra);
  for (let i = 0; count(spec) < target; i++) {
    const table = `archive_${Math.floor(i / 6)}`;
    extra.push(`${table}.column_${i} (INTEGER | comment : measure ${i} of ${table} | values : ${i * 3}, ${i * 7})`);
    spec = build(extra);
  }
  const others = set.questions.slice(1).map((q) => build(extra, q));
  return { spec, others, dbPath: set.path, tokens: count(spec) };
}

/**
 * What a server that had answered the database's other example questions would remember to draft
 * from: greedy rollouts of up to `count` of them on the same schema section (the same prompt
 * prefix), on the drafting policy. The measured trajectories start with `remember: false`, so no
 * repeat drafts from an earlier repeat's text. Returns the tokens remembered.
 */
async function warmHistory(policy: Policy, others: PromptSpec[], count: number, executor: ExecutorPool, dbPath: string): Promise<number> {
  let tokens = 0;
  for (const spec of others.slice(0, count)) {
    const t = await policy.start(spec);
    try {
      const r = await rollout(
        t,
        resolveRolloutOptions({
          ...OWN_ANSWERS,
          executor,
          dbPath,
          maxTokens: 400,
          temperature: 0,
          path: "warm",
          maxInteractions: 4,
          finalRetries: 0,
          logprobs: false,
        }),
      );
      tokens += r.record.tokens.length;
    } finally {
      await t.release();
    }
  }
  return tokens;
}

/** llama-batched-bench's token-generation speed per width, or why it did not run. */
async function batchedBench(): Promise<string | undefined> {
  if (values["no-llama"]) return "skipped (--no-llama)";
  let binary: string | undefined = process.env.LLAMA_BATCHED_BENCH;
  if (!binary) {
    const locator = new URL("../test/helpers/llama-tools.ts", import.meta.url);
    if (!existsSync(fileURLToPath(locator))) return "no locator (test/helpers/llama-tools.ts); set LLAMA_BATCHED_BENCH";
    const tools = (await import(locator.href)) as { ensureLlamaTools?: () => Promise<{ batchedBench?: string }> | { batchedBench?: string } };
    binary = (await tools.ensureLlamaTools?.())?.batchedBench;
  }
  if (!binary || !existsSync(binary)) return `llama-batched-bench not found (${binary ?? "not built"})`;
  /** One run at one width; its generation speed and the CPU seconds of the whole process (bash's `times`). */
  const runOnce = (width: number, gen: number): { tg: number; t_tg: number; cpu: number } | string => {
    const args = [
      "-m",
      MODEL,
      "-c",
      String(width * CONTEXT),
      "-b",
      "512",
      "-ub",
      "512",
      "-t",
      String(THREADS),
      "-tb",
      String(THREADS),
      "-fa",
      FLASH ? "on" : "off",
      "-ngl",
      GPU === "cuda" ? "99" : "0",
      "-pps",
      "-npp",
      String(PROMPT_TOKENS),
      "-ntg",
      String(gen),
      "-npl",
      String(width),
      "--output-format",
      "jsonl",
    ];
    const out = spawnSync("bash", ["-c", '"$@" 2>/dev/null; status=$?; times; exit $status', "bash", binary!, ...args], {
      encoding: "utf8",
      maxBuffer: 1 << 24,
    });
    if (out.status !== 0) return `llama-batched-bench failed (${out.status}): ${(out.stderr || out.stdout).slice(-400)}`;
    const json = out.stdout.split("\n").find((l) => l.startsWith("{"));
    const times = [...out.stdout.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
    if (!json || times.length < 4) return `llama-batched-bench printed no result: ${out.stdout.slice(-400)}`;
    const r = JSON.parse(json) as { tg: number; t_tg: number };
    return { tg: r.tg, t_tg: r.t_tg, cpu: times[2]! + times[3]! };
  };
  for (const width of WIDTHS) {
    const full = runOnce(width, GEN);
    if (typeof full === "string") return full;
    const one = runOnce(width, 1);
    if (typeof one === "string") return one;
    add("llama-batched-bench", width, { tokens: width * full.tg, seconds: full.t_tg, cpu: Math.max(0, full.cpu - one.cpu) * (GEN / Math.max(1, GEN - 1)) });
  }
  return undefined;
}

/** node-llama-cpp alone: each sequence holds all but the prompt's last token, then samples `GEN` tokens. */
async function rawRunner(promptTokens: readonly number[]): Promise<{ run: (width: number) => Promise<void>; close: () => Promise<void> }> {
  const llama = await getLlama({ gpu: GPU === "cuda" ? "cuda" : false, build: "never" });
  const model = await llama.loadModel({ modelPath: MODEL });
  const context = await model.createContext({ contextSize: CONTEXT, sequences: MAX_WIDTH, threads: THREADS, flashAttention: FLASH });
  const head = promptTokens.slice(0, -1) as Token[];
  const last = promptTokens.at(-1)! as Token;
  const seqs: LlamaContextSequence[] = [];
  for (let i = 0; i < MAX_WIDTH; i++) seqs.push(context.getSequence());
  await Promise.all(seqs.map((s) => s.evaluateWithoutGeneratingNewTokens(head)));
  return {
    run: async (width) => {
      const used = seqs.slice(0, width);
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      let tokens = 0;
      await Promise.all(
        used.map(async (s, i) => {
          let n = 0;
          for await (const _ of s.evaluate([last], { temperature: 1, topK: WHOLE_VOCABULARY_TOP_K, topP: 1, seed: i + 1, yieldEogToken: true })) {
            if (++n >= GEN) break;
          }
          tokens += n;
        }),
      );
      add("node-llama-cpp", width, { tokens, seconds: seconds(t0), cpu: cpuSeconds(c0) });
      await Promise.all(used.map((s) => s.eraseContextTokenRanges([{ start: head.length, end: s.nextTokenIndex }])));
    },
    close: async () => {
      await context.dispose();
      await model.dispose();
    },
  };
}

async function forks(root: Trajectory, width: number): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for (let i = 0; i < width; i++) out.push(await root.fork());
  return out;
}

const draftCounts = new Map<string, { drafted: number; accepted: number; saved: number; generated: number }>();

/** Adds a drafting trajectory's counts to its width's totals, printed at the end. */
function countDrafts(t: Trajectory, key: string): void {
  const u = t.usage;
  let drafting = draftCounts.get(key);
  if (!drafting) draftCounts.set(key, (drafting = { drafted: 0, accepted: 0, saved: 0, generated: 0 }));
  drafting.drafted += u.draftedTokens ?? 0;
  drafting.accepted += u.acceptedTokens ?? 0;
  drafting.saved += u.forwardPassesSaved ?? 0;
  drafting.generated += u.generatedTokens;
}

async function reexGenerate(
  root: Trajectory,
  width: number,
  logprobs: boolean,
  row: Row = logprobs ? "reex generate+logprobs" : "reex generate",
): Promise<void> {
  const fs = await forks(root, width);
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const results = await Promise.all(
    fs.map((f, i) => f.generate({ stop: [], maxTokens: GEN, temperature: TEMPERATURE, seed: i + 1, ignoreEos: true, logprobs })),
  );
  add(row, width, { tokens: results.reduce((s, r) => s + r.tokens.length, 0), seconds: seconds(t0), cpu: cpuSeconds(c0) });
  if (row === "reex generate+draft") fs.forEach((f) => countDrafts(f, `${row} at ${width} seq`));
  await Promise.all(fs.map((f) => f.release()));
}

const eventCounts = { events: 0, probes: 0, appended: 0, short: 0 };

async function reexRollout(root: Trajectory, width: number, executor: ExecutorPool, dbPath: string, row: Row = "reex rollout"): Promise<void> {
  const fs = await forks(root, width);
  const sink = (e: ReexEvent): void => {
    eventCounts.events++;
    if (e.type === "probe") eventCounts.probes++;
  };
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const results: RolloutResult[] = await Promise.all(
    fs.map((f, i) =>
      rollout(
        f,
        resolveRolloutOptions({
          ...OWN_ANSWERS,
          executor,
          dbPath,
          maxTokens: GEN,
          temperature: TEMPERATURE,
          seed: i + 1,
          sink,
          path: String(i),
          maxInteractions: 100,
          logprobs: false,
          ignoreEos: true,
        }),
      ),
    ),
  );
  const secs = seconds(t0);
  const cpu = cpuSeconds(c0);
  const generated = results.reduce((s, r) => s + r.usage.generatedTokens, 0);
  eventCounts.appended += results.reduce((s, r) => s + r.record.sampled.filter((x) => x === 0).length, 0);
  eventCounts.short += results.filter((r) => r.usage.generatedTokens < GEN).length;
  add(row, width, { tokens: generated, seconds: secs, cpu });
  if (row === "reex rollout+draft") fs.forEach((f) => countDrafts(f, `${row} at ${width} seq`));
  await Promise.all(fs.map((f) => f.release()));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

async function main(): Promise<void> {
  const policy = await createLlamaPolicy({ model: MODEL, gpu: GPU, threads: THREADS, contextSize: CONTEXT, sequences: MAX_WIDTH + 2, flashAttention: FLASH });
  const { spec, others, dbPath, tokens } = await peerPrompt(policy, PROMPT_TOKENS);
  const root = await policy.start(spec);
  const executor = new ExecutorPool({ workers: 1 });
  const raw = await rawRunner(root.promptTokens);
  // the same model, prompt and settings with n-gram drafting on (--speculative)
  const drafter = SPECULATIVE
    ? await createLlamaPolicy({
        model: MODEL,
        gpu: GPU,
        threads: THREADS,
        contextSize: CONTEXT,
        sequences: MAX_WIDTH + 2,
        speculative: "ngram",
        flashAttention: FLASH,
        draftCosts: DRAFT_COSTS,
        draftShape: DRAFT_SHAPE,
        draftHistory: HISTORY > 0 ? 32768 : 0,
      })
    : undefined;
  const remembered = drafter && HISTORY > 0 ? await warmHistory(drafter, others, HISTORY, executor, dbPath) : 0;
  const draftRoot = drafter ? await drafter.start(spec, { remember: false }) : undefined;
  let skipped: string | undefined;
  let stepCosts: Record<"plain" | "drafting", StepCost[] | undefined> = { plain: undefined, drafting: undefined };
  try {
    for (let r = 0; r < REPEAT; r++) {
      if (r === 0 || !skipped) skipped = await batchedBench();
      for (const width of WIDTHS) {
        await raw.run(width);
        await reexGenerate(root, width, false);
        await reexGenerate(root, width, true);
        await reexRollout(root, width, executor, dbPath);
        if (draftRoot) {
          await reexGenerate(draftRoot, width, false, "reex generate+draft");
          await reexRollout(draftRoot, width, executor, dbPath, "reex rollout+draft");
        }
      }
    }
  } finally {
    stepCosts = { plain: policy.decodeStepCosts?.(), drafting: drafter?.decodeStepCosts?.() };
    await raw.close();
    await draftRoot?.release();
    await drafter?.close();
    await root.release();
    await policy.close();
    await executor.close();
  }

  const [load1] = (await import("node:os")).loadavg();
  console.log(`\npeer benchmark — ${MODEL} (reex policy on ${policy.info.device})`);
  console.log(
    `prompt ${tokens} tokens (--prompt-tokens ${PROMPT_TOKENS}), ${GEN} tokens per sequence, ${CONTEXT} KV cells per sequence, ${THREADS} thread(s), ${GPU === "cuda" ? "all layers on CUDA" : "CPU"}, flash attention ${FLASH ? "on" : "off"}, T ${TEMPERATURE}, median of ${REPEAT}; ` +
      `load average at the end ${load1!.toFixed(2)} on ${(await import("node:os")).cpus().length} cores`,
  );
  console.log("  tokens/s: wall clock (its ratio to llama-batched-bench); CPU ms/token: all threads (llama-batched-bench's CPU over reex's: higher is better)");
  const head = `  ${"".padEnd(24)}${WIDTHS.map((w) => `${w} seq: tokens/s`.padStart(18) + "ratio".padStart(8) + "CPU ms/tok".padStart(12) + "ratio".padStart(8)).join("")}`;
  console.log(head);
  for (const row of ROWS) {
    const cells = WIDTHS.map((w) => {
      const s = samples.get(`${row}/${w}`);
      const base = samples.get(`llama-batched-bench/${w}`);
      if (!s) return "n/a".padStart(18) + "".padStart(28);
      const speed = median(s.map((x) => x.tokens / x.seconds));
      const ref = base ? median(base.map((x) => x.tokens / x.seconds)) : undefined;
      const perSeq = median(s.map((x) => x.tokens)) / w;
      const cpus = s.filter((x) => x.cpu !== undefined && x.tokens > 0).map((x) => (1000 * x.cpu!) / x.tokens);
      const refCpus = (base ?? []).filter((x) => x.cpu !== undefined && x.tokens > 0).map((x) => (1000 * x.cpu!) / x.tokens);
      const cpu = cpus.length ? median(cpus) : undefined;
      const refCpu = refCpus.length ? median(refCpus) : undefined;
      return (
        `${speed.toFixed(0)} (${perSeq.toFixed(0)}/seq)`.padStart(18) +
        (ref ? `${(speed / ref).toFixed(2)}×` : "").padStart(8) +
        (cpu !== undefined ? cpu.toFixed(3) : "n/a").padStart(12) +
        (cpu && refCpu ? `${(refCpu / cpu).toFixed(2)}×` : "").padStart(8)
      );
    });
    console.log(`  ${row.padEnd(24)}${cells.join("")}`);
  }
  if (skipped) console.log(`  llama-batched-bench: ${skipped}`);
  console.log(
    `  rollout: ${eventCounts.probes} probes executed, ${eventCounts.appended} injected tokens, ${eventCounts.events} events; ${eventCounts.short} rollouts ended before ${GEN} tokens (final SQL or end of turn)`,
  );
  console.log("  targets: reex generate ≥ 0.9× llama-batched-bench at 1 and 16 sequences; rollout ≥ 0.85×");
  if (SPECULATIVE) {
    const rate = (row: Row, w: number): number | undefined => {
      const s = samples.get(`${row}/${w}`);
      return s ? median(s.map((x) => x.tokens / x.seconds)) : undefined;
    };
    const pct = (a: number, b: number): string => (b > 0 ? `${((100 * a) / b).toFixed(1)}%` : "n/a");
    for (const [w, d] of draftCounts) {
      console.log(
        `  ${w}: ${d.drafted} tokens drafted, ${d.accepted} accepted (${pct(d.accepted, d.drafted)}), ` +
          `${d.saved} forward passes saved (${pct(d.saved, d.generated)} of ${d.generated} generated tokens)`,
      );
    }
    const w1 = WIDTHS.includes(1) ? 1 : WIDTHS[0]!;
    const fmt = (a: number | undefined, b: number | undefined): string => (a !== undefined && b !== undefined ? `${(a / b).toFixed(2)}×` : "n/a");
    const cpuPerToken = (row: Row, w: number): number | undefined => {
      const xs = (samples.get(`${row}/${w}`) ?? []).filter((x) => x.cpu !== undefined && x.tokens > 0).map((x) => x.cpu! / x.tokens);
      return xs.length ? median(xs) : undefined;
    };
    for (const w of WIDTHS) {
      console.log(
        `  ${w} seq, wall: generate+draft ${fmt(rate("reex generate+draft", w), rate("reex generate", w))} of generate, rollout+draft ${fmt(rate("reex rollout+draft", w), rate("reex rollout", w))} of rollout; ` +
          `CPU a token: generate ${fmt(cpuPerToken("reex generate", w), cpuPerToken("reex generate+draft", w))} less with drafting, rollout ${fmt(cpuPerToken("reex rollout", w), cpuPerToken("reex rollout+draft", w))}`,
      );
    }
    // what the decode steps cost by size, as the drafting policy sized its drafts by (--draft-costs measured)
    for (const [name, table] of Object.entries(stepCosts)) {
      if (!table?.length) continue;
      const one = table.find((t) => t.tokens === 1)?.ms;
      const shown = table.filter((t) => t.tokens <= 12 || t.tokens % 16 === 0);
      console.log(
        `  ${name} policy's decode step, ms by tokens (× a 1-token step; steps): ` +
          shown.map((t) => `${t.tokens}: ${t.ms.toFixed(2)}${one ? ` (${(t.ms / one).toFixed(2)}×)` : ""} n${t.steps}`).join(", "),
      );
    }
    console.log(`  drafts sized by ${DRAFT_COSTS} step costs (--draft-costs)`);
    console.log(
      HISTORY > 0
        ? `  draft history: ${remembered} tokens of greedy rollouts of ${Math.min(HISTORY, others.length)} other questions on the same database (--history), none of the measured rows' text`
        : "  draft history: off (--history 0): drafts from the prompt and each trajectory's own text only",
    );
    // decode speed at 1 sequence (generate: the same tokens every row decodes), against reex without drafting and llama.cpp's plain decode
    const drafted = rate("reex generate+draft", w1);
    console.log(`drafting ${w1}seq ${fmt(drafted, rate("reex generate", w1))} plain ${fmt(drafted, rate("llama-batched-bench", w1))} llama-batched-bench`);
  }
}

await main();

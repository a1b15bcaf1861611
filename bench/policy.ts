/**
 * Policy benchmark: prompt evaluation and generation speed on this machine's device, how much of a
 * second request's prompt is evaluated again when it shares the database prefix (target ≤ 10%),
 * fork cost (idle, and while other trajectories keep the context busy: fork, first token of the
 * child, a start from a cached prefix, a release), and the cost of injecting a `<result>` block; with llama.cpp flash attention "auto"
 * and off, side by side (the policy's default is off on CPU, "auto" on a GPU). Generation samples past end-of-turn tokens
 * (`ignoreEos`), so each figure is over the number of tokens it says (a model that ends its turn at once would else time nothing).
 *
 *   npx tsx bench/policy.ts [--model PATH] [--gpu auto|cuda|cpu] [--threads N] [--schema-tokens N] [--gen N] [--batch N]
 *
 * Without --model it writes and uses the tiny random model (bench/.output/tiny.gguf).
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { createLlamaPolicy, type Policy, type PromptSpec, type Trajectory } from "../src/policy/index.js";
import { buildTinyModel, writeFileAtomic } from "../src/policy/tooling.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    gpu: { type: "string", default: "auto" },
    threads: { type: "string" },
    "schema-tokens": { type: "string", default: "1500" },
    gen: { type: "string", default: "128" },
    batch: { type: "string", default: "8" },
  },
});

const schemaTarget = Number(values["schema-tokens"]);
const genTokens = Number(values.gen);
const batch = Number(values.batch);

async function modelPath(): Promise<string> {
  if (values.model) return values.model;
  const path = fileURLToPath(new URL("./.output/tiny.gguf", import.meta.url));
  await writeFileAtomic(path, buildTinyModel({ seed: 1 }));
  return path;
}

/** A BIRD-style schema block of about `target` tokens for this policy's tokenizer. */
function schema(policy: Policy, salt: string, target: number): string {
  const lines: string[] = [`Database ${salt}. You are an experienced database expert; answer in SQLite.`];
  for (let i = 0; policy.tokenize(lines.join("\n")).length < target; i++) {
    const table = `table_${Math.floor(i / 8)}`;
    lines.push(`${table}.column_${i} (INTEGER | comment : measure ${i} of ${table} | values : ${i * 3}, ${i * 7}, ${i * 11})`);
  }
  return lines.join("\n");
}

function prompt(policy: Policy, db: string, question: string): PromptSpec {
  return policy.renderChat([
    { role: "system", content: db },
    { role: "user", content: `Question: ${question}\nHint: count distinct rows.` },
  ]);
}

const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;
const RESULT = "<result> customer_id | total\n17 | 2300.5\n42 | 1999.0\n8 | 1750.25 </result>\n<think>";

interface Measures {
  device: string;
  promptTokens: number;
  coldTokensPerS: number;
  coldMs: number;
  genTokensPerS: number;
  reevaluated: number;
  warmPromptTokens: number;
  warmMs: number;
  forkMs: number;
  forkEvaluated: number;
  appendTokens: number;
  appendMs: number;
  batchTokensPerS: number;
  /** While `batch` trajectories generate: fork call, fork to the child's first token, a cached-prefix start, a release (ms). */
  loaded: { forkMs: number; forkFirstTokenMs: number; startMs: number; releaseMs: number; busyThroughout: boolean };
}

async function measure(path: string, flashAttention: "auto" | boolean): Promise<Measures> {
  const policy = await createLlamaPolicy({
    model: path,
    gpu: values.gpu as "auto" | "cuda" | "cpu",
    contextSize: Math.max(4096, schemaTarget + genTokens + 512),
    sequences: batch + 4,
    flashAttention,
    ...(values.threads ? { threads: Number(values.threads) } : {}),
  });
  try {
    const db = schema(policy, `bench-${flashAttention}-${Date.now()}`, schemaTarget);
    let t0 = process.hrtime.bigint();
    const cold = await policy.start(prompt(policy, db, "How many orders were shipped in 2023?"));
    const coldMs = ms(t0);
    t0 = process.hrtime.bigint();
    const single = await cold.generate({ stop: [], maxTokens: genTokens, ignoreEos: true });
    const genMs = ms(t0);
    t0 = process.hrtime.bigint();
    const appended = await cold.append(RESULT);
    const appendMs = ms(t0);
    await cold.release();

    t0 = process.hrtime.bigint();
    const warm = await policy.start(prompt(policy, db, "Which customer placed the largest order?"));
    const warmMs = ms(t0);

    t0 = process.hrtime.bigint();
    const forks = [];
    for (let i = 0; i < batch; i++) forks.push(await warm.fork());
    const forkMs = ms(t0) / batch;
    const forkEvaluated = forks.reduce((s, f) => s + f.usage.evaluatedTokens, 0);

    const perTrajectory = Math.max(1, Math.floor(genTokens / 2));
    t0 = process.hrtime.bigint();
    const results = await Promise.all(forks.map((f, i) => f.generate({ stop: [], maxTokens: perTrajectory, temperature: 1, seed: i + 1, ignoreEos: true })));
    const batchMs = ms(t0);
    const total = results.reduce((s, r) => s + r.tokens.length, 0);
    const loaded = await underLoad(policy, db, warm, forks);
    await Promise.all([...forks.map((f) => f.release()), warm.release()]);
    return {
      device: policy.info.device,
      promptTokens: cold.usage.promptTokens,
      coldTokensPerS: (cold.usage.promptTokens - 1) / (coldMs / 1000),
      coldMs,
      genTokensPerS: single.tokens.length / (genMs / 1000),
      reevaluated: warm.usage.evaluatedTokens,
      warmPromptTokens: warm.usage.promptTokens,
      warmMs,
      forkMs,
      forkEvaluated,
      appendTokens: appended.tokens.length,
      appendMs,
      batchTokensPerS: total / (batchMs / 1000),
      loaded,
    };
  } finally {
    await policy.close();
  }
}

/**
 * Fork, start and release latencies while `busy` trajectories generate (each up to 4 × --gen tokens,
 * stopped once measured): what a tree decode's forks see with other branches or requests running.
 */
async function underLoad(policy: Policy, db: string, warm: Trajectory, busy: Trajectory[]): Promise<Measures["loaded"]> {
  const controller = new AbortController();
  let sampled = 0;
  let finished = 0;
  const runs = busy.map((f, i) =>
    f
      .generate({ stop: [], maxTokens: 4 * genTokens, temperature: 1, seed: 100 + i, signal: controller.signal, ignoreEos: true, onText: () => void sampled++ })
      .finally(() => void finished++),
  );
  while (sampled < 2 * busy.length && finished === 0) await new Promise((r) => setTimeout(r, 2));
  let t0 = process.hrtime.bigint();
  const child = await warm.fork();
  const forkMs = ms(t0);
  await child.generate({ stop: [], maxTokens: 1 });
  const forkFirstTokenMs = ms(t0);
  t0 = process.hrtime.bigint();
  const started = await policy.start(prompt(policy, db, "How many customers ordered twice?"));
  const startMs = ms(t0);
  t0 = process.hrtime.bigint();
  await child.release();
  const releaseMs = ms(t0);
  const busyThroughout = finished === 0;
  controller.abort();
  await Promise.all(runs);
  await started.release();
  return { forkMs, forkFirstTokenMs, startMs, releaseMs, busyThroughout };
}

const path = await modelPath();
const variants: ["auto" | boolean, string][] = [
  ["auto", "flash attn auto"],
  [false, "flash attn off"],
];
const results: Measures[] = [];
for (const [fa] of variants) results.push(await measure(path, fa));

const rows: [string, (m: Measures) => string][] = [
  ["device", (m) => m.device],
  ["prompt tokens (first request)", (m) => String(m.promptTokens)],
  ["prompt eval, cold (tokens/s)", (m) => `${m.coldTokensPerS.toFixed(0)} (${m.coldMs.toFixed(0)} ms)`],
  [`generation, 1 trajectory, ${genTokens} tokens (tokens/s)`, (m) => m.genTokensPerS.toFixed(0)],
  [`generation, ${batch} forks × ${Math.max(1, Math.floor(genTokens / 2))} tokens batched (tokens/s)`, (m) => m.batchTokensPerS.toFixed(0)],
  ["2nd request, same db: re-evaluated", (m) => `${m.reevaluated}/${m.warmPromptTokens} = ${((100 * m.reevaluated) / m.warmPromptTokens).toFixed(1)}%`],
  ["start latency cold → warm", (m) => `${m.coldMs.toFixed(0)} → ${m.warmMs.toFixed(0)} ms (${(m.coldMs / m.warmMs).toFixed(1)}×)`],
  ["fork (KV copy), ms each / tokens evaluated", (m) => `${m.forkMs.toFixed(1)} / ${m.forkEvaluated}`],
  ["append <result> block", (m) => `${m.appendTokens} tokens in ${m.appendMs.toFixed(1)} ms`],
  [
    `while ${batch} generate: fork / child's 1st token, ms`,
    (m) => `${m.loaded.forkMs.toFixed(1)} / ${m.loaded.forkFirstTokenMs.toFixed(1)}${m.loaded.busyThroughout ? "" : " (load ended)"}`,
  ],
  [`while ${batch} generate: warm start / release, ms`, (m) => `${m.loaded.startMs.toFixed(1)} / ${m.loaded.releaseMs.toFixed(1)}`],
];
const width = Math.max(...rows.map(([k]) => k.length));
const col = Math.max(...variants.map(([, n]) => n.length), ...results.flatMap((m) => rows.map(([, f]) => f(m).length)));
console.log(
  `\npolicy benchmark — ${values.model ?? "tiny random model"}${values.threads ? `, ${values.threads} thread(s)` : ""} (${new Date().toISOString()})`,
);
console.log(`  ${"".padEnd(width)}  ${variants.map(([, n]) => n.padEnd(col)).join("  ")}`);
for (const [name, f] of rows) console.log(`  ${name.padEnd(width)}  ${results.map((m) => f(m).padEnd(col)).join("  ")}`);
console.log(`  target: second request re-evaluates ≤ 10% of its prompt tokens`);

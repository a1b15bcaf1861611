/**
 * Regenerates the project's own starter policy from scratch, deterministic for a seed:
 *
 *   npx tsx lab/scripts/make-starter-model.ts [--seed 1] [--minutes 40] [--steps 0] [--grpo-steps 50] [--grpo-pick best-heldout|best-or-start|last] [--ablation]
 *       [--out models/reex-starter.gguf] [--out-type q8_0|f16] [--work .reex/starter] [--dbs 300] [--lookalikes 0] [--lookalike-exact 0] [--rename-share 0] [--dev-every 7] [--eval-items 120]
 *       [--vocab 3072] [--layers 4] [--width 256] [--heads 4] [--ff 704] [--lr 1.5e-3] [--batch-tokens 4096]
 *       [--pack-tokens 1536] [--family-weights execution-aware=1,standard=0.4,direct=0.4] [--eval-every 150] [--eval-frac 0.02] [--check 20]
 *       [--reuse-sft] [--sft-more-minutes 0] [--sft-more-steps 0] [--sft-more-lr 8e-4] [--sft-more-batch-tokens N] [--sft-more-db-weights PREFIX=W,…]
 *       [--sft-device cpu|cuda|auto] [--from MODEL.gguf] [--import-sft SFT.gguf --import-sft-log LOSS.jsonl] [--no-grpo]
 *       [--card models/MODEL_CARD.md] [--context 1024] [--real all|wikisql,advising,spider] [--wikisql-names nouns|ids] [--wikisql-others 2] [--prepare-only] [--data-only]
 *   npx tsx lab/scripts/make-starter-model.ts --card-from .reex/starter/report.json [--eval eval-out/starter/report.json] [--notes FILE]
 *       (rewrite the card only, with the EX table of a `reex eval --runs` report)
 *
 * synthetic data → tokenizer → initial GGUF → pre-tokenized SFT records → SFT (PyTorch, one process,
 * time and/or step budget) → GRPO through the trainer (`reex train grpo` settings of
 * lab/starter/starter-grpo.json; with --ablation also without the exploration reward, beside it)
 * → GGUF → quick greedy check on held-out items → model card. Progress on stdout.
 *
 * GRPO evaluates greedy EX on <work>/val_seen.json (dev databases the card's eval files do not use) before step 1 and
 * every 10 steps; --grpo-pick best-heldout (the default) ships the checkpoint with the highest of those, best-or-start the SFT model when no checkpoint beats it, last the last step's.
 * --reuse-sft continues from the work folder's sft.gguf; --sft-more-minutes adds an SFT stage on this
 * invocation's data (re-tokenized, so --dbs may grow: database i depends only on the seed and i).
 * --from starts from an earlier model of this pipeline (e.g. the shipped starter: its tokenizer and shape are kept)
 * instead of a new tokenizer, initial model and first SFT stage; --sft-more-minutes then trains it on this run's data.
 * --lookalikes N adds N train databases imitating the example databases' schemas (lab/synth LOOKALIKE_DOMAINS; the
 * examples' own questions are never generated); --lookalike-exact P names a share P of them exactly as the examples
 * (their table, key and column names, snake_case); --sft-more-db-weights retail_like=3,… repeats their records in SFT stages.
 * --rename-share P gives a share P of train table and column names a random prefix (qk_country), so that names must be
 * copied from the schema rather than recalled; dev databases are never renamed.
 * --import-sft takes an SFT stage trained elsewhere on the work folder's sft_tokens.jsonl (a GPU machine without Node:
 * `lab/scripts/gpu-sft.sh` (an SFT run request on <work>/sft.gguf and <work>/sft_tokens.jsonl, `--device cuda`, its log LOSS.jsonl);
 * --data reads `gzip`ped tokens too: 3,000 databases' 410 MB of JSONL gzip to 14 MB)
 * and goes on from it as --reuse-sft does.
 * --real mixes real questions (lab/realdata: WikiSQL, Advising, Spider's schemas; docs/real-data.md) into the SFT records and the
 * tokenizer's text; --wikisql-names ids names WikiSQL's tables `table_<id>` and --wikisql-others 0 gives each its own database,
 * as real-data version 1 did (the v3 starter's data; version 2: nouns, and 0–2 other tables of the split beside each);
 * --data-only stops after the data and evaluation files; --prepare-only stops after pre-tokenizing, for an SFT stage trained elsewhere and brought back with --import-sft.
 * report.json keeps every stage and every command, oldest first, and the card lists them.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { pairedDifference, type ItemScore } from "../../src/eval/index.js";
import { REAL_SOURCES, type RealSource, type WikiTableNames } from "../realdata/index.js";
import { makeStarterData, makeStarterModel, type StarterGrpoPick, type StarterOptions, type StarterReport } from "../starter/index.js";

const OPTIONS = {
  help: { type: "boolean", short: "h", default: false },
  seed: { type: "string", default: "1" },
  minutes: { type: "string", default: "40" },
  "grpo-steps": { type: "string" },
  "grpo-threads": { type: "string" },
  "grpo-pick": { type: "string", default: "best-heldout" },
  "no-grpo": { type: "boolean", default: false },
  ablation: { type: "boolean", default: false },
  "reuse-sft": { type: "boolean", default: false },
  "sft-more-minutes": { type: "string", default: "0" },
  "sft-more-lr": { type: "string", default: "8e-4" },
  "sft-more-steps": { type: "string", default: "0" },
  "sft-more-batch-tokens": { type: "string" },
  "sft-device": { type: "string", default: "cpu" },
  from: { type: "string" },
  "import-sft": { type: "string" },
  "import-sft-log": { type: "string" },
  eval: { type: "string" },
  notes: { type: "string" },
  steps: { type: "string", default: "0" },
  out: { type: "string", default: "models/reex-starter.gguf" },
  "out-type": { type: "string", default: "q8_0" },
  work: { type: "string", default: ".reex/starter" },
  dbs: { type: "string", default: "300" },
  lookalikes: { type: "string", default: "0" },
  "lookalike-exact": { type: "string", default: "0" },
  "rename-share": { type: "string", default: "0" },
  "sft-more-db-weights": { type: "string", default: "" },
  "dev-every": { type: "string", default: "7" },
  "eval-items": { type: "string", default: "120" },
  vocab: { type: "string", default: "3072" },
  layers: { type: "string", default: "4" },
  width: { type: "string", default: "256" },
  heads: { type: "string", default: "4" },
  ff: { type: "string", default: "704" },
  lr: { type: "string", default: "1.5e-3" },
  warmup: { type: "string", default: "30" },
  "batch-tokens": { type: "string", default: "4096" },
  "pack-tokens": { type: "string", default: "1536" },
  "family-weights": { type: "string", default: "execution-aware=1,standard=0.4,direct=0.4" },
  "eval-every": { type: "string", default: "150" },
  "eval-frac": { type: "string", default: "0.02" },
  "save-every": { type: "string", default: "150" },
  check: { type: "string", default: "20" },
  card: { type: "string", default: "models/MODEL_CARD.md" },
  threads: { type: "string", default: "2" },
  "card-from": { type: "string" },
  real: { type: "string" },
  "wikisql-names": { type: "string", default: "nouns" },
  "wikisql-others": { type: "string", default: "2" },
  "prepare-only": { type: "boolean", default: false },
  "data-only": { type: "boolean", default: false },
  context: { type: "string", default: "1024" },
} as const;
const parse = () => {
  try {
    return parseArgs({ options: OPTIONS });
  } catch (error) {
    console.error(`make-starter-model: ${(error as Error).message} (--help lists the options)`);
    process.exit(2);
  }
};
const { values } = parse();

if (values.help) {
  // the usage is this file's leading doc comment
  const head = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(fileURLToPath(import.meta.url), "utf8"))![1]!;
  console.log(head.replace(/^ ?\* ?/gm, "").trim());
  process.exit(0);
}

const num = (name: keyof typeof values): number => {
  if (values[name] === undefined) throw new Error(`--${name} is missing`);
  const v = Number(values[name]);
  if (!Number.isFinite(v)) throw new Error(`--${name} must be a number, got ${values[name]}`);
  return v;
};
const weightList = (spec: string): Record<string, number> =>
  Object.fromEntries(
    spec
      .split(",")
      .filter(Boolean)
      .map((kv) => {
        const [k, v] = kv.split("=");
        return [k!, Number(v)];
      }),
  );
const familyWeights = weightList(String(values["family-weights"]));
const dbWeights = weightList(String(values["sft-more-db-weights"]));
const command = `npx tsx lab/scripts/make-starter-model.ts ${process.argv.slice(2).join(" ")}`.trim();
const stamp = (): string => new Date().toISOString().slice(11, 19);

if (values["card-from"]) {
  // rewrite the model card from a finished run's report.json (no training)
  const saved = JSON.parse(readFileSync(String(values["card-from"]), "utf8")) as SavedReport;
  const evalReport = values.eval ? (JSON.parse(readFileSync(String(values.eval), "utf8")) as EvalReportFile) : null;
  const notes = values.notes ? readFileSync(String(values.notes), "utf8") : null;
  writeFileSync(
    String(values.card),
    modelCard({ ...saved, commands: saved.commands ?? [saved.command ?? "npx tsx lab/scripts/make-starter-model.ts --seed 1"] }, evalReport, notes),
  );
  console.log(`wrote ${values.card} from ${values["card-from"]}`);
  process.exit(0);
}

function grpoPick(v: string | undefined): StarterGrpoPick {
  if (v === "last" || v === "best-heldout" || v === "best-or-start") return v;
  console.error(`make-starter-model: --grpo-pick is best-heldout, best-or-start or last, got ${v}`);
  process.exit(2);
}

function realSources(spec: string): { sources: RealSource[]; wikisqlNames: WikiTableNames; wikisqlOthers: number } {
  const sources = (spec === "all" || spec === "" ? [...REAL_SOURCES] : spec.split(",").map((x) => x.trim())) as RealSource[];
  const unknown = sources.filter((x) => !REAL_SOURCES.includes(x));
  if (unknown.length) {
    console.error(`make-starter-model: --real takes all or a list of ${REAL_SOURCES.join(", ")}; unknown: ${unknown.join(", ")}`);
    process.exit(2);
  }
  const names = values["wikisql-names"];
  if (names !== "nouns" && names !== "ids") {
    console.error(`make-starter-model: --wikisql-names is nouns or ids, got ${names}`);
    process.exit(2);
  }
  const others = Number(values["wikisql-others"]);
  if (!Number.isInteger(others) || others < 0) {
    console.error(`make-starter-model: --wikisql-others is a whole number of tables, got ${values["wikisql-others"]}`);
    process.exit(2);
  }
  return { sources, wikisqlNames: names, wikisqlOthers: others };
}

if (Boolean(values["import-sft"]) !== Boolean(values["import-sft-log"])) {
  console.error("--import-sft and --import-sft-log go together: the trained GGUF and the trainer's --log file");
  process.exit(2);
}

if (values["out-type"] !== "q8_0" && values["out-type"] !== "f16") {
  console.error(`--out-type must be q8_0 or f16, not ${values["out-type"]}`);
  process.exit(2);
}

const options: StarterOptions = {
  seed: num("seed"),
  workDir: String(values.work),
  out: String(values.out),
  outType: values["out-type"],
  dbs: num("dbs"),
  lookalikes: num("lookalikes"),
  lookalikeExact: num("lookalike-exact"),
  renameShare: num("rename-share"),
  devEvery: num("dev-every"),
  evalItems: num("eval-items"),
  vocabSize: num("vocab"),
  shape: { layers: num("layers"), embedding: num("width"), heads: num("heads"), kvHeads: num("heads"), feedForward: num("ff"), contextLength: num("context") },
  ...(values.real !== undefined ? { real: realSources(String(values.real)) } : {}),
  prepareOnly: values["prepare-only"] ?? false,
  sft: {
    minutes: num("minutes"),
    steps: num("steps"),
    lr: num("lr"),
    warmup: num("warmup"),
    batchTokens: num("batch-tokens"),
    packTokens: num("pack-tokens"),
    familyWeights,
    evalEvery: num("eval-every"),
    evalFrac: num("eval-frac"),
    saveEvery: num("save-every"),
    seed: num("seed"),
    threads: num("threads"),
    device: String(values["sft-device"]),
    logEvery: 10,
  },
  checkItems: num("check"),
  grpo: values["no-grpo"]
    ? null
    : {
        ...(values["grpo-steps"] ? { steps: num("grpo-steps") } : {}),
        ...(values["grpo-threads"] ? { threads: num("grpo-threads") } : {}),
        pick: grpoPick(values["grpo-pick"]),
      },
  ablation: values.ablation ?? false,
  reuseSft: values["reuse-sft"] ?? false,
  ...(values.from ? { from: String(values.from) } : {}),
  ...(values["import-sft"] ? { importSft: { model: String(values["import-sft"]), log: String(values["import-sft-log"] ?? "") } } : {}),
  sftMore: {
    minutes: num("sft-more-minutes"),
    steps: num("sft-more-steps"),
    lr: num("sft-more-lr"),
    device: String(values["sft-device"]),
    ...(values["sft-more-batch-tokens"] ? { batchTokens: num("sft-more-batch-tokens") } : {}),
    ...(Object.keys(dbWeights).length ? { dbWeights } : {}),
  },
  command,
  log: (m) => console.log(`${stamp()} ${m}`),
};
if (values["data-only"]) {
  const data = await makeStarterData(options);
  console.log(`${stamp()} wrote the data and evaluation files under ${values.work}; SFT records in ${data.sftPath} (the card is unchanged)`);
  process.exit(0);
}
const report = await makeStarterModel(options);
if (values["prepare-only"]) {
  console.log(
    `${stamp()} prepared ${values.work}: ${report.tokens.records} records in ${values.work}/sft_tokens.jsonl, initial model ${report.sftModel} (the card is unchanged)`,
  );
  process.exit(0);
}
writeFileSync(String(values.card), modelCard(report, null, null));
console.log(`${stamp()} wrote ${values.out} (${report.outBytes} bytes), ${values.card}, ${values.work}/report.json in ${report.seconds.toFixed(0)} s`);

/** A work folder's report.json (reports written before `commands` existed have one `command`). */
type SavedReport = Omit<StarterReport, "commands"> & { command?: string; commands?: string[] };

/** The parts of a `reex eval` report.json the card reads. */
interface EvalReportFile {
  dataset: { file: string; count: number };
  runs: {
    config: { label: string; strategy: string; candidates?: number };
    items?: ItemScore[];
    summary: {
      count: number;
      ex: { bird: number };
      voting: { bird: number };
      passK: { bird: number };
      executionErrorRate: number;
      avgInteractions: number | null;
      latencyMs: { mean: number } | null;
      generatedTokensPerItem: number | null;
      byDifficulty: Record<string, { count: number; ex: { bird: number } }>;
    };
  }[];
}

function pct(x: number): string {
  return (x * 100).toFixed(1);
}

/** The EX table of an eval report and the issue's three targets, checked on its rows. */
function evalSection(e: EvalReportFile): string[] {
  const lines = [
    `| run | n | EX (BIRD rule) | simple / moderate / challenging | final SQL fails | probes per item | generated tokens per item | s per item |`,
    `|---|---|---|---|---|---|---|---|`,
  ];
  for (const r of e.runs) {
    const s = r.summary;
    const d = ["simple", "moderate", "challenging"].map((k) => (s.byDifficulty[k] ? pct(s.byDifficulty[k]!.ex.bird) : "–")).join(" / ");
    lines.push(
      `| ${r.config.label} | ${s.count} | **${pct(s.ex.bird)}** | ${d} | ${pct(s.executionErrorRate)}% | ${s.avgInteractions?.toFixed(2) ?? "–"} | ${s.generatedTokensPerItem?.toFixed(0) ?? "–"} | ${s.latencyMs ? (s.latencyMs.mean / 1000).toFixed(2) : "–"} |`,
    );
  }
  const run = (label: string) => e.runs.find((r) => r.config.label === label);
  const target = (name: string, a: string, b: string, need: number): string => {
    const ra = run(a);
    const rb = run(b);
    if (!ra || !rb) return `- ${name}: not measured`;
    const diff = (ra.summary.ex.bird - rb.summary.ex.bird) * 100;
    let paired = "";
    if (ra.items && rb.items) {
      const d = pairedDifference(ra.items, rb.items);
      paired = ` (${d.firstOnly} questions right only in "${a}", ${d.secondOnly} only in "${b}"; 95% interval ${pct(d.ci95[0])} to ${pct(d.ci95[1])}, McNemar p ${d.pValue < 0.001 ? "< 0.001" : `= ${d.pValue.toFixed(3)}`})`;
    }
    return `- ${name}: ${diff >= 0 ? "+" : ""}${diff.toFixed(1)} EX points${paired} (target ≥ ${need > 0 ? "+" : ""}${need}) — **${diff >= need && diff > 0 ? "met" : "MISSED"}**`;
  };
  lines.push(
    ``,
    target("execution-aware after GRPO vs direct output", "exec-aware GRPO greedy", "direct SFT greedy", 10),
    target("GRPO vs its own SFT start (execution-aware, greedy)", "exec-aware GRPO greedy", "exec-aware SFT greedy", 5),
    target("tree-prune-16 voting vs greedy (after GRPO)", "exec-aware GRPO tree-prune-16", "exec-aware GRPO greedy", 0),
    ``,
    `The intervals are over these ${e.dataset.count} questions, paired question by question; a difference whose interval spans 0 is within what re-drawing the questions could undo.`,
  );
  return lines;
}

function curveTable(a: StarterReport["grpo"], b: StarterReport["ablation"]): string[] {
  if (!a) return [];
  const lines = [
    `| steps | reward (full) | train EX (full) | probes per rollout (full) | reward (no exploration) | train EX (no exploration) | probes per rollout (no exploration) |`,
    `|---|---|---|---|---|---|---|`,
  ];
  const bucket = 5;
  const avg = (xs: (number | null)[]): string => {
    const v = xs.filter((x): x is number => x !== null);
    return v.length ? (v.reduce((s, x) => s + x, 0) / v.length).toFixed(3) : "–";
  };
  for (let from = 1; from <= a.steps; from += bucket) {
    const to = Math.min(a.steps, from + bucket - 1);
    const pa = a.curve.filter((c) => c.step >= from && c.step <= to);
    const pb = b?.curve.filter((c) => c.step >= from && c.step <= to) ?? [];
    lines.push(
      `| ${from}–${to} | ${avg(pa.map((c) => c.reward))} | ${avg(pa.map((c) => c.trainEx))} | ${avg(pa.map((c) => c.interactions))} | ${b ? avg(pb.map((c) => c.reward)) : "–"} | ${b ? avg(pb.map((c) => c.trainEx)) : "–"} | ${b ? avg(pb.map((c) => c.interactions)) : "–"} |`,
    );
  }
  return lines;
}

function heldoutTable(a: StarterReport["grpo"], b: StarterReport["ablation"]): string[] {
  const full = a?.heldout ?? [];
  if (!full.length) return [];
  // the ablation does not re-score step 0: it starts from the same SFT model as the full run
  const abl = new Map([...full.filter((h) => h.step === 0), ...(b?.heldout ?? [])].map((h) => [h.step, h.ex]));
  return [
    `| step | held-out EX, greedy (full) | held-out EX, greedy (no exploration) |`,
    `|---|---|---|`,
    ...full.map((h) => `| ${h.step} | ${pct(h.ex)} | ${abl.has(h.step) ? pct(abl.get(h.step)!) : "–"} |`),
  ];
}

function modelCard(r: StarterReport, evalReport: EvalReportFile | null, notes: string | null): string {
  const s = r.sft;
  const c = r.check;
  const g = r.grpo;
  const mb = (b: number): string => `${(b / 1024 / 1024).toFixed(1)} MB`;
  const evals = s ? s.evals.map((e) => `${e.step}: ${e.eval_loss.toFixed(3)}`).join(", ") : "";
  const o = r.sftOptions;
  const first = s ? 2 : 1; // number of the first continued stage
  const m = r.synth.manifest;
  const lines = [
    `# reex-starter.gguf — model card`,
    ``,
    r.from
      ? `The project's own starter policy: a ${(r.parameters / 1e6).toFixed(1)}M-parameter llama-architecture model, continued from an earlier model of this pipeline, on`
      : `The project's own starter policy: a ${(r.parameters / 1e6).toFixed(1)}M-parameter llama-architecture model trained from scratch on`,
    ...(r.real
      ? [
          `real questions people wrote (WikiSQL, Advising; Spider's schemas with template questions: \`lab/realdata\`, docs/real-data.md) and the`,
          `synthetic text-to-SQL data of \`lab/synth\` (docs/synthetic-data.md): SFT on cold-start traces whose probes were really`,
          `executed${r.sftMore.some((m) => m.device?.startsWith("cuda")) ? " (the SFT stage on a GPU, imported; the rest on CPU)" : ", on CPU"}${r.grpo ? ", then GRPO with the database in the loop" : ""}. It is a small model: it copies table and column names`,
          `from the schema it is given, answers single-table questions best, and is weak on joins; a working default that exercises the whole`,
          `execution-aware loop (probes, injected results, final SQL), not a general text-to-SQL model.`,
        ]
      : [
          `the synthetic text-to-SQL data of \`lab/synth\` (docs/synthetic-data.md), on CPU: SFT on cold-start`,
          `traces whose probes were really executed, then GRPO with the database in the loop. It knows only the synthetic`,
          `domains' style of schema and question; it is a working default that exercises the whole execution-aware loop`,
          `(probes, injected results, final SQL), not a general text-to-SQL model.`,
        ]),
    ``,
    ...(notes ? [notes.trimEnd(), ``] : []),
    `## How it was made`,
    ``,
    r.commands.length > 1 ? `In ${r.commands.length} invocations on one work folder, each continuing from what the one before left:` : `One command:`,
    ``,
    "```",
    ...r.commands,
    "```",
    ``,
    `Seed ${r.seed}; work folder \`${r.workDir}\` (data, ${r.from ? "tokens, SFT stage loss logs" : "tokenizer, init model, tokens, SFT loss log `sft_loss.jsonl`"}, GRPO run folders, \`report.json\`).`,
    `${r.commands.length > 1 ? "The last invocation took" : "Total wall time"} ${(r.seconds / 60).toFixed(1)} min on ${r.cpus ?? 2} CPU cores (${r.sftMore.some((m) => m.device?.startsWith("cuda")) ? "the imported SFT stage ran on a GPU elsewhere; here PyTorch on CPU" : "PyTorch on CPU for SFT and the learner"}; llama.cpp through node-llama-cpp for rollouts).`,
    ``,
    `| step | what |`,
    `|---|---|`,
    `| data | \`generateSynth\` seed ${r.seed}: ${m.dbs} databases over 12 domains${m.lookalikes ? `, plus ${m.lookalikes} train-only look-alikes of the example databases' schemas (\`--lookalikes\`; none of the examples' questions)${m.lookalikeExact ? `, ${m.lookalikeExact * 100}% of them under the examples' exact table and column names (\`--lookalike-exact\`)` : ""}` : ""}${m.renameShare ? `; ${m.renameShare * 100}% of train table and column names given a random prefix (\`--rename-share\`)` : ""}; ${r.synth.train} train / ${r.synth.dev} dev items. Dev = every ${m.devEvery}th database of the 10 training domains (held-out databases: their own table/column naming, value encodings and rows; ${m.devSchemasSeenInTrain} of them share a schema with a train database) plus all databases of the held-out domains ${m.devDomains.join(", ")}. ${r.synth.traces} SFT records (3 families per train item)${r.sftDbs !== m.dbs ? `; the generator is prefix-stable (database i depends only on the seed and i), so the first SFT stage's ${r.sftDbs} databases are the first ${r.sftDbs} of these, with the same split` : ""} |`,
    ...(r.real
      ? [
          `| real questions | \`generateRealData\` seed ${r.seed} into \`${r.real.dir}\`: ${Object.entries(r.real.manifest.sources)
            .map(([k, v]) => `${k}: ${v.kept} of ${v.questions} questions kept on ${v.databases} databases (splits ${JSON.stringify(v.splits)})`)
            .join(
              "; ",
            )}; ${r.real.manifest.traces} SFT records of their train splits (3 families per item), mixed with the synthetic ones in \`${r.real.trainSft}\`; the tokenizer learned on the mixed text; held-out evaluation files \`eval_wikisql_test.json\` and \`eval_advising_test.json\` from the sources' own test splits |`,
        ]
      : []),
    ...(r.from
      ? [
          `| start | \`${r.from.path}\` (${r.from.bytes} bytes, sha256 \`${r.from.sha256.slice(0, 16)}…\`), an earlier model of this pipeline: its tokenizer, shape and weights are the start; the text above (or, for an earlier default, the git history of models/MODEL_CARD.md) says how it was made |`,
        ]
      : []),
    `| tokenizer | ${r.from ? "the start model's: " : ""}byte-level BPE, ${r.vocabSize} tokens (256 bytes + merges + ChatML \`<|endoftext|>\` \`<|im_start|>\` \`<|im_end|>\`), GPT-2 split regex (\`tokenizer.ggml.pre = trillion\`: llama.cpp's GPT-2 regex without the detokeniser's space clean-up, which would turn \` , \` into \`,\` in generated text) |`,
    `| model | llama, ${r.shape.layers} layers, width ${r.shape.embedding}, ${r.shape.heads} heads (KV ${r.shape.kvHeads}), FFN ${r.shape.feedForward}, context ${r.shape.contextLength}, untied output; ${r.parameters} parameters; ChatML template |`,
    `| tokens | prompts rendered by the llama policy's \`renderChat\`, tokenised by llama.cpp; ${r.tokens.records} records; prompt ${r.tokens.prompt.mean} tokens mean (p95 ${r.tokens.prompt.p95}), response ${r.tokens.response.mean} (p95 ${r.tokens.response.p95}, max ${r.tokens.response.max}); loss mask 1 on model-written text and \`<|im_end|>\`, 0 on prompt and injected \`<result>\` blocks |`,
    o
      ? `| SFT${r.sftMore.length ? " stage 1" : ""} | an SFT run of \`reex_learner step\`: one model for the three prompt families (the system prompt says which), AdamW (β 0.9/0.95, wd 0.1), lr ${String(o.lr)} warmup ${String(o.warmup)} then cosine to 10%, ${String(o.batchTokens)} tokens per batch, prefix-shared packing (rows ≤ ${String(o.packTokens)} tokens), family weights ${JSON.stringify(o.familyWeights)} (share of the questions each family's record is trained on per epoch) |`
      : `| SFT | SFT runs of \`reex_learner step\` from the ${r.from ? "start" : "initial"} model (below, with their commands above): one model for the three prompt families (the system prompt says which), AdamW (β 0.9/0.95, wd 0.1), warmup then cosine to 10%, prefix-shared packing |`,
    g
      ? `| GRPO | \`runTraining\` (= \`reex train grpo --config lab/starter/starter-grpo.json\` with the work folder's paths): ReEx MaxTune reward (format, exact match, execution, entity, exploration), group advantages, ${g.steps} steps × ${g.config.questionsPerStep} questions × ${g.config.groupSize} rollouts at T ${g.config.temperature}, ≤ ${g.config.maxInteractions} probes and ${g.config.maxTokens} tokens per rollout, lr ${g.config.learningRate}, clip ${g.config.clip}, KL β ${g.config.klBeta}; learner packs each group's rollouts over one copy of the prompt; ${(g.seconds / 60).toFixed(1)} min${g.picked ? `; shipped: step ${g.picked.step} of ${g.steps}, ${g.picked.rule === "best-heldout" ? "the checkpoint with the highest greedy EX on `val_seen.json` (the ablation's model is chosen the same way)" : g.picked.rule === "best-or-start" ? "the model with the highest greedy EX on `val_seen.json`, the SFT start included" : "the last"}` : ""} |`
      : `| GRPO | skipped (the SFT model is shipped) |`,
    `| export | GGUF, ${r.outType === "q8_0" ? "Q8_0 matrices (`reex_learner export --out-type q8_0`)" : "f16 matrices"}: ${mb(r.outBytes)} |`,
    ``,
    `## Measured`,
    ``,
    `### SFT`,
    ``,
    `| | |`,
    `|---|---|`,
    ...(s
      ? [
          `| steps | ${s.steps} (${s.stop_reason} budget), ${s.epochs_done} epochs of the weighted data, ${(s.train_s / 60).toFixed(1)} min |`,
          `| throughput | ${s.tokens_per_s} packed tokens/s (${s.unpacked_tokens_per_s} tokens/s counted unpacked) |`,
          `| train loss (per loss token) | ${s.first_loss?.toFixed(3)} at step 1 → ${s.last_loss} at the end |`,
          `| held-out loss | ${s.eval_loss?.toFixed(4)} (evals: ${evals}) |`,
        ]
      : []),
    ...r.sftMore.map(
      (m, k) =>
        `| SFT stage ${k + first} (from ${k + first === 1 ? (r.from ? "the start model's weights" : "the initial model: its shape and tokenizer, weights redrawn where the command says --reinit") : `stage ${k + first - 1}'s weights`}, ${m.device ?? "cpu"}, fresh AdamW, lr ${m.lr}, warmup then cosine; records of databases 0–${m.dbs - 1}${r.real ? ", the real questions' train splits" : ""}${m.lookalikes ? ` and ${m.lookalikes} look-alikes${m.lookalikeExact ? ` (${m.lookalikeExact * 100}% named exactly as the examples)` : ""}` : ""}${m.dbWeights ? `, repeated by database ${JSON.stringify(m.dbWeights)}` : ""}: ${m.data.records} records, ${m.data.lossTokens} loss tokens) | ${m.steps} steps, ${m.epochs_done} epochs, ${(m.train_s / 60).toFixed(1)} min at ${m.tokens_per_s} packed tokens/s; train loss ${m.first_loss?.toFixed(3)} → ${m.last_loss}; held-out loss ${m.eval_loss?.toFixed(4)} (its own held-out records) |`,
    ),
    ``,
  ];
  if (g) {
    lines.push(
      `### GRPO, with and without the exploration reward`,
      ``,
      `Means over blocks of 5 steps (${g.config.questionsPerStep * g.config.groupSize} rollouts per step; train questions).`,
      ``,
      ...curveTable(g, r.ablation),
      ``,
    );
    const held = heldoutTable(g, r.ablation);
    if (held.length) {
      lines.push(
        `Greedy EX during training on \`${r.workDir}/val_seen.json\`: ${r.synth.val ?? "its"} questions, one from each of as many dev databases of the training domains, none of them a database of the EX table below; step 0 is the SFT model.`,
        ``,
        ...held,
        ``,
      );
    }
  }
  if (evalReport) {
    lines.push(
      `### EX on held-out databases`,
      ``,
      `One \`reex eval --runs lab/starter/eval-runs.json\` run, ${evalReport.dataset.count} questions of \`${evalReport.dataset.file.replace(/^.*\/(\.reex\/)/, "$1")}\` (held-out databases of the training domains; none of their schemas is a train database's). "SFT" is the SFT model, "GRPO" the shipped model; the family is the prompt family asked for.`,
      ``,
      ...evalSection(evalReport),
      ``,
    );
  }
  if (c && c.items > 0) {
    lines.push(
      `### Quick check (end of the command)`,
      ``,
      `${c.items} held-out items, greedy, execution-aware, max 512 tokens: well-formed ${c.wellFormed}, with probes ${c.withProbes}, final SQL runs ${c.executable}, correct (BIRD EX) ${c.correct}; ${c.meanInteractions.toFixed(2)} probes and ${c.meanGeneratedTokens.toFixed(0)} generated tokens per item; ${c.seconds.toFixed(0)} s.`,
      ``,
    );
    for (const e of c.examples
      .filter((x) => x.ok)
      .slice(0, 1)
      .concat(c.examples.filter((x) => !x.ok).slice(0, 1))) {
      lines.push(
        `Question: ${e.question}  `,
        `Gold: \`${e.gold}\`  `,
        `Final: \`${e.final ?? "(none)"}\` — ${e.ok ? "correct" : "wrong"}, format ${e.format ? "ok" : "bad"}, ${e.probes} probes`,
        ``,
        "```",
        e.text.slice(0, 1500),
        "```",
        ``,
      );
    }
  }
  lines.push(
    `## Limits`,
    ``,
    ...(r.real
      ? [
          `- Trained on WikiSQL's one-table questions, Advising's one schema, Spider's schemas with template questions and synthetic`,
          `  schemas of 10 domains${r.synth.manifest.lookalikes ? " with look-alikes of the 3 example databases" : ""}, at most ${r.shape.contextLength} tokens of context (longer records were dropped).`,
          `  It copies names on one-table schemas; joins over several tables and long schemas are where it fails (the figures above).`,
        ]
      : r.synth.manifest.lookalikes
        ? [
            `- Trained only on synthetic schemas of 10 domains and look-alikes of the 3 example databases, at most 1024 tokens of`,
            `  context. Held-out databases of the 10 domains are the evaluation set; the unseen domains (\`eval_unseen.json\`) are far`,
            `  outside what it learned, and the example databases, whose schemas it has seen in look-alike form, are in-schema, not transfer.`,
          ]
        : [
            `- Trained only on synthetic schemas of 10 domains, at most 1024 tokens of context. Held-out databases of those domains`,
            `  are the evaluation set; the unseen domains (\`eval_unseen.json\`) and the example databases are far outside what it learned.`,
          ]),
    `- The file is regenerated, not versioned by hand: rerun the command above (same seed → same data, tokenizer, initial`,
    `  weights and GRPO schedule; the SFT result depends on how many steps fit the time budget unless \`--steps\` is given).`,
    ``,
  );
  return lines.join("\n");
}

/**
 * Decoding strategies compared in one run: linear-16, tree-16 and tree-prune-16 on the same
 * example questions with the same model, printing evaluated tokens, generated tokens and wall time
 * per strategy, with ratios to linear, and the llama.cpp decode batches they took (with the
 * evaluated tokens a batch held on average: how full a strategy keeps the batch).
 *
 *   npx tsx bench/decoding.ts [--model PATH | --real qwen2|qwen3|llama3|gemma] [--profile ID]
 *                             [--dataset FILE --db-root DIR] [--questions N] [--candidates K]
 *                             [--repeat R] [--seed S] [--threads T] [--constrained] [--speculative]
 *
 * --speculative runs tree-prune-16 a second time on each question, on a second policy with n-gram
 * drafting (`speculative: "ngram"`), right after the plain one and with the same seed, and prints
 * both wall times, whether the candidates' SQL came out the same, and the drafting counts.
 *
 * --threads defaults to the policy's default, as the server runs it (cores − 1, at least 1; 1 with the tiny model).
 *
 * Without --model it loads the tiny random test model (written to bench/.output/tiny.gguf), whose
 * text is noise; each question then gets a fixed-choice grammar (a short think, then one of a few
 * probes built from the question's gold SQL and tables, then a probe or an answer), so that
 * trajectories have the probe → result → answer structure of a real execution-aware model.
 * `--real NAME` does the same on a random-weight GGUF of a real architecture with that family's
 * real tokenizer and chat template (test/helpers/real-models.ts, built on first use), and
 * `--profile ID` writes the choices in that profile's tags (`<sql>`/`<observation>`/`<solution>`
 * for skyrl-sql) and prompts in its layout; default reex. With --model the model writes freely
 * (add --constrained for the schema grammar, which the server applies to the starter by default,
 * `decoding.constrained`; the starter figures docs/benchmarks.md reports from this bench ran without it).
 *
 * Questions come round-robin from the example databases, or from a BIRD/Spider-layout `--dataset`
 * (one per database first): tree decoding shares work only where the model probes, so measure a
 * model on questions it probes on (the starter probes on its own domains' held-out databases,
 * `lab/scripts/synth.ts --dev-every 7`, and almost never on the examples).
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { getProfile, type ModelProfile, type SegmentGrammars } from "../src/agent/index.js";
import { createDecoder, createGrammarBuilder, vote, saysNothingMatched, type Answer, type EmptyVotes, type Strategy } from "../src/decoding/index.js";
import { loadDataset } from "../src/eval/index.js";
import { buildExamples } from "../src/examples/index.js";
import { createLlamaPolicy } from "../src/policy/index.js";
import { buildTinyModel, gbnfLiteral, writeFileAtomic } from "../src/policy/tooling.js";
import { ExecutorPool, exBird, loadSchema, type ExecResult } from "../src/sql/index.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    dataset: { type: "string" },
    "db-root": { type: "string" },
    real: { type: "string" },
    profile: { type: "string", default: "reex" },
    questions: { type: "string", default: "3" },
    candidates: { type: "string", default: "16" },
    repeat: { type: "string", default: "1" },
    seed: { type: "string", default: "1" },
    threads: { type: "string" },
    constrained: { type: "boolean", default: false },
    speculative: { type: "boolean", default: false },
  },
});

const QUESTIONS = Number(values.questions);
const CANDIDATES = Number(values.candidates);
const REPEAT = Number(values.repeat);
const SEED = Number(values.seed);
const STRATEGIES: Strategy[] = ["linear", "tree", "tree-prune"];
/** The model's text is driven by fixed-choice grammars (no --model). */
const tiny = values.model === undefined;
const PROFILE = getProfile(values.profile);

/** One benchmark question. */
interface Item {
  id: string;
  dbPath: string;
  question: string;
  evidence: string;
  gold: string;
}

/** `n` questions round-robin over the databases: each database's first, then each one's second, …. */
function roundRobin(byDb: Item[][], n: number): Item[] {
  const out: Item[] = [];
  for (let i = 0; out.length < n && i < 100_000; i++) {
    const round = Math.floor(i / byDb.length);
    if (byDb.every((qs) => qs.length <= round)) break;
    const q = byDb[i % byDb.length]![round];
    if (q) out.push(q);
  }
  return out;
}

/** The questions: from `--dataset` when given, else the example databases'. */
async function loadItems(n: number): Promise<Item[]> {
  if (values.dataset) {
    if (!values["db-root"]) throw new Error("--dataset needs --db-root");
    const byDb = new Map<string, Item[]>();
    for (const it of loadDataset(values.dataset, { dbRoot: values["db-root"] }).items) {
      const list = byDb.get(it.dbId) ?? [];
      list.push({ id: `${it.dbId}#${it.questionId}`, dbPath: it.dbPath, question: it.question, evidence: it.evidence, gold: it.goldSql });
      byDb.set(it.dbId, list);
    }
    return roundRobin([...byDb.values()], n);
  }
  const sets = await buildExamples();
  return roundRobin(
    sets.map((set) =>
      set.questions.map((q) => ({ id: `${q.db_id}#${q.question_id}`, dbPath: set.path, question: q.question, evidence: q.evidence, gold: q.SQL })),
    ),
    n,
  );
}

/** The fixed-choice grammars for one question, in the profile's tags: probes and answers around its gold SQL and tables. */
function choiceGrammars(profile: ModelProfile, dbPath: string, gold: string): SegmentGrammars {
  const tables = loadSchema(dbPath).tables.map((t) => t.name);
  const used = tables.filter((t) => new RegExp(`\\b${t}\\b`, "i").test(gold));
  const main = used[0] ?? tables[0]!;
  const quote = (t: string): string => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(t) ? t : `"${t}"`);
  const probes = [
    ...used.slice(0, 2).map((t) => `SELECT * FROM ${quote(t)} LIMIT 3`),
    `SELECT COUNT(*) FROM ${quote(main)}`,
    gold,
    `SELECT no_such_column FROM ${quote(main)}`,
  ];
  const finals = [gold, `SELECT COUNT(*) FROM ${quote(main)}`, `SELECT * FROM ${quote(main)} LIMIT 1`, `SELECT no_such_column FROM ${quote(main)}`];
  const alt = (xs: string[]): string => [...new Set(xs)].map(gbnfLiteral).join(" | ");
  const words = ["check", "the", "rows", "table", "count", "filter", "join", "value", "codes", "status"];
  const think = profile.think ?? { open: "", close: "\n" };
  const { probe, answer } = profile;
  const rules = [
    `think ::= ${gbnfLiteral(think.open)} word (" " word){0,7} ${gbnfLiteral(think.close)}`,
    `word ::= ${alt(words)}`,
    ...(probe ? [`probe ::= ${gbnfLiteral(probe.open)} probe-sql ${gbnfLiteral(probe.close)}`, `probe-sql ::= ${alt(probes)}`] : []),
    `final ::= ${gbnfLiteral(answer.open)} final-sql ${gbnfLiteral(answer.close)}`,
    `final-sql ::= ${alt(finals)}`,
  ].join("\n");
  return {
    first: `root ::= think ${probe ? "probe" : "final"}\n${rules}\n`,
    segment: `root ::= think ${probe ? "(probe | final)" : "final"}\n${rules}\n`,
    finalBody: `root ::= final-sql ${gbnfLiteral(answer.close)}\n${rules}\n`,
  };
}

interface Totals {
  evaluated: number;
  generated: number;
  wallMs: number;
  candidates: number;
  shortfalls: number;
  runs: number;
  /** llama.cpp decode batches (one step of every generating trajectory, or an injected chunk). */
  batches: number;
  /** Per vote rule: winners whose result matches the gold SQL's (BIRD EX), and winners whose result says only "nothing matched". */
  votes: Record<EmptyVotes, { ex: number; emptyWins: number }>;
}

/** The vote re-run on one answer's executed candidates under `rule`: does its winner match the gold rows, and is it a "nothing matched" result? */
function revote(answer: Answer, rule: EmptyVotes, gold: ExecResult | undefined): { ex: boolean; empty: boolean } {
  const outcome = vote(
    answer.candidates.map((c) => ({ sql: c.sql, meanLogprob: c.meanLogprob, answerable: c.answerable, ...(c.result ? { result: c.result } : {}) })),
    { emptyVotes: rule },
  );
  const result = outcome.winner === null ? undefined : answer.candidates[outcome.winner]?.result;
  if (!result?.ok) return { ex: false, empty: false };
  return { ex: gold?.ok === true && exBird(result.rows, gold.rows), empty: saysNothingMatched(result.rows) };
}

async function main(): Promise<void> {
  const items = await loadItems(QUESTIONS);
  let modelPath = values.model;
  if (!modelPath && values.real) {
    const { buildRealModel, REAL_MODEL_NAMES } = await import("../test/helpers/real-models.js");
    if (!(REAL_MODEL_NAMES as string[]).includes(values.real)) throw new Error(`--real must be one of ${REAL_MODEL_NAMES.join(", ")}`);
    modelPath = await buildRealModel(values.real as (typeof REAL_MODEL_NAMES)[number]);
  } else if (!modelPath) {
    modelPath = fileURLToPath(new URL("./.output/tiny.gguf", import.meta.url));
    if (!existsSync(modelPath)) await writeFileAtomic(modelPath, buildTinyModel({ seed: 1 }));
  }
  // without --threads, the policy's own default (cores − 1), as the server runs it
  const threads = values.threads !== undefined ? Number(values.threads) : tiny ? 1 : undefined;
  const policyOptions = {
    model: modelPath,
    gpu: tiny ? ("cpu" as const) : ("auto" as const),
    contextSize: tiny ? 2048 : 8192,
    sequences: CANDIDATES + 8,
    ...(threads !== undefined ? { threads } : {}),
  };
  const policy = await createLlamaPolicy(policyOptions);
  const drafting = values.speculative ? await createLlamaPolicy({ ...policyOptions, speculative: "ngram" }) : undefined;
  const executor = new ExecutorPool({ workers: 2 });
  const grammars = new Map(items.map((it) => [it.id, choiceGrammars(PROFILE, it.dbPath, it.gold)]));
  const indexDir = fileURLToPath(new URL("./.output/indexes", import.meta.url));
  // the server's grammar: the schema's names, and strings linked to the values the prompt builder indexes
  const schemaGrammar = createGrammarBuilder({ indexDir });
  const byQuestion = new Map<string, string>();
  const decode = createDecoder({
    policy,
    executor,
    promptOptions: { indexDir },
    grammarFor: (dbPath, family, profile, ask) => (tiny ? grammars.get(byQuestion.get(dbPath)!)! : schemaGrammar(dbPath, family, profile, ask)),
  });
  const draftDecode = drafting
    ? createDecoder({
        policy: drafting,
        executor,
        promptOptions: { indexDir },
        grammarFor: (dbPath, family, profile, ask) => (tiny ? grammars.get(byQuestion.get(dbPath)!)! : schemaGrammar(dbPath, family, profile, ask)),
      })
    : undefined;
  const constrained = tiny || values.constrained === true;
  const prune = { plainMs: 0, draftMs: 0, same: 0, runs: 0, generated: 0, drafted: 0, accepted: 0, saved: 0 };

  console.log(
    `model: ${modelPath} (${policy.info.device}${threads !== undefined ? `, ${threads} thread${threads === 1 ? "" : "s"}` : ""}), ${policy.info.maxSequences} sequences`,
  );
  console.log(
    `profile: ${PROFILE.id}; questions: ${items.length} (${items.map((it) => it.id).join(", ")}), candidates: ${CANDIDATES}, repeat: ${REPEAT}, constrained: ${constrained}`,
  );

  const totals = new Map<Strategy, Totals>(
    STRATEGIES.map((s) => [
      s,
      {
        evaluated: 0,
        generated: 0,
        wallMs: 0,
        candidates: 0,
        shortfalls: 0,
        runs: 0,
        batches: 0,
        votes: { last: { ex: 0, emptyWins: 0 }, equal: { ex: 0, emptyWins: 0 } },
      },
    ]),
  );
  const rows: string[] = [];
  try {
    for (let r = 0; r < REPEAT; r++) {
      for (const [k, it] of items.entries()) {
        byQuestion.set(it.dbPath, it.id);
        const gold = await executor.execute(it.dbPath, it.gold, { timeoutMs: 10_000 });
        const base = {
          dbPath: it.dbPath,
          question: it.question,
          evidence: it.evidence,
          profile: PROFILE.id,
          constrained,
          maxInteractions: 3,
          maxTokens: 512,
          seed: SEED + k,
        };
        await decode({ ...base, strategy: "greedy" });
        for (const strategy of STRATEGIES) {
          const batchesBefore = policy.decodeBatches?.() ?? 0;
          const started = performance.now();
          const answer: Answer = await decode({ ...base, strategy, candidates: CANDIDATES });
          const wallMs = performance.now() - started;
          const t = totals.get(strategy)!;
          t.evaluated += answer.usage.evaluatedTokens;
          t.generated += answer.usage.generatedTokens;
          t.wallMs += wallMs;
          t.candidates += answer.candidates.length;
          t.shortfalls += answer.shortfall ? 1 : 0;
          t.runs++;
          t.batches += (policy.decodeBatches?.() ?? 0) - batchesBefore;
          for (const rule of ["last", "equal"] as const) {
            const v = revote(answer, rule, gold);
            t.votes[rule].ex += v.ex ? 1 : 0;
            t.votes[rule].emptyWins += v.empty ? 1 : 0;
          }
          rows.push(
            `  ${it.id.padEnd(14)} ${strategy.padEnd(11)} eval ${String(answer.usage.evaluatedTokens).padStart(6)}  gen ${String(answer.usage.generatedTokens).padStart(5)}  ` +
              `${(wallMs / 1000).toFixed(2).padStart(6)} s  cand ${answer.candidates.length}${answer.shortfall ? ` (shortfall: ${answer.shortfall})` : ""}`,
          );
          if (strategy === "tree-prune" && draftDecode) {
            if (r === 0 && k === 0) await draftDecode({ ...base, strategy: "greedy" });
            const t0 = performance.now();
            const drafted: Answer = await draftDecode({ ...base, strategy, candidates: CANDIDATES });
            const draftMs = performance.now() - t0;
            const sqls = (a: Answer): string => JSON.stringify(a.candidates.map((c) => c.sql));
            prune.plainMs += wallMs;
            prune.draftMs += draftMs;
            prune.same += sqls(drafted) === sqls(answer) ? 1 : 0;
            prune.runs++;
            prune.generated += drafted.usage.generatedTokens;
            prune.drafted += drafted.usage.draftedTokens ?? 0;
            prune.accepted += drafted.usage.acceptedTokens ?? 0;
            prune.saved += drafted.usage.forwardPassesSaved ?? 0;
            rows.push(
              `  ${it.id.padEnd(14)} ${"+drafting".padEnd(11)} eval ${String(drafted.usage.evaluatedTokens).padStart(6)}  gen ${String(drafted.usage.generatedTokens).padStart(5)}  ${(draftMs / 1000).toFixed(2).padStart(6)} s  cand ${drafted.candidates.length}`,
            );
          }
        }
      }
    }
  } finally {
    decode.close();
    draftDecode?.close();
    await drafting?.close();
    await policy.close();
    await executor.close();
  }

  console.log("\nper question:");
  for (const row of rows) console.log(row);
  const linear = totals.get("linear")!;
  console.log(
    `\n${"strategy".padEnd(16)}${"evaluated".padStart(10)}${"generated".padStart(11)}${"wall s".padStart(9)}${"cand".padStart(6)}${"eval/lin".padStart(10)}${"gen/lin".padStart(9)}${"wall/lin".padStart(10)}${"batches".padStart(9)}${"tok/batch".padStart(11)}`,
  );
  for (const s of STRATEGIES) {
    const t = totals.get(s)!;
    const ratio = (a: number, b: number): string => (b > 0 ? `${((100 * a) / b).toFixed(1)}%` : "n/a");
    console.log(
      `${`${s}-${CANDIDATES}`.padEnd(16)}${String(t.evaluated).padStart(10)}${String(t.generated).padStart(11)}${(t.wallMs / 1000).toFixed(2).padStart(9)}` +
        `${(t.candidates / Math.max(1, t.runs)).toFixed(1).padStart(6)}${ratio(t.evaluated, linear.evaluated).padStart(10)}${ratio(t.generated, linear.generated).padStart(9)}${ratio(t.wallMs, linear.wallMs).padStart(10)}` +
        `${(t.batches ? String(t.batches) : "n/a").padStart(9)}${(t.batches ? (t.evaluated / t.batches).toFixed(1) : "n/a").padStart(11)}`,
    );
  }
  console.log(`\nthe vote, old rule ("nothing matched" votes like any result) against the new (it wins only when nothing else ran), on the same candidates:`);
  console.log(`${"strategy".padEnd(16)}${"EX old".padStart(9)}${"EX new".padStart(9)}${"empty wins old".padStart(16)}${"empty wins new".padStart(16)}`);
  for (const s of STRATEGIES) {
    const t = totals.get(s)!;
    const pct = (n: number): string => `${((100 * n) / Math.max(1, t.runs)).toFixed(1)}%`;
    console.log(
      `${`${s}-${CANDIDATES}`.padEnd(16)}${pct(t.votes.equal.ex).padStart(9)}${pct(t.votes.last.ex).padStart(9)}${pct(t.votes.equal.emptyWins).padStart(16)}${pct(t.votes.last.emptyWins).padStart(16)}`,
    );
  }
  if (drafting) {
    const pct = (a: number, b: number): string => (b > 0 ? `${((100 * a) / b).toFixed(1)}%` : "n/a");
    console.log(
      `\ntree-prune-${CANDIDATES} with n-gram drafting: ${(prune.draftMs / 1000).toFixed(2)} s against ${(prune.plainMs / 1000).toFixed(2)} s without ` +
        `(${(prune.plainMs / Math.max(1, prune.draftMs)).toFixed(2)}× as fast); same candidates' SQL in ${prune.same} of ${prune.runs} runs; ` +
        `${prune.drafted} tokens drafted, ${prune.accepted} accepted (${pct(prune.accepted, prune.drafted)}), ${prune.saved} forward passes saved (${pct(prune.saved, prune.generated)} of ${prune.generated} generated)`,
    );
  }
  console.log("\ntargets: tree-16 evaluates ≤ 45% of linear-16's tokens and takes ≤ 60% of its wall time (ReEx Table 7: 41% and 49%)");
}

await main();

/**
 * Constrained decoding benchmark (issue 3): N rollouts sampled at temperature 1 (seeds base..base+N-1)
 * with the schema grammar, N more with it and without log-probabilities, N with a tags-only
 * ablation of it (the same think / probe / final structure, free text where the SQL goes) and N
 * without a grammar, on one example database, printing per mode:
 * tag-format compliance (share of `formatCheck` ok), rollouts with a final SQL, identifiers
 * outside the schema (total, and share of SQL statements, probes and finals, with any), executed
 * probes and their outcome categories, stop reasons and sampled tokens; and last, the time a
 * sampled token took with the grammar, with and without log-probabilities, and without it (what
 * tree decoding's log-probabilities cost behind a grammar: see src/policy/direct-decode.ts), and with
 * the name binding (src/agent/binding.ts) as the server runs it by default (`decoding.bindNames`
 * "from", FROM lists drawn again: `decoding.redrawFrom`) against the same grammar without it.
 * Times are side by side: after one untimed rollout per mode, the modes take turns, rollout by
 * rollout, and a token's time is its mode's rollout time (prompt, probes and all) over its tokens.
 *
 *   npx tsx bench/constrained.ts [--rollouts 100] [--db retail|clinic|music] [--max-interactions 1]
 *                                [--max-tokens 1024] [--temperature 1] [--seed 1] [--model PATH] [--threads T]
 *
 * Without --model it loads the tiny random test model (written to bench/.output/tiny.gguf): its
 * text is noise, so every structural property of the constrained output comes from the grammar.
 * Rollout i asks the database's question i (round robin). The grammars are the server's default
 * (`createGrammarBuilder`: `buildSegmentGrammars` over the whole schema). Exits 1 when the
 * constrained rollouts write an identifier outside the schema or break the tag format.
 *
 * The interaction limit defaults to 1 here (the server's is 10): the random model opens another
 * probe at nearly every choice, and a rollout that spends ten probes, each with a think of up to
 * 256 characters, cannot end inside the 1024-token budget however short the grammar keeps each
 * segment. With 1, a rollout is at most think, probe, result, think, refused probe, forced final.
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import {
  checkIdentifiers,
  formatCheck,
  NameBinding,
  runRollout,
  type RolloutResult,
  type SchemaNames,
  type SegmentGrammars,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../src/agent/index.js";
import { createGrammarBuilder, createPromptBuilder, schemaNames } from "../src/decoding/index.js";
import type { PromptFamily } from "../src/decoding/types.js";
import { buildExamples } from "../src/examples/index.js";
import { createLlamaPolicy } from "../src/policy/index.js";
import { buildTinyModel, writeFileAtomic } from "../src/policy/tooling.js";
import { ExecutorPool, loadSchema } from "../src/sql/index.js";

const { values } = parseArgs({
  options: {
    rollouts: { type: "string", default: "100" },
    db: { type: "string", default: "retail" },
    "max-interactions": { type: "string", default: "1" },
    "max-tokens": { type: "string", default: "1024" },
    temperature: { type: "string", default: "1" },
    seed: { type: "string", default: "1" },
    model: { type: "string" },
    threads: { type: "string" },
  },
});

const ROLLOUTS = Number(values.rollouts);
const MAX_INTERACTIONS = Number(values["max-interactions"]);
const MAX_TOKENS = Number(values["max-tokens"]);
const TEMPERATURE = Number(values.temperature);
const SEED = Number(values.seed);
const FAMILY: PromptFamily = "execution-aware";
const tiny = values.model === undefined;

/** What one mode's rollouts did. */
interface ModeStats {
  rollouts: number;
  formatOk: number;
  withFinal: number;
  unanswerable: number;
  statements: number;
  statementsWithUnknown: number;
  unknownIdentifiers: number;
  unknownExamples: Map<string, number>;
  executedProbes: number;
  outcomes: Map<string, number>;
  refusedProbes: number;
  repeatedProbes: number;
  stopReasons: Map<string, number>;
  formatProblems: Map<string, number>;
  tokens: number[];
  ms: number;
  /** SQL statements whose names do not bind to their FROM lists (see src/agent/binding.ts). */
  unbound: number;
  /** Tokens drawn again by the binding check; rollouts where it fell back. */
  redrawn: number;
  fallbacks: number;
  /** SQL whose FROM list was drawn again. */
  fromRedraws: number;
}

function bump(map: Map<string, number>, key: string, by = 1): void {
  map.set(key, (map.get(key) ?? 0) + by);
}

function emptyStats(): ModeStats {
  return {
    rollouts: 0,
    formatOk: 0,
    withFinal: 0,
    unanswerable: 0,
    statements: 0,
    statementsWithUnknown: 0,
    unknownIdentifiers: 0,
    unknownExamples: new Map(),
    executedProbes: 0,
    outcomes: new Map(),
    refusedProbes: 0,
    repeatedProbes: 0,
    stopReasons: new Map(),
    formatProblems: new Map(),
    tokens: [],
    ms: 0,
    unbound: 0,
    redrawn: 0,
    fallbacks: 0,
    fromRedraws: 0,
  };
}

function record(stats: ModeStats, r: RolloutResult, names: SchemaNames, binding: NameBinding): void {
  stats.rollouts++;
  stats.redrawn += r.binding?.redrawn ?? 0;
  stats.fromRedraws += r.binding?.fromRedraws ?? 0;
  if (r.binding?.mode === "fallback") stats.fallbacks++;
  const verdict = formatCheck(r.text, FAMILY);
  if (verdict.ok) stats.formatOk++;
  // the problem's kind, without the tag names and counts that vary per rollout
  for (const p of new Set(verdict.problems.map((p) => p.replace(/block order .* does not match/, "block order … does not match"))))
    bump(stats.formatProblems, p);
  if (r.finalSql !== null) stats.withFinal++;
  if (!r.answerable) stats.unanswerable++;
  bump(stats.stopReasons, r.stopReason);
  stats.tokens.push(r.usage.generatedTokens);
  // every SQL statement the model wrote: probes (refused ones too) and the final answer
  const sqls = [...r.probes.map((p) => p.sql), ...(r.finalSql !== null ? [r.finalSql] : [])];
  for (const sql of sqls) {
    stats.statements++;
    const unknown = checkIdentifiers(sql, names);
    if (unknown.length > 0) stats.statementsWithUnknown++;
    stats.unknownIdentifiers += unknown.length;
    if (binding.check(sql) !== undefined) stats.unbound++;
    for (const u of unknown) bump(stats.unknownExamples, u);
  }
  for (const p of r.probes) {
    if (p.overLimit) stats.refusedProbes++;
    else if (p.repeated) stats.repeatedProbes++;
    else if (p.result) {
      stats.executedProbes++;
      bump(stats.outcomes, p.result.ok ? (p.result.empty ? "ok (empty)" : "ok") : p.result.error.category);
    }
  }
}

const pct = (n: number, d: number): string => (d === 0 ? "–" : `${((100 * n) / d).toFixed(1)}%`);
const tally = (map: Map<string, number>, limit = 8): string =>
  [...map.entries()]
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, limit)
    .map(([k, n]) => `${k} ${n}`)
    .join(", ") || "none";

function quantiles(xs: number[]): string {
  if (xs.length === 0) return "–";
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return `median ${at(0.5)}, p90 ${at(0.9)}, max ${s[s.length - 1]}`;
}

function report(label: string, s: ModeStats): void {
  console.log(`\n${label}: ${s.rollouts} rollouts, ${(s.ms / 1000).toFixed(1)} s (${(s.ms / Math.max(1, s.rollouts)).toFixed(0)} ms each)`);
  console.log(`  tag-format compliance         ${s.formatOk}/${s.rollouts} (${pct(s.formatOk, s.rollouts)})`);
  console.log(`  rollouts with a final SQL     ${s.withFinal}/${s.rollouts} (${pct(s.withFinal, s.rollouts)}); UNANSWERABLE ${s.unanswerable}`);
  console.log(
    `  identifiers outside schema    ${s.unknownIdentifiers} in ${s.statementsWithUnknown}/${s.statements} SQL statements (${pct(s.statementsWithUnknown, s.statements)} with any)`,
  );
  if (s.unknownIdentifiers > 0) {
    const shown = new Map([...s.unknownExamples].map(([k, n]) => [JSON.stringify(k.length > 16 ? `${k.slice(0, 16)}…` : k), n] as const));
    console.log(`    most frequent               ${tally(shown, 6)}`);
  }
  console.log(
    `  names that do not bind        ${s.unbound}/${s.statements} SQL statements (${pct(s.unbound, s.statements)}); binding redrew ${s.redrawn} tokens, drew ${s.fromRedraws} FROM lists again, fell back in ${s.fallbacks} rollouts`,
  );
  console.log(
    `  executed probes               ${s.executedProbes} (${(s.executedProbes / Math.max(1, s.rollouts)).toFixed(2)} per rollout); repeated ${s.repeatedProbes}, refused at the limit ${s.refusedProbes}`,
  );
  console.log(`    outcomes                    ${tally(s.outcomes)}`);
  console.log(`  stop reasons                  ${tally(s.stopReasons)}`);
  console.log(`  sampled tokens                ${quantiles(s.tokens)} (budget ${MAX_TOKENS})`);
  if (s.formatProblems.size > 0) console.log(`  format problems (rollouts)    ${tally(s.formatProblems, 6)}`);
}

/**
 * The ablation: the schema grammars with their SQL replaced by free text (no `<`, at most 160
 * characters), so tags stay well formed and bounded but nothing constrains the identifiers.
 */
function tagsOnly(grammars: SegmentGrammars): SegmentGrammars {
  const free = (g: string | undefined): string | undefined => {
    if (g === undefined) return undefined;
    const swapped = g.replace(/^statement ::= .*$/m, "statement ::= free-sql");
    if (swapped === g) throw new Error("no statement rule to replace");
    return `${swapped}free-sql ::= [^<;\\x00-\\x1F]{1,160}\n`;
  };
  return { first: free(grammars.first), segment: free(grammars.segment), finalBody: free(grammars.finalBody) };
}

/** The same grammars without the name binding. */
function unbound({ binding: _, fromRest: __, ...grammars }: SegmentGrammars): SegmentGrammars {
  return grammars;
}

async function main(): Promise<void> {
  const sets = await buildExamples();
  const set = sets.find((s) => s.dbId === values.db);
  if (!set) throw new Error(`unknown --db ${values.db}; one of ${sets.map((s) => s.dbId).join(", ")}`);
  let modelPath = values.model;
  if (!modelPath) {
    modelPath = fileURLToPath(new URL("./.output/tiny.gguf", import.meta.url));
    await writeFileAtomic(modelPath, buildTinyModel({ seed: 1 }));
  }
  const threads = values.threads !== undefined ? Number(values.threads) : tiny ? 1 : undefined;
  const policy = await createLlamaPolicy({
    model: modelPath,
    gpu: tiny ? "cpu" : "auto",
    contextSize: 4096,
    sequences: 2,
    ...(threads !== undefined ? { threads } : {}),
  });
  const executor = new ExecutorPool({ workers: 1 });
  const prompts = createPromptBuilder({ indexDir: fileURLToPath(new URL("./.output/indexes", import.meta.url)) });
  const names = schemaNames(loadSchema(set.path));
  const built = await createGrammarBuilder()(set.path, FAMILY);
  const binding = built.binding ?? new NameBinding(names);
  // the server's default binding (decoding.bindNames "from", decoding.redrawFrom true)
  const grammar: SegmentGrammars = { ...built, binding: binding.withMode("from") };
  try {
    console.log(
      `model ${modelPath} (${policy.info.device}${threads !== undefined ? `, ${threads} thread${threads === 1 ? "" : "s"}` : ""}); ` +
        `database ${set.dbId} (${names.tables.length} tables, ${set.questions.length} questions, asked round robin)`,
    );
    console.log(
      `${ROLLOUTS} rollouts per mode, family ${FAMILY}, temperature ${TEMPERATURE}, seeds ${SEED}..${SEED + ROLLOUTS - 1}, ` +
        `max interactions ${MAX_INTERACTIONS}, max tokens ${MAX_TOKENS}; grammar ${(grammar.segment!.length / 1024).toFixed(0)} KiB per segment`,
    );
    const asked = await Promise.all(set.questions.map((q) => prompts.promptFor(set.path, q.question, q.evidence || undefined, FAMILY)));
    const modes = [
      { label: "constrained (schema grammar, names bound: from, FROM lists drawn again)", grammar: grammar as SegmentGrammars | undefined },
      { label: "constrained, without log-probabilities (how one greedy answer samples)", grammar: grammar as SegmentGrammars | undefined, logprobs: false },
      { label: "constrained, names not bound (decoding.bindNames false)", grammar: unbound(grammar) as SegmentGrammars | undefined },
      { label: "constrained, names not bound, without log-probabilities", grammar: unbound(grammar) as SegmentGrammars | undefined, logprobs: false },
      { label: "tags only (ablation: schema grammar with free text for the SQL)", grammar: tagsOnly(grammar) as SegmentGrammars | undefined },
      { label: "unconstrained", grammar: undefined },
    ];
    const run = (mode: (typeof modes)[number], i: number, seed: number): Promise<RolloutResult> =>
      runRollout(
        policy,
        asked[i % asked.length]!,
        resolveRolloutOptions({
          ...OWN_ANSWERS,
          executor,
          dbPath: set.path,
          family: FAMILY,
          temperature: TEMPERATURE,
          seed,
          maxInteractions: MAX_INTERACTIONS,
          maxTokens: MAX_TOKENS,
          ...(mode.grammar ? { grammar: mode.grammar } : {}),
          ...(mode.logprobs === false ? { logprobs: false } : {}),
        }),
      );
    // one untimed rollout per mode first (grammar compilation, first-use costs), then the modes
    // interleaved, rollout i starting at mode i mod 6, so that no mode is timed apart from the others
    for (const mode of modes) await run(mode, 0, SEED + ROLLOUTS);
    const stats = modes.map(() => emptyStats());
    for (let i = 0; i < ROLLOUTS; i++) {
      for (let j = 0; j < modes.length; j++) {
        const m = (i + j) % modes.length;
        const start = performance.now();
        const r = await run(modes[m]!, i, SEED + i);
        stats[m]!.ms += performance.now() - start;
        if (r.error) throw new Error(`rollout ${i} failed: ${r.error.code}: ${r.error.message}`);
        record(stats[m]!, r, names, binding);
      }
    }
    const perToken: number[] = [];
    for (const [m, mode] of modes.entries()) {
      const s = stats[m]!;
      report(mode.label, s);
      const sampled = s.tokens.reduce((a, b) => a + b, 0);
      perToken.push(s.ms / Math.max(1, sampled));
      if (m === 0) {
        const ok = s.unknownIdentifiers === 0 && s.formatOk === s.rollouts;
        console.log(
          `  => ${ok ? "PASS" : "FAIL"}: ${s.unknownIdentifiers} identifiers outside the schema, ${pct(s.formatOk, s.rollouts)} tag-format compliance`,
        );
        if (!ok) process.exitCode = 1;
      }
    }
    const [withLp, withoutLp, unboundLp, unboundNoLp, , free] = perToken as [number, number, number, number, number, number];
    console.log(
      `\nms per sampled token: schema grammar ${withLp.toFixed(2)} with log-probabilities, ${withoutLp.toFixed(2)} without ` +
        `(${(withLp / withoutLp).toFixed(2)}×); no grammar ${free.toFixed(2)} (grammar with log-probabilities ${(withLp / free).toFixed(2)}×)`,
    );
    console.log(
      `name binding: ${unboundLp.toFixed(2)} → ${withLp.toFixed(2)} ms a token with log-probabilities, ${unboundNoLp.toFixed(2)} → ${withoutLp.toFixed(2)} without; ` +
        `decode tokens/s with binding ÷ without: ${(unboundLp / withLp).toFixed(2)} and ${(unboundNoLp / withoutLp).toFixed(2)} (goal ≥ 0.85)`,
    );
  } finally {
    prompts.close();
    await policy.close();
    await executor.close();
  }
}

await main();

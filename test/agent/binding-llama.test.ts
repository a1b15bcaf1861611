/**
 * Name binding through the real decoder (node-llama-cpp, the direct decode path) on real SQLite
 * schemas: with the grammar's binding on, a rollout's SQL names only columns of tables in its FROM
 * list, whether the model is the tiny random one (whose every name is a guess) or the shipped
 * starter, and on a schema with non-ASCII and quoted names.
 */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NameBinding, runRollout, type RolloutResult, type SegmentGrammars, OWN_ANSWERS, resolveRolloutOptions } from "../../src/agent/index.js";
import { createGrammarBuilder, createPromptBuilder, type PromptBuilder } from "../../src/decoding/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { type ExampleSet } from "../../src/examples/testing.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import type { RebindEvent } from "../../src/events/testing.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const SHIPPED = join(import.meta.dirname, "../../models/reex-starter.gguf");

let dir: string;
let executor: ExecutorPool;
let prompts: PromptBuilder;
let sets: ExampleSet[];
let italian: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-binding-"));
  sets = await buildExamples(join(dir, "examples"));
  italian = join(dir, "citta.sqlite");
  const db = new Database(italian);
  db.exec(
    `CREATE TABLE "città" (id INTEGER PRIMARY KEY, nome TEXT, "popolazione totale" INTEGER, regione_id INTEGER);
     CREATE TABLE regione (regione_id INTEGER PRIMARY KEY, "nome_regione" TEXT, superficie REAL);
     INSERT INTO "città" VALUES (1, 'Torino', 848000, 1), (2, 'Milano', 1352000, 2);
     INSERT INTO regione VALUES (1, 'Piemonte', 25387), (2, 'Lombardia', 23864);`,
  );
  db.close();
  await ensureTestModel();
  executor = new ExecutorPool({ workers: 1 });
  prompts = createPromptBuilder({ indexDir: join(dir, "indexes") });
});

afterAll(async () => {
  prompts?.close();
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Every SQL a rollout wrote (probes and the final), with the check's verdict. */
function statements(r: RolloutResult): string[] {
  return [...r.probes.map((p) => p.sql), ...(r.finalSql !== null ? [r.finalSql] : [])];
}

async function run(policy: Policy, dbPath: string, questions: string[], seeds: number[], temperature: number) {
  const grammar: SegmentGrammars = await createGrammarBuilder()(dbPath, "execution-aware");
  expect(grammar.binding).toBeInstanceOf(NameBinding);
  const binding = grammar.binding!;
  const out: { sql: string; problem: string | undefined; error: string | undefined; mode: string | undefined }[] = [];
  let redrawn = 0;
  for (const [i, seed] of seeds.entries()) {
    const prompt = await prompts.promptFor(dbPath, questions[i % questions.length]!, undefined, "execution-aware");
    const r = await runRollout(
      policy,
      prompt,
      resolveRolloutOptions({
        ...OWN_ANSWERS,
        executor,
        dbPath,
        family: "execution-aware",
        grammar,
        temperature,
        seed,
        maxInteractions: 2,
        repairTables: false,
        repairLiterals: false,
        repairCoverage: false,
      }),
    );
    redrawn += r.binding?.redrawn ?? 0;
    for (const sql of statements(r)) {
      const ran = await executor.execute(dbPath, sql);
      out.push({ sql, problem: binding.check(sql), error: ran.ok ? undefined : ran.error.message, mode: r.binding?.mode });
    }
  }
  return { out, redrawn };
}

describe("name binding in the decoder", () => {
  it("the random model at temperature 1 keeps only SQL that can still bind, on the examples and on non-ASCII names", async () => {
    const policy = await createLlamaPolicy(testPolicyOptions({ contextSize: 4096, sequences: 2 }));
    try {
      let checked = 0;
      let redrawn = 0;
      const kept: string[] = [];
      for (const dbPath of [sets.find((s) => s.dbId === "retail")!.path, italian]) {
        const grammar = await createGrammarBuilder()(dbPath, "execution-aware");
        const binding = grammar.binding!;
        const prompt = await prompts.promptFor(dbPath, "How many are there?", undefined, "execution-aware");
        const spec = policy.renderChat(prompt.messages, { sharedPrefix: prompt.sharedPrefix });
        for (let seed = 1; seed <= 12; seed++) {
          const trajectory = await policy.start(spec);
          await trajectory.append("<final_sql>");
          const r = await trajectory.generate({
            stop: ["</final_sql>"],
            maxTokens: 48,
            temperature: 1,
            seed,
            grammar: grammar.finalBody!,
            admit: (text) => binding.admits(text, "final-body"),
          });
          await trajectory.release();
          redrawn += r.redrawn ?? 0;
          if (r.admitted !== "decoder") continue;
          checked++;
          // every token the decoder kept passed the check, so the text it stopped at still can bind
          if (!binding.admits(r.text, "final-body")) kept.push(r.text);
          if (r.stopReason === "stop" && binding.check(r.text.replace(/<\/final_sql>$/, "")) !== undefined) kept.push(r.text);
        }
      }
      expect(kept).toEqual([]);
      expect(checked).toBeGreaterThanOrEqual(6);
      // the random model's names are guesses: the check had work to do
      expect(redrawn).toBeGreaterThan(0);
      expect(policy.liveTrajectories()).toBe(0);
    } finally {
      await policy.close();
    }
  }, 180_000);

  it("the shipped starter, greedy with the repairs off, writes SQL whose names all bind on every example question", async () => {
    const policy = await createLlamaPolicy({ model: SHIPPED, gpu: "cpu", contextSize: 4096, sequences: 1, threads: 1 });
    try {
      const results = [];
      for (const set of sets)
        results.push(
          ...(
            await run(
              policy,
              set.path,
              set.questions.slice(0, 4).map((q) => q.question),
              [0, 0, 0, 0],
              0,
            )
          ).out,
        );
      const decoded = results.filter((s) => s.mode === "decoder");
      expect(decoded.length).toBeGreaterThan(6);
      expect(decoded.filter((s) => s.problem !== undefined)).toEqual([]);
      expect(decoded.filter((s) => s.error && /no such column/.test(s.error))).toEqual([]);
      // a rollout whose check gave up (a token refused too often) may still fail; most do not give up
      expect(decoded.length).toBeGreaterThanOrEqual(results.length / 2);
    } finally {
      await policy.close();
    }
  }, 240_000);

  it("the shipped starter, greedy with the repairs off, draws a FROM list again when a later column is in none of its tables, and fewer finals fail on a missing column", async () => {
    const policy = await createLlamaPolicy({ model: SHIPPED, gpu: "cpu", contextSize: 4096, sequences: 1, threads: 1 });
    const picks: [string, number[]][] = [
      ["retail", [7, 8]],
      ["clinic", [3, 10]],
      ["music", [0, 11]],
    ];
    try {
      const missing = { on: 0, off: 0 };
      let redraws = 0;
      const events: { event: RebindEvent; problem: string | undefined }[] = [];
      for (const [dbId, indexes] of picks) {
        const set = sets.find((s) => s.dbId === dbId)!;
        const built = await createGrammarBuilder()(set.path, "execution-aware");
        const binding = built.binding!.withMode("from");
        for (const index of indexes) {
          const question = set.questions[index]!.question;
          const prompt = await prompts.promptFor(set.path, question, undefined, "execution-aware");
          for (const redraw of [true, false]) {
            const { fromRest, ...rest } = built;
            const grammar: SegmentGrammars = { ...rest, binding, ...(redraw ? { fromRest } : {}) };
            const r = await runRollout(
              policy,
              prompt,
              resolveRolloutOptions({
                ...OWN_ANSWERS,
                executor,
                dbPath: set.path,
                family: "execution-aware",
                grammar,
                temperature: 0,
                maxInteractions: 2,
                repairTables: false,
                repairLiterals: false,
                repairCoverage: false,
                sink: (e) => {
                  if (e.type === "rebind") events.push({ event: e, problem: binding.check(e.sql) });
                },
              }),
            );
            if (redraw) redraws += r.binding?.fromRedraws ?? 0;
            else expect(r.binding?.fromRedraws).toBeUndefined();
            const ran = r.finalSql !== null ? await executor.execute(set.path, r.finalSql) : undefined;
            if (ran && !ran.ok && ran.error.category === "missing_column") missing[redraw ? "on" : "off"]++;
          }
        }
      }
      expect(redraws).toBeGreaterThan(0);
      expect(events.length).toBe(redraws);
      // each event names the SQL as first drawn, which did not bind
      for (const e of events) expect(e.problem, e.event.sql).toBeDefined();
      expect(missing.on).toBeLessThan(missing.off);
    } finally {
      await policy.close();
    }
  }, 300_000);
});

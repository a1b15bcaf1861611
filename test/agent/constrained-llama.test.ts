/**
 * Constrained decoding through real node-llama-cpp with the tiny random model (issue 3): its text is
 * noise, so whatever structure the rollouts have comes from the schema grammar. Ten rollouts sampled
 * at temperature 1 on the retail example database must stay inside the tag template, end with a
 * closed final answer inside the default token budget, and name no identifier outside the schema.
 * bench/constrained.ts runs the same with 100 rollouts, next to the unconstrained rate.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  checkIdentifiers,
  formatCheck,
  runRollout,
  type BuiltPrompt,
  type SchemaNames,
  type SegmentGrammars,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../src/agent/index.js";
import { createGrammarBuilder, createPromptBuilder, schemaNames, type PromptBuilder } from "../../src/decoding/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { type ExampleSet } from "../../src/examples/testing.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { ExecutorPool, loadSchema } from "../../src/sql/index.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const ROLLOUTS = 10;

let dir: string;
let policy: Policy;
let executor: ExecutorPool;
let prompts: PromptBuilder;
let retail: ExampleSet;
let names: SchemaNames;
let grammar: SegmentGrammars;
let built: BuiltPrompt[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-constrained-"));
  const sets = await buildExamples(join(dir, "examples"));
  retail = sets.find((s) => s.dbId === "retail")!;
  await ensureTestModel();
  policy = await createLlamaPolicy(testPolicyOptions({ contextSize: 4096, sequences: 2 }));
  executor = new ExecutorPool({ workers: 1 });
  prompts = createPromptBuilder({ indexDir: join(dir, "indexes") });
  names = schemaNames(loadSchema(retail.path));
  grammar = await createGrammarBuilder()(retail.path, "execution-aware");
  built = await Promise.all(retail.questions.slice(0, 3).map((q) => prompts.promptFor(retail.path, q.question, q.evidence || undefined, "execution-aware")));
});

afterAll(async () => {
  prompts?.close();
  await policy?.close();
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("constrained rollouts with the tiny random model", () => {
  it(`${ROLLOUTS} rollouts at temperature 1: 100% tag-format compliance, 0 identifiers outside the schema`, async () => {
    let formatOk = 0;
    let statements = 0;
    let executed = 0;
    const unknown: string[] = [];
    const problems: string[] = [];
    for (let i = 0; i < ROLLOUTS; i++) {
      const r = await runRollout(
        policy,
        built[i % built.length]!,
        resolveRolloutOptions({
          ...OWN_ANSWERS,
          executor,
          dbPath: retail.path,
          family: "execution-aware",
          grammar,
          temperature: 1,
          seed: 100 + i,
          maxInteractions: 1,
        }),
      );
      const verdict = formatCheck(r.text, "execution-aware");
      if (verdict.ok) formatOk++;
      else problems.push(`seed ${100 + i} (${r.stopReason}): ${verdict.problems.join("; ")}`);
      expect(r.stopReason, `seed ${100 + i}`).toBe("final");
      expect(r.truncated).toBe(false);
      for (const sql of [...r.probes.map((p) => p.sql), ...(r.finalSql !== null ? [r.finalSql] : [])]) {
        statements++;
        unknown.push(...checkIdentifiers(sql, names));
      }
      executed += r.probes.filter((p) => p.result !== null && !p.repeated).length;
    }
    expect(problems).toEqual([]);
    expect(formatOk).toBe(ROLLOUTS);
    expect(unknown).toEqual([]);
    expect(statements).toBeGreaterThanOrEqual(ROLLOUTS);
    expect(executed).toBeGreaterThan(0);
    expect(policy.liveTrajectories()).toBe(0);
  }, 90_000);
});

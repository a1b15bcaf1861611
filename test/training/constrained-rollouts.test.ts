/**
 * GRPO rollouts under the served grammars (`constrained: true`), with the shipped starter through the real llama.cpp
 * policy on the example databases: every name a sampled answer writes is one of the schema's, each rollout is marked
 * constrained, and its experience record leaves the old log-probs to the learner.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkIdentifiers } from "../../src/agent/index.js";
import { createPromptBuilder, createServedGrammarFor, schemaNames } from "../../src/decoding/index.js";
import { buildExamples, QUESTIONS_FILE } from "../../src/examples/index.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { ExecutorPool, loadSchema } from "../../src/sql/index.js";
import { runGroup, type TrainingQuestion } from "../../src/training/index.js";
import { toExperienceRecord } from "../../src/training/testing.js";

const MODEL = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "reex-constrained-"));
let policy: Policy;
const executor = new ExecutorPool({ workers: 1 });
const prompts = createPromptBuilder({ indexDir: join(dir, "indexes") });

beforeAll(async () => {
  await buildExamples(dir);
  policy = await createLlamaPolicy({ model: MODEL, gpu: "cpu", contextSize: 4096, sequences: 4, threads: 1 });
}, 300_000);
afterAll(async () => {
  await policy?.close();
  await executor.close();
  prompts.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("constrained GRPO rollouts", () => {
  it("write only the schema's names, are marked constrained, and leave their old log-probs to the learner", { timeout: 600_000 }, async () => {
    const items = JSON.parse(readFileSync(join(dir, QUESTIONS_FILE), "utf8")) as {
      question_id: number;
      db_id: string;
      question: string;
      evidence?: string;
      SQL: string;
    }[];
    const grammarFor = createServedGrammarFor({ indexDir: join(dir, "indexes") });
    let answered = 0;
    for (const item of items.slice(0, 3)) {
      const q: TrainingQuestion = {
        questionId: item.question_id,
        dbPath: join(dir, "databases", item.db_id, `${item.db_id}.sqlite`),
        question: item.question,
        ...(item.evidence ? { evidence: item.evidence } : {}),
        goldSql: item.SQL,
      };
      const group = await runGroup(q, {
        policy,
        executor,
        promptFor: prompts.promptFor,
        groupSize: 4,
        temperature: 1.0,
        maxInteractions: 3,
        maxTokens: 300,
        seed: 7,
        reward: { preset: "outcome" },
        grammarFor,
      });
      const names = schemaNames(loadSchema(q.dbPath));
      for (const r of group.rollouts) {
        expect(r.constrained).toBe(true);
        for (const sql of [...r.rollout.probes.map((p) => p.sql), ...(r.rollout.finalSql ? [r.rollout.finalSql] : [])])
          expect(checkIdentifiers(sql, names)).toEqual([]);
        if (r.rollout.finalSql) answered++;
        const record = toExperienceRecord(r);
        expect(record.old_logprobs).toBeNull();
        expect(record.mask.some((m) => m === 1)).toBe(true);
      }
    }
    expect(answered).toBeGreaterThan(0);
  });
});

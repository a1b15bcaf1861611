/**
 * Rejection sampling (issue #61's control arm) with the shipped starter through the real llama.cpp policy on the example
 * databases: only answers the reward counts right become traces, the counts add up, and a pass resumes where one stopped.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { extractFinal } from "../../src/agent/index.js";
import { compareResults } from "../../src/eval/index.js";
import { buildExamples, QUESTIONS_FILE } from "../../src/examples/index.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { parseTrainConfig, runRejectionSampling } from "../../src/training/index.js";

const MODEL = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "reex-rejection-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("runRejectionSampling", () => {
  it("keeps only answers right on the gold, counts every sampled answer, and a resumed pass samples a group as an unbroken one did", {
    timeout: 600_000,
  }, async () => {
    await buildExamples(dir);
    const dataset = join(dir, QUESTIONS_FILE);
    const config = parseTrainConfig(
      {
        model: MODEL,
        runDir: join(dir, "run"),
        data: { dataset, dbRoot: join(dir, "databases"), limit: 12 },
        groupSize: 4,
        temperature: 0.7,
        maxTokens: 300,
        maxInteractions: 3,
        seed: 1,
        reward: { preset: "outcome", rule: "correctness-first" },
        policy: { gpu: "cpu", contextSize: 2048, sequences: 4, threads: 1 },
      },
      "grpo",
      dir,
    );
    const done: number[] = [];
    const result = await runRejectionSampling(config, { groups: 4, onGroup: (_, n) => done.push(n) });
    expect(result.profile).toBe("reex");
    expect(done).toEqual([1, 2, 3, 4]);
    expect(result.groups.map((g) => [g.index, g.sampled])).toEqual([0, 1, 2, 3].map((i) => [i, 4]));
    for (const g of result.groups) expect(g.traces.length).toBeLessThanOrEqual(g.right);
    expect(new Set(result.groups.map((g) => g.questionId)).size).toBe(4);
    const traces = result.groups.flatMap((g) => g.traces);
    expect(traces.length).toBeGreaterThan(0);

    const items = JSON.parse(readFileSync(dataset, "utf8")) as { question_id: number; db_id: string; question: string; SQL: string }[];
    const executor = new ExecutorPool({ workers: 1 });
    try {
      for (const trace of traces) {
        const item = items.find((q) => q.question_id === trace.question_id)!;
        expect(trace.messages!.map((m) => m.role)).toEqual(["system", "user"]);
        expect(trace.messages![1]!.content).toContain(item.question);
        const db = join(dir, "databases", item.db_id, `${item.db_id}.sqlite`);
        const sql = extractFinal(trace.response).sql;
        expect(sql).toBeTruthy();
        expect(compareResults(await executor.execute(db, item.SQL), await executor.execute(db, sql!), item.SQL).bird).toBe(true);
      }
    } finally {
      await executor.close();
    }

    const rest = await runRejectionSampling(config, { groups: 4, start: 3 });
    expect(rest.groups).toEqual([result.groups[3]]);
  });
});

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { experiencePath, readExperience, sanitizeLogprobs, writeExperience, type ExperienceRecord } from "../../src/training/testing.js";

const dir = mkdtempSync(join(tmpdir(), "reex-exp-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const record = (over: Partial<ExperienceRecord> = {}): ExperienceRecord => ({
  prompt_tokens: [1, 2, 3],
  tokens: [10, 11, 12, 13],
  mask: [1, 0, 0, 1],
  old_logprobs: [-0.5, 0, 0, -1.25],
  advantage: 0.75,
  reward: 7.5,
  components: { format: 1, em: 0, exec: 2, entity: 1, exploration: 0.5 },
  truncated: false,
  interactions: 1,
  question_id: "q1",
  final_sql: "SELECT 1",
  ...over,
});

describe("experience files", () => {
  it("names step files <run>/experience/step-000001.jsonl", () => {
    expect(experiencePath("/runs/a", 1)).toBe(join("/runs/a", "experience", "step-000001.jsonl"));
    expect(experiencePath("/runs/a", 123456)).toBe(join("/runs/a", "experience", "step-123456.jsonl"));
  });

  it("round-trips records through one JSONL line each, with the learner's field names", async () => {
    const file = experiencePath(dir, 1);
    const records = [record(), record({ question_id: 7, old_logprobs: null, truncated: true, advantage: -1 })];
    await writeExperience(file, records);
    const lines = readFileSync(file, "utf8").trim().split("\n");
    expect(lines).toHaveLength(2);
    expect(Object.keys(JSON.parse(lines[0]!))).toEqual(
      expect.arrayContaining([
        "prompt_tokens",
        "tokens",
        "mask",
        "old_logprobs",
        "advantage",
        "reward",
        "components",
        "truncated",
        "interactions",
        "question_id",
      ]),
    );
    expect(await readExperience(file)).toEqual(records);
  });

  it("refuses a record whose mask does not line up with its tokens, or a positive sampled log-prob", async () => {
    await expect(writeExperience(join(dir, "bad.jsonl"), [record({ mask: [1, 0] })])).rejects.toThrow(/mask/);
    const file = join(dir, "bad2.jsonl");
    writeFileSync(file, JSON.stringify(record({ old_logprobs: [0.5, 0, 0, -1] })) + "\n");
    await expect(readExperience(file)).rejects.toMatchObject({ code: "DATASET_INVALID" });
  });

  it("sanitises log-probs: 0 on injected tokens, null when a sampled one is not finite", () => {
    expect(sanitizeLogprobs([-0.1, -9, -0.2], [1, 0, 1])).toEqual([-0.1, 0, -0.2]);
    expect(sanitizeLogprobs([-0.1, -Infinity], [1, 1])).toBeNull();
  });
});

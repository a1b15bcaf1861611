/**
 * End to end: `reex train sft --profile skyrl-sql` with the tiny GGUF and the real Python learner on
 * SkyRL-SQL traces: the experience masks the `<observation>` tokens (as the tiny model tokenises
 * them) and the learner updates the weights from the rest.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { run } from "../../src/cli/train.js";
import { createLlamaPolicy } from "../../src/policy/index.js";
import { learnerDir, parseExperience, readMetrics } from "../../src/training/testing.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const PYTHON = "/usr/bin/python3";

function learnerProblem(): string | null {
  if (!existsSync(join(learnerDir(), "reex_learner", "__init__.py"))) return `the Python learner package is not at ${learnerDir()}`;
  const torch = spawnSync(PYTHON, ["-c", "import torch"], { encoding: "utf8" });
  if (torch.error) return `${PYTHON} cannot run (${torch.error.message})`;
  if (torch.status !== 0) return `${PYTHON} cannot import torch (run bash scripts/install-learner-deps.sh)`;
  return null;
}

const problem = learnerProblem();
const skip = problem !== null && !process.env.CI;
const name = skip
  ? `⚠⚠⚠ SKIPPED — ${problem} — reex train sft in the skyrl-sql profile with the tiny model and the Python learner NOT TESTED ⚠⚠⚠`
  : "reex train sft --profile skyrl-sql: the tiny model's experience masks exactly the <observation> tokens and the learner changes the weights";

const dir = mkdtempSync(join(tmpdir(), "reex-train-profile-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

const OBSERVATION = "<observation>\n   COUNT(*)\n0         5\n</observation>\n";
const RESPONSE = `<think>Count the singers.</think>\n<sql>SELECT COUNT(*) FROM singer</sql>${OBSERVATION}<think>Five.</think>\n<solution>SELECT COUNT(*) FROM singer</solution>`;

describe("reex train in a model's own protocol (end to end)", () => {
  it.skipIf(skip)(name, { timeout: 600_000 }, async () => {
    const model = await ensureTestModel();
    const traces = join(dir, "skyrl-traces.jsonl");
    writeFileSync(traces, `${JSON.stringify({ messages: [{ role: "user", content: "How many singers?" }], response: RESPONSE })}\n`);
    const configFile = join(dir, "sft.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        model,
        runDir: "run",
        sft: { traces },
        steps: 1,
        questionsPerStep: 1,
        learningRate: 1e-3,
        policy: { gpu: "cpu", contextSize: 2048, sequences: 2, threads: 1 },
        learner: { python: PYTHON, device: "cpu", timeoutMs: 300_000 },
      }),
    );
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    const err: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: unknown) => (err.push(String(chunk)), true));
    expect(await run(["sft", "--config", configFile, "--profile", "skyrl-sql", "--quiet"])).toBe(0);
    expect(err.join("")).toContain("profile skyrl-sql (set by the training config's profile)");

    const runDir = join(dir, "run");
    const [record] = parseExperience(readFileSync(join(runDir, "experience", "step-000001.jsonl"), "utf8"));
    const policy = await createLlamaPolicy(testPolicyOptions({ model, sequences: 1 }));
    try {
      const masked = record!.tokens.filter((_, i) => record!.mask[i] === 0);
      const kept = record!.tokens.filter((_, i) => record!.mask[i] === 1);
      expect(masked).toEqual(policy.tokenize(OBSERVATION));
      expect(policy.detokenize(masked)).toBe(OBSERVATION);
      expect(policy.detokenize(kept)).toBe(`${RESPONSE.replace(OBSERVATION, "")}<|im_end|>`);
    } finally {
      await policy.close();
    }
    expect(record!.interactions).toBe(1);
    expect(typeof readMetrics(join(runDir, "metrics.jsonl"))[0]!.loss).toBe("number");
    expect(readFileSync(join(runDir, "checkpoints", "step-000001.gguf")).equals(readFileSync(model))).toBe(false);
  });
});

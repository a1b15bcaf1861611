/**
 * End to end: `reex train grpo` for 2 steps with the tiny random GGUF on the example databases,
 * through the real llama.cpp policy and the real Python learner; then `--resume` to a third step.
 * The same for a LoRA adapter on the unchanged tiny model, and `reex train sft`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { run } from "../../src/cli/train.js";
import { buildExamples, QUESTIONS_FILE } from "../../src/examples/index.js";
import { learnerDir, parseExperience, readMetrics } from "../../src/training/testing.js";
import { ensureTestModel } from "../helpers/model.js";

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
  ? `⚠⚠⚠ SKIPPED — ${problem} — reex train grpo end to end with the tiny model and the Python learner NOT TESTED ⚠⚠⚠`
  : "reex train grpo: 2 steps with the tiny model on the example databases write checkpoints, metrics and the report, then --resume continues";

const dir = mkdtempSync(join(tmpdir(), "reex-train-e2e-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

describe("reex train (end to end)", () => {
  it.skipIf(skip)(name, { timeout: 600_000 }, async () => {
    const model = await ensureTestModel();
    const examples = join(dir, "examples");
    await buildExamples(examples);
    const configFile = join(dir, "grpo.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        description: "end-to-end test run",
        model,
        runDir: "run",
        data: { dataset: join(examples, QUESTIONS_FILE), dbRoot: join(examples, "databases"), limit: 6 },
        eval: { dataset: join(examples, QUESTIONS_FILE), dbRoot: join(examples, "databases"), offset: 40, limit: 2, every: 2 },
        steps: 2,
        questionsPerStep: 2,
        groupSize: 2,
        maxTokens: 24,
        maxInteractions: 2,
        learningRate: 1e-4,
        klBeta: 0.01,
        checkpointEvery: 1,
        rolloutConcurrency: 2,
        policy: { gpu: "cpu", contextSize: 4096, sequences: 4, threads: 1 },
        learner: { python: PYTHON, device: "cpu", timeoutMs: 300_000 },
      }),
    );
    const out: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);

    expect(await run(["grpo", "--config", configFile, "--quiet"])).toBe(0);
    const runDir = join(dir, "run");
    expect(out.join("\n")).toContain(`wrote ${join(runDir, "report.html")}`);
    expect(
      readdirSync(join(runDir, "checkpoints"))
        .filter((f) => f.endsWith(".gguf"))
        .sort(),
    ).toEqual(["step-000001.gguf", "step-000002.gguf"]);
    const records = [1, 2].flatMap((s) => parseExperience(readFileSync(join(runDir, "experience", `step-00000${s}.jsonl`), "utf8")));
    expect(records).toHaveLength(8);
    for (const r of records) {
      expect(r.prompt_tokens.length).toBeGreaterThan(50);
      expect(r.mask).toHaveLength(r.tokens.length);
      expect(r.old_logprobs).not.toBeNull();
    }
    // A random model's rollouts often all earn the same reward: zero advantages, so no update.
    const changed = !readFileSync(join(runDir, "checkpoints", "step-000002.gguf")).equals(readFileSync(model));
    expect(changed).toBe(records.some((r) => r.advantage !== 0));

    let rows = readMetrics(join(runDir, "metrics.jsonl"));
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2]);
    for (const r of rows.slice(1)) {
      expect(typeof r.reward_mean).toBe("number");
      expect(Object.keys(r.components)).toEqual(["format", "em", "exec", "entity", "exploration"]);
      expect(typeof r.loss).toBe("number");
      expect(typeof r.grad_norm).toBe("number");
      expect(typeof r.kl).toBe("number");
      expect(typeof r.clip_frac).toBe("number");
      expect(r.response_tokens).toBeGreaterThan(0);
      // the learner scores the sampled tokens as llama.cpp sampled them (f32 weights, llama.cpp's f16 KV cache)
      expect(r.old_logprob_abs_diff).toBeGreaterThanOrEqual(0);
      expect(r.old_logprob_abs_diff).toBeLessThan(0.01);
      expect(typeof r.informative_share).toBe("number");
    }
    // float32 masters are carried from step to step and saved with each checkpoint
    expect(existsSync(join(runDir, "master.pt"))).toBe(true);
    expect(existsSync(join(runDir, "checkpoints", "step-000002.master"))).toBe(true);
    expect(rows[2]!.learner.master_loaded).toBe(true);
    expect(typeof rows[2]!.heldout_ex).toBe("number");
    const html = readFileSync(join(runDir, "report.html"), "utf8");
    expect(html).toContain("<svg");
    expect(html).toContain('id="reward-mean"');

    out.length = 0;
    expect(await run(["grpo", "--config", configFile, "--resume", "--steps", "3", "--quiet"])).toBe(0);
    expect(out.join("\n")).toContain("from step 2 to step 3");
    rows = readMetrics(join(runDir, "metrics.jsonl"));
    expect(rows.map((r) => r.step)).toEqual([0, 1, 2, 3]);
    expect(existsSync(join(runDir, "checkpoints", "step-000003.gguf"))).toBe(true);
    const learnerLog = readFileSync(join(runDir, "learner", "step-000003.log"), "utf8");
    expect(learnerLog).toContain(join(runDir, "checkpoints", "step-000002.gguf"));
  });

  it.skipIf(skip)(
    skip
      ? name.replace("grpo", "grpo with learner.lora")
      : "reex train grpo with learner.lora: each step writes an adapter, the next continues from it, and the base file stays as it was",
    { timeout: 300_000 },
    async () => {
      const model = await ensureTestModel();
      const baseBytes = readFileSync(model);
      const examples = join(dir, "examples-lora");
      await buildExamples(examples);
      const configFile = join(dir, "grpo-lora.json");
      writeFileSync(
        configFile,
        JSON.stringify({
          model,
          runDir: "run-lora",
          data: { dataset: join(examples, QUESTIONS_FILE), dbRoot: join(examples, "databases"), limit: 6 },
          steps: 2,
          questionsPerStep: 2,
          groupSize: 2,
          maxTokens: 24,
          maxInteractions: 2,
          learningRate: 1e-3,
          klBeta: 0.01,
          checkpointEvery: 1,
          rolloutConcurrency: 2,
          policy: { gpu: "cpu", contextSize: 4096, sequences: 4, threads: 1 },
          learner: { python: PYTHON, device: "cpu", timeoutMs: 120_000, lora: { rank: 4 } },
        }),
      );
      const out: string[] = [];
      vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
      vi.spyOn(process.stderr, "write").mockImplementation(() => true);
      expect(await run(["grpo", "--config", configFile, "--quiet"])).toBe(0);
      const runDir = join(dir, "run-lora");
      const adapter = (step: number): string => join(runDir, "checkpoints", `step-00000${step}.lora.gguf`);
      for (const step of [1, 2]) {
        const bytes = readFileSync(adapter(step));
        expect(bytes.subarray(0, 4).toString()).toBe("GGUF");
        expect(bytes.includes("adapter.lora.alpha")).toBe(true);
      }
      expect(readFileSync(model).equals(baseBytes)).toBe(true);
      expect(readdirSync(join(runDir, "models"))).toEqual(["step-000002.lora.gguf"]);
      expect(out.join("\n")).toContain(`lora: ${join(runDir, "models", "step-000002.lora.gguf")}`);
      const request2 = JSON.parse(readFileSync(join(runDir, "learner", "step-000002.request.json"), "utf8"));
      expect(request2.lora.in).toBe(join(runDir, "models", "step-000001.lora.gguf"));
      expect(request2.paths).toMatchObject({ out: null, master: null, ref: null });
      const rows = readMetrics(join(runDir, "metrics.jsonl"));
      expect(rows.map((r) => r.step)).toEqual([1, 2]);
      for (const r of rows) {
        expect(r.learner.lora).toMatchObject({ rank: 4, alpha: 8 });
        expect(typeof r.kl).toBe("number");
        // step 2 sampled from base + adapter in llama.cpp; the learner scores the same tokens alike
        expect(r.old_logprob_abs_diff).toBeGreaterThanOrEqual(0);
        expect(r.old_logprob_abs_diff).toBeLessThan(0.01);
      }
    },
  );

  it.skipIf(skip)(
    skip ? name.replace("grpo", "sft") : "reex train sft: the learner's new weights differ from the initial ones and the next step starts from them",
    { timeout: 600_000 },
    async () => {
      const model = await ensureTestModel();
      const traces = join(dir, "traces.jsonl");
      writeFileSync(
        traces,
        [
          {
            messages: [{ role: "user", content: "How many singers?" }],
            response:
              "<think>count</think>\n<intermediate_sql>SELECT COUNT(*) FROM singer</intermediate_sql><result>\nCOUNT(*)\n5\n</result>\n<final_sql>SELECT COUNT(*) FROM singer</final_sql>",
          },
          { prompt: "<|im_start|>user\nNames?<|im_end|>\n<|im_start|>assistant\n", response: "<final_sql>SELECT name FROM singer</final_sql>" },
        ]
          .map((t) => JSON.stringify(t))
          .join("\n"),
      );
      const configFile = join(dir, "sft.json");
      writeFileSync(
        configFile,
        JSON.stringify({
          model,
          runDir: "run-sft",
          sft: { traces },
          steps: 2,
          questionsPerStep: 2,
          learningRate: 1e-3,
          checkpointEvery: 2,
          policy: { gpu: "cpu", contextSize: 2048, sequences: 2, threads: 1 },
          learner: { python: PYTHON, device: "cpu", timeoutMs: 300_000 },
        }),
      );
      vi.spyOn(console, "log").mockImplementation(() => undefined);
      vi.spyOn(process.stderr, "write").mockImplementation(() => true);
      expect(await run(["sft", "--config", configFile, "--quiet"])).toBe(0);
      const runDir = join(dir, "run-sft");
      expect(readFileSync(join(runDir, "checkpoints", "step-000002.gguf")).equals(readFileSync(model))).toBe(false);
      expect(readFileSync(join(runDir, "learner", "step-000002.log"), "utf8")).toContain(join(runDir, "models", "step-000001.gguf"));
      const rows = readMetrics(join(runDir, "metrics.jsonl"));
      expect(rows.map((r) => r.step)).toEqual([1, 2]);
      expect(rows[1]!.loss).toBeLessThan(rows[0]!.loss!);
      const records = parseExperience(readFileSync(join(runDir, "experience", "step-000001.jsonl"), "utf8"));
      expect(records.some((r) => r.mask.includes(0))).toBe(true);
    },
  );
});

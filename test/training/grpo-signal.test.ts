/**
 * Learnability: on the tiny test model, real GRPO (llama.cpp rollouts, the Python learner with f32
 * masters, hot reloads) raises a learnable reward by a set margin and beats the same run with its
 * advantages shuffled (src/training/signal.ts; `npx tsx bench/grpo-signal.ts` prints the same figures).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runSignalCheck } from "../../src/training/index.js";
import { learnerDir } from "../../src/training/testing.js";
import { ensureTestModel } from "../helpers/model.js";

const PYTHON = "/usr/bin/python3";
const MARGIN = 0.1;

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
  ? `⚠⚠⚠ SKIPPED — ${problem} — GRPO learnability (real vs shuffled advantages) NOT TESTED ⚠⚠⚠`
  : `8 GRPO steps with real advantages raise the mean reward by ≥ ${MARGIN} and beat the same run with shuffled advantages by ≥ ${MARGIN}`;

const dir = mkdtempSync(join(tmpdir(), "reex-grpo-signal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("GRPO learnability (tiny model, real learner)", () => {
  it.skipIf(skip)(name, { timeout: 900_000 }, async () => {
    const r = await runSignalCheck({ model: await ensureTestModel(), workDir: dir, python: PYTHON, steps: 8, seed: 0 });
    expect(r.real.start).toBe(r.shuffled.start);
    expect(r.real.gain).toBeGreaterThanOrEqual(MARGIN);
    expect(r.real.gain - r.shuffled.gain).toBeGreaterThanOrEqual(MARGIN);
    // every step was on-policy: the learner scored the sampled tokens as llama.cpp did
    for (const d of [...r.real.oldLogprobAbsDiff, ...r.shuffled.oldLogprobAbsDiff]) expect(d).toBeLessThan(0.01);
    expect(r.real.oldLogprobAbsDiff).toHaveLength(8);
  });
});

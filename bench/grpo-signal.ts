/**
 * GRPO signal check outside the test suite: the same run as test/training/grpo-signal.test.ts (the tiny
 * random model learns to sample a fixed half of its vocabulary more often, with real advantages, and
 * the same run with shuffled advantages beside it; src/training/signal.ts). The last line is
 * `real +X shuffled +Y`: the mean-reward gains, on fixed evaluation seeds, over the run.
 *
 *   npx tsx bench/grpo-signal.ts [--model PATH] [--steps N] [--lr X] [--seed N] [--control]
 *
 * `--control` trains the "real" arm on shuffled advantages too: a check that the gain needs the signal.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildTinyModel, writeFileAtomic } from "../src/policy/tooling.js";
import { runSignalCheck } from "../src/training/index.js";

const { values } = parseArgs({
  options: {
    model: { type: "string" },
    steps: { type: "string", default: "8" },
    lr: { type: "string" },
    seed: { type: "string", default: "0" },
    control: { type: "boolean", default: false },
  },
});

const model = values.model ?? fileURLToPath(new URL("./.output/tiny.gguf", import.meta.url));
if (!values.model) await writeFileAtomic(model, buildTinyModel({ seed: 1 }));
const workDir = mkdtempSync(join(tmpdir(), "reex-grpo-signal-"));
try {
  const r = await runSignalCheck({
    model,
    workDir,
    steps: Number(values.steps),
    seed: Number(values.seed),
    ...(values.lr ? { learningRate: Number(values.lr) } : {}),
    ...(values.control ? { realArm: "shuffled" as const } : {}),
    log: (l) => console.error(l),
  });
  const f = (x: number): string => `${x >= 0 ? "+" : ""}${x.toFixed(3)}`;
  for (const a of [r.real, r.shuffled]) {
    console.log(
      `${a.arm}${a.arm === "real" && values.control ? " (control: shuffled too)" : ""}: start ${a.start.toFixed(3)} end ${a.end.toFixed(3)} per-step ${a.curve.map((x) => x.toFixed(3)).join(" ")} |Δ old logp| max ${Math.max(...a.oldLogprobAbsDiff).toExponential(2)}`,
    );
  }
  console.log(`${r.seconds.toFixed(0)} s`);
  console.log(`real ${f(r.real.gain)} shuffled ${f(r.shuffled.gain)}`);
} finally {
  rmSync(workDir, { recursive: true, force: true });
}

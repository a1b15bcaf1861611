/**
 * "It learns what it is trained on" (issue #28): from a start model, screen train questions (the
 * starter's synthetic data, or a BIRD-format `--dataset` with its `--db-root`, such as the real-data
 * pipeline's wikisql_train.json) for a pass rate between 0.2 and 0.8 over 8 samples, keep 32, then run the
 * recipe (examples/training/grpo-recipe.json) on exactly those questions twice — real advantages and
 * shuffled ones (`shuffleAdvantages`) — and compare each question's pass rate over 16 samples (T 1.0,
 * fixed seeds) before and after, with a paired-by-question bootstrap interval.
 *
 *   npx tsx lab/grpo-generalises/grpo-learns.ts [--model .reex/starter/sft.gguf] [--work .reex/grpo-learns] [--dbs 60]
 *       [--candidates 200] [--questions 32] [--steps 20] [--threads 2] [--seed 1]
 *       [--dataset DIR/wikisql_train.json --db-root DIR/databases] [--context 1024]
 *
 * Everything goes under --work (ignored by git): synth/, screen.json, train-32.json, real/ and shuffled/
 * (run folders with checkpoints), result.json. Progress on stderr; the last line is
 * `real +X shuffled +Y (pass-rate points over 16 samples)`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { asQuestion as toQuestion, type Bird, bootstrap, loadQuestions, log, passRates as sampledPassRates, runRecipeArm, spread } from "./grpo-common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: ".reex/starter/sft.gguf" },
    work: { type: "string", default: ".reex/grpo-learns" },
    dbs: { type: "string", default: "60" },
    candidates: { type: "string", default: "200" },
    questions: { type: "string", default: "32" },
    steps: { type: "string", default: "20" },
    threads: { type: "string", default: "2" },
    seed: { type: "string", default: "1" },
    dataset: { type: "string" },
    "db-root": { type: "string" },
    context: { type: "string", default: "1024" },
  },
});
const work = resolve(values.work!);
const model = resolve(values.model!);
const threads = Number(values.threads);
const contextSize = Number(values.context);
mkdirSync(work, { recursive: true });

const { all, dbRoot } = loadQuestions({ work, dataset: values.dataset, dbRoot: values["db-root"], seed: Number(values.seed), dbs: Number(values.dbs) });
const candidates = spread(all, Number(values.candidates));
const asQuestion = (r: Bird) => toQuestion(r, dbRoot);
const passRates = (gguf: string, qs: ReturnType<typeof asQuestion>[], samples: number, salt: number) =>
  sampledPassRates(gguf, qs, samples, salt, { contextSize, threads, indexDir: join(work, "indexes"), log });

const screenFile = join(work, "screen.json");
let screen: Record<string, number>;
if (existsSync(screenFile)) screen = JSON.parse(readFileSync(screenFile, "utf8")) as Record<string, number>;
else {
  log(`screening ${candidates.length} train questions (8 samples each) with ${model}`);
  screen = Object.fromEntries(await passRates(model, candidates.map(asQuestion), 8, 1));
  writeFileSync(screenFile, JSON.stringify(screen, null, 2));
}
const picked = candidates.filter((r) => screen[r.question_id]! >= 0.2 && screen[r.question_id]! <= 0.8).slice(0, Number(values.questions));
log(`screened: ${picked.length} of ${candidates.length} questions have a pass rate in [0.2, 0.8]`);
if (picked.length === 0) throw new Error("no question to train on");
const trainFile = join(work, `train-${picked.length}.json`);
writeFileSync(trainFile, JSON.stringify(picked, null, 2));
const qs = picked.map(asQuestion);

log(`start pass rates over 16 samples`);
const start = await passRates(model, qs, 16, 2);
const ends: Record<string, Map<string | number, number>> = {};
for (const arm of ["real", "shuffled"] as const) {
  const runDir = join(work, arm);
  log(`${arm} arm: ${values.steps} steps → ${runDir}`);
  const shuffled = arm === "shuffled";
  const result = await runRecipeArm({ model, runDir, trainFile, dbRoot, steps: Number(values.steps), shuffled, checkpointEvery: 5, contextSize, threads });
  log(`${arm} arm done; end pass rates over 16 samples`);
  ends[arm] = await passRates(result.model, qs, 16, 2);
}

const ids = qs.map((q) => q.questionId);
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const dReal = ids.map((id) => ends.real!.get(id)! - start.get(id)!);
const dShuf = ids.map((id) => ends.shuffled!.get(id)! - start.get(id)!);
const dVs = ids.map((id) => ends.real!.get(id)! - ends.shuffled!.get(id)!);
const result = {
  model,
  questions: ids.length,
  start: mean(ids.map((id) => start.get(id)!)),
  real: { end: mean(ids.map((id) => ends.real!.get(id)!)), gain: mean(dReal), ci95: bootstrap(dReal) },
  shuffled: { end: mean(ids.map((id) => ends.shuffled!.get(id)!)), gain: mean(dShuf), ci95: bootstrap(dShuf) },
  realMinusShuffled: { mean: mean(dVs), ci95: bootstrap(dVs) },
  perQuestion: ids.map((id) => ({ id, start: start.get(id), real: ends.real!.get(id), shuffled: ends.shuffled!.get(id) })),
};
writeFileSync(join(work, "result.json"), JSON.stringify(result, null, 2));
console.log(JSON.stringify({ ...result, perQuestion: undefined }, null, 2));
const pts = (x: number): string => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`;
console.log(`real ${pts(result.real.gain)} shuffled ${pts(result.shuffled.gain)} (pass-rate points over 16 samples)`);

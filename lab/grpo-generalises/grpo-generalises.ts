/**
 * "It generalises" (issue #28): from a start model, screen a spread of train questions for a pass rate in
 * [0.2, 0.8] over 8 samples (the recipe's curriculum), run the recipe (examples/training/grpo-recipe.json)
 * over every kept question with real and with shuffled advantages, then score held-out questions greedily
 * (`reex eval`) with the start model and each arm's checkpoint, paired against the start (McNemar, 95% interval).
 *
 *   npx tsx lab/grpo-generalises/grpo-generalises.ts --heldout FILE --heldout-db-root DIR [--model .reex/starter/sft.gguf]
 *       [--work .reex/grpo-generalises] [--dataset FILE --db-root DIR | --dbs 60 --seed 1] [--candidates 320]
 *       [--steps 40] [--threads 2 (the arms' and the screening's; the held-out evaluations take reex's default, cores − 1)] [--context 1024] [--screen-only | --arm real|shuffled | --report] [--at-step N]
 *
 * With neither --arm nor --report it does everything in turn. To use both cores for both arms at once, run
 * `--screen-only`, then `--arm real --threads 1` and `--arm shuffled --threads 1` side by side (each screens from the same cache),
 * stop them when time is up, then `--report`: it scores the highest checkpoint step both arms reached (or
 * --at-step). Everything goes under --work (ignored by git): screen.json, train-N.json, real/ and shuffled/ run
 * folders (a checkpoint every step; a rerun resumes), heldout-<name>/ eval reports, result.json. The last line is
 * `held-out greedy EX start X real +D (p P) shuffled +D (p P) at step N; on trained families real +D (p P) shuffled +D (p P)`
 * (the second pair: held-out questions on databases of a family the train questions cover, db_id less its _NNNN).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { type ItemScore, pairedDifference } from "../../src/eval/index.js";
import { asQuestion, loadQuestions, log, passRates, runRecipeArm, spread } from "./grpo-common.js";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: ".reex/starter/sft.gguf" },
    work: { type: "string", default: ".reex/grpo-generalises" },
    dbs: { type: "string", default: "60" },
    seed: { type: "string", default: "1" },
    dataset: { type: "string" },
    "db-root": { type: "string" },
    heldout: { type: "string" },
    "heldout-db-root": { type: "string" },
    candidates: { type: "string", default: "320" },
    steps: { type: "string", default: "40" },
    threads: { type: "string", default: "2" },
    context: { type: "string", default: "1024" },
    arm: { type: "string" },
    report: { type: "boolean", default: false },
    "screen-only": { type: "boolean", default: false },
    "at-step": { type: "string" },
  },
});
if (values.heldout === undefined || values["heldout-db-root"] === undefined) throw new Error("--heldout FILE and --heldout-db-root DIR are required");
if (values.arm !== undefined && values.arm !== "real" && values.arm !== "shuffled") throw new Error("--arm is real or shuffled");
const work = resolve(values.work!);
const model = resolve(values.model!);
const threads = Number(values.threads);
const contextSize = Number(values.context);
mkdirSync(work, { recursive: true });
const arms = values.arm !== undefined ? [values.arm as "real" | "shuffled"] : values.report ? [] : (["real", "shuffled"] as const);

if (arms.length > 0 || values["screen-only"]) {
  const { all, dbRoot } = loadQuestions({ work, dataset: values.dataset, dbRoot: values["db-root"], seed: Number(values.seed), dbs: Number(values.dbs) });
  const candidates = spread(all, Number(values.candidates));
  // Screening is cached by question id and uses lab/grpo-generalises/grpo-learns.ts's seeds, so the two benches share screen.json.
  const screenFile = join(work, "screen.json");
  const screen = existsSync(screenFile) ? (JSON.parse(readFileSync(screenFile, "utf8")) as Record<string, number>) : {};
  const missing = candidates.filter((r) => screen[r.question_id] === undefined);
  if (missing.length > 0) {
    log(`screening ${missing.length} train questions (8 samples each; ${candidates.length - missing.length} cached) with ${model}`);
    const rates = await passRates(
      model,
      missing.map((r) => asQuestion(r, dbRoot)),
      8,
      1,
      { contextSize, threads, indexDir: join(work, "indexes"), log },
    );
    for (const [id, p] of rates) screen[String(id)] = p;
    writeFileSync(screenFile, JSON.stringify(screen, null, 2));
  }
  const picked = candidates.filter((r) => screen[r.question_id]! >= 0.2 && screen[r.question_id]! <= 0.8);
  log(`screened: ${picked.length} of ${candidates.length} questions have a pass rate in [0.2, 0.8]`);
  if (picked.length === 0) throw new Error("no question to train on");
  const trainFile = join(work, `train-${picked.length}.json`);
  writeFileSync(trainFile, JSON.stringify(picked, null, 2));

  for (const arm of values["screen-only"] ? [] : arms) {
    const runDir = join(work, arm);
    log(`${arm} arm: ${values.steps} steps over ${picked.length} questions → ${runDir}`);
    const shuffled = arm === "shuffled";
    await runRecipeArm({ model, runDir, trainFile, dbRoot, steps: Number(values.steps), shuffled, checkpointEvery: 1, contextSize, threads });
    log(`${arm} arm done`);
  }
}

if (values.arm === undefined && !values["screen-only"]) {
  const steps = (arm: string): number[] => {
    const dir = join(work, arm, "checkpoints");
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .map((f) => /^step-(\d+)\.gguf$/.exec(f)?.[1])
      .filter((s): s is string => s !== undefined)
      .map(Number);
  };
  const common = steps("real").filter((s) => steps("shuffled").includes(s));
  const at = values["at-step"] !== undefined ? Number(values["at-step"]) : Math.max(...common);
  if (!common.includes(at)) throw new Error(`no checkpoint at step ${at} in both arms (common: ${common.join(", ") || "none"})`);
  const heldout = resolve(values.heldout);
  const evaluate = (name: string, gguf: string): ItemScore[] => {
    const out = join(work, `heldout-${name}`);
    if (!existsSync(join(out, "report.json"))) {
      log(`held-out greedy eval of ${name} (${gguf})`);
      const args = ["reex", "eval", "--dataset", heldout, "--db-root", resolve(values["heldout-db-root"]!), "--strategy", "greedy"];
      // reex's default llama.cpp threads (cores − 1): on 2 cores, 2 threads made these evaluations 1.5–4.5× slower (spin-wait stalls)
      args.push("--model", gguf, "--agent.maxTokens", "400", "--policy.contextSize", "2048", "--out", out, "--quiet");
      const r = spawnSync("npx", args, { stdio: ["ignore", "inherit", "inherit"] });
      if (r.status !== 0) throw new Error(`reex eval of ${name} exited ${r.status}`);
    }
    const report = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as { runs: { items: ItemScore[] }[] };
    return report.runs[0]!.items;
  };
  const ckpt = (arm: string): string => join(work, arm, "checkpoints", `step-${String(at).padStart(6, "0")}.gguf`);
  const start = evaluate("start", model);
  const ex = (items: ItemScore[]): number => items.filter((i) => i.ex.bird).length / items.length;
  // A secondary split: held-out questions on databases of a family (db_id less its trailing _NNNN, the synthetic
  // data's domain) that the train questions also cover, against those of families they never show.
  const family = (dbId: string): string => dbId.replace(/_\d+$/, "");
  const trainFile = readdirSync(work).find((f) => /^train-\d+\.json$/.test(f));
  const trained = new Set(trainFile ? (JSON.parse(readFileSync(join(work, trainFile), "utf8")) as { db_id: string }[]).map((r) => family(r.db_id)) : []);
  const seen = (i: ItemScore): boolean => trained.has(family(i.dbId));
  const result: Record<string, unknown> = {
    model,
    heldout,
    questions: start.length,
    step: at,
    start: ex(start),
    trainFamilies: [...trained].sort(),
    seenFamilies: { questions: start.filter(seen).length, start: ex(start.filter(seen)) },
  };
  for (const arm of ["real", "shuffled"] as const) {
    const items = evaluate(`${arm}-${at}`, ckpt(arm));
    const bySeen = (keep: (i: ItemScore) => boolean) =>
      start.some(keep) ? { ex: ex(items.filter(keep)), vsStart: pairedDifference(start.filter(keep), items.filter(keep)) } : null;
    result[arm] = { ex: ex(items), vsStart: pairedDifference(start, items), seenFamilies: bySeen(seen), unseenFamilies: bySeen((i) => !seen(i)) };
  }
  writeFileSync(join(work, "result.json"), JSON.stringify(result, null, 2));
  console.log(JSON.stringify(result, null, 2));
  const gain = (r: { vsStart: { delta: number; pValue: number } } | null): string => {
    if (r === null) return "n/a";
    const d = -100 * r.vsStart.delta;
    return `${d >= 0 ? "+" : ""}${d.toFixed(2)} (p ${r.vsStart.pValue.toFixed(3)})`;
  };
  type ArmResult = { vsStart: { delta: number; pValue: number }; seenFamilies: { vsStart: { delta: number; pValue: number } } | null };
  const [real, shuffled] = [result.real as ArmResult, result.shuffled as ArmResult];
  console.log(
    `held-out greedy EX start ${(100 * ex(start)).toFixed(2)} real ${gain(real)} shuffled ${gain(shuffled)} at step ${at}; ` +
      `on trained families real ${gain(real.seenFamilies)} shuffled ${gain(shuffled.seenFamilies)}`,
  );
}

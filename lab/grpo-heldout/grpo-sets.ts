/**
 * The question sets of issue #61's GRPO experiment (docs/experiments/2026-12-05-grpo-heldout.md):
 * what a run trains on and what its result is measured on, written once so every arm uses the same.
 *
 *   npx tsx lab/grpo-heldout/grpo-sets.ts [--realdata .reex/realdata] [--out .reex/grpo-sets] [--heldout 1000] [--seed grpo-heldout:1]
 *       [--used lab/grpo-heldout/wikisql-test-used.json] [--eval-seeds 10]
 *
 * Reads `wikisql_dev.json` and `wikisql_test.json` of `npx tsx lab/scripts/realdata.ts --out DIR --seed 1 --sources wikisql,spider`.
 * - train.json: WikiSQL dev, less the 400 dev questions held back to check the serving rules
 *   (`heldOutSample(dev, 400, "reex-eval:wikisql:1")`, as it draws today and as it drew on 2026-11-29, when they were drawn).
 *   The shipped model's SFT saw no dev question.
 * - train-mixed.json: train.json plus every Spider train question (`spider_train.json`, ids `spider-train:<id>`), for the
 *   third design, which keeps training on the multi-table questions the shipped model's SFT saw while it learns WikiSQL's.
 * - train-balanced.json: Spider train as in train-mixed.json plus as many questions of train.json (`heldOutSample(train,
 *   <Spider's count>, "grpo-balanced:1")`), half and half, for the sixth design: a pool of WikiSQL alone taught the model to
 *   drop the ORDER BY, LIMIT and GROUP BY that WikiSQL's answers never have, and 22% Spider did not hold them.
 * - heldout.json: `--heldout` WikiSQL test questions (`heldOutSample` with `--seed`, one table at a time), none of them in an
 *   earlier evaluation file: the starter pipeline's draws (`heldOutSample(test, 400, "reex-eval:wikisql:<s>")` for s in
 *   1..`--eval-seeds`, both versions), the old first-question-per-table 400 (`spread(test, 400)`) and the Python draws `--used` lists.
 * - sets.json: the manifest (sources, rules, counts) a run record cites.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Rng } from "../../src/examples/index.js";
import { heldOutSample, spread } from "../starter/index.js";
import { shuffleInPlace } from "../../src/util/index.js";

interface Question {
  question_id: number;
  db_id: string;
}

interface UsedFile {
  sets: { name: string; rule: string; question_ids: number[] }[];
}

const USAGE = "usage: npx tsx lab/grpo-heldout/grpo-sets.ts [--realdata DIR] [--out DIR] [--heldout N] [--seed S] [--used FILE] [--eval-seeds N]";

const { values } = parseArgs({
  options: {
    realdata: { type: "string", default: ".reex/realdata" },
    out: { type: "string", default: ".reex/grpo-sets" },
    heldout: { type: "string", default: "1000" },
    seed: { type: "string", default: "grpo-heldout:1" },
    used: { type: "string", default: "lab/grpo-heldout/wikisql-test-used.json" },
    "eval-seeds": { type: "string", default: "10" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const heldoutN = Number(values.heldout);
const evalSeeds = Number(values["eval-seeds"]);
if (!Number.isInteger(heldoutN) || heldoutN < 1 || !Number.isInteger(evalSeeds) || evalSeeds < 0) {
  console.error(`--heldout must be an integer >= 1 and --eval-seeds >= 0\n${USAGE}`);
  process.exit(1);
}

/**
 * `heldOutSample` as it drew from 226af4c to 3b83a0a (2026-11-29): a Fisher-Yates shuffle by src/examples' Rng, then spread.
 * The 400 WikiSQL dev questions that checked the serving rules were drawn then; which of the two draws it was is not recorded,
 * so both are left out.
 */
function heldOutSampleNov29<T extends { db_id: string }>(items: readonly T[], n: number, seed: string): T[] {
  const rng = new Rng(seed);
  return spread(
    shuffleInPlace(items.slice(), () => rng.next()),
    n,
  );
}

/** Both draws of `heldOutSample` for `seed`: today's (SHA-256 order) and 2026-11-29's (Rng shuffle). */
function bothDraws<T extends { db_id: string }>(items: readonly T[], n: number, seed: string): T[] {
  return [...heldOutSample(items, n, seed), ...heldOutSampleNov29(items, n, seed)];
}

const read = (file: string): Question[] => JSON.parse(readFileSync(file, "utf8")) as Question[];
const realdata = resolve(values.realdata);
const dev = read(join(realdata, "wikisql_dev.json"));
const test = read(join(realdata, "wikisql_test.json"));
const spiderTrain = read(join(realdata, "spider_train.json"));

const devLeftOut = new Set(bothDraws(dev, 400, "reex-eval:wikisql:1").map((q) => q.question_id));
const train = dev.filter((q) => !devLeftOut.has(q.question_id));

const used: { name: string; rule: string; ids: number[] }[] = [];
for (let s = 1; s <= evalSeeds; s++) {
  const rule = `heldOutSample(wikisql_test, 400, "reex-eval:wikisql:${s}"), today's draw and 2026-11-29's`;
  used.push({
    name: `starter pipeline's held-out WikiSQL test, seed ${s}`,
    rule,
    ids: bothDraws(test, 400, `reex-eval:wikisql:${s}`).map((q) => q.question_id),
  });
}
used.push({
  name: "model card's first question of each table (before 226af4c)",
  rule: "spread(wikisql_test, 400)",
  ids: spread(test, 400).map((q) => q.question_id),
});
for (const set of (JSON.parse(readFileSync(resolve(values.used), "utf8")) as UsedFile).sets)
  used.push({ name: set.name, rule: set.rule, ids: set.question_ids });

const usedIds = new Set(used.flatMap((u) => u.ids));
const pool = test.filter((q) => !usedIds.has(q.question_id));
const heldout = heldOutSample(pool, heldoutN, values.seed);
if (heldout.length < heldoutN) {
  console.error(`only ${heldout.length} WikiSQL test questions are left after the earlier evaluation files; asked for ${heldoutN}`);
  process.exit(1);
}

const out = resolve(values.out);
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "train.json"), `${JSON.stringify(train, null, 1)}\n`);
const mixed = [...train, ...spiderTrain.map((q) => ({ ...q, question_id: `spider-train:${q.question_id}` }))];
writeFileSync(join(out, "train-mixed.json"), `${JSON.stringify(mixed, null, 1)}\n`);
const spider = mixed.slice(train.length);
const balanced = [...heldOutSample(train, spider.length, "grpo-balanced:1"), ...spider];
writeFileSync(join(out, "train-balanced.json"), `${JSON.stringify(balanced, null, 1)}\n`);
writeFileSync(join(out, "heldout.json"), `${JSON.stringify(heldout, null, 1)}\n`);
const manifest = {
  source: `${relative(process.cwd(), realdata) || "."} (npx tsx lab/scripts/realdata.ts --seed 1 --sources wikisql,spider)`,
  train: {
    file: "train.json",
    split: "wikisql dev",
    n: train.length,
    leftOut: { n: devLeftOut.size, rule: "heldOutSample(wikisql_dev, 400, \"reex-eval:wikisql:1\"), today's draw and 2026-11-29's" },
  },
  trainMixed: {
    file: "train-mixed.json",
    split: "wikisql dev as train.json, plus spider train",
    n: mixed.length,
    spider: spiderTrain.length,
  },
  trainBalanced: {
    file: "train-balanced.json",
    split: 'wikisql dev as train.json, heldOutSample(train, <spider>, "grpo-balanced:1"), plus spider train',
    n: balanced.length,
    spider: spider.length,
  },
  heldout: {
    file: "heldout.json",
    split: "wikisql test",
    n: heldout.length,
    rule: `heldOutSample(wikisql_test less ${usedIds.size} used, ${heldoutN}, "${values.seed}")`,
    databases: new Set(heldout.map((q) => q.db_id)).size,
    excluded: used.map((u) => ({ name: u.name, rule: u.rule, n: u.ids.length })),
  },
};
writeFileSync(join(out, "sets.json"), `${JSON.stringify(manifest, null, 2)}\n`);
console.log(
  `train ${train.length} (WikiSQL dev less ${devLeftOut.size}), mixed ${mixed.length} (+ ${spiderTrain.length} Spider train); held-out ${heldout.length} on ${manifest.heldout.databases} tables (WikiSQL test less ${usedIds.size} used by earlier evaluations) → ${out}`,
);

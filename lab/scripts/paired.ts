/**
 * Paired EX of runs from `reex eval` reports over their common first questions: each run against the first one named,
 * with won / lost / McNemar's exact p (src/eval's pairedDifference), seconds per answer and the share that probed.
 *
 *   npx tsx lab/scripts/paired.ts BASE/report.json[#label] OTHER/report.json[#label] … [--limit N] [--rule bird]
 *
 * A report holds one or more runs; `#label` picks one (default: its first). Runs of different lengths (200 questions
 * against the first 30 of them) are compared on the first min(n) questions, matched by dataset position.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { EX_RULES, pairedDifference, type ExRule, type ItemScore } from "../../src/eval/index.js";

type Item = ItemScore;
interface Run {
  config: { label: string };
  items: Item[];
}

const { values: v, positionals } = parseArgs({
  allowPositionals: true,
  options: { limit: { type: "string" }, rule: { type: "string", default: "bird" }, help: { type: "boolean", short: "h", default: false } },
});
if (v.help || positionals.length < 1) {
  console.log("usage: npx tsx lab/scripts/paired.ts BASE/report.json[#label] OTHER/report.json[#label] … [--limit N] [--rule bird]");
  process.exit(v.help ? 0 : 2);
}
const rule = v.rule as ExRule;
if (!EX_RULES.includes(rule)) throw new Error(`--rule must be one of ${EX_RULES.join(", ")}`);

function load(spec: string): { name: string; items: Item[] } {
  const [file, label] = spec.split("#");
  const runs = (JSON.parse(readFileSync(file!, "utf8")) as { runs: Run[] }).runs;
  const run = label ? runs.find((r) => r.config.label === label) : runs[0];
  if (!run) throw new Error(`${file}: no run labelled ${label} (has ${runs.map((r) => r.config.label).join(", ")})`);
  return { name: `${file}#${run.config.label}`, items: run.items };
}

const runs = positionals.map(load);
const n = Math.min(...runs.map((r) => r.items.length), v.limit ? Number(v.limit) : Infinity);
const first = (r: { items: Item[] }): Item[] => [...r.items].sort((a, b) => a.index - b.index).slice(0, n);
const base = first(runs[0]!);
for (const run of runs) {
  const items = first(run);
  const right = items.filter((i) => i.ex[rule]).length;
  const seconds = items.reduce((s, i) => s + (i.latencyMs ?? 0), 0) / n / 1000;
  const probed = items.filter((i) => (i.interactions ?? 0) > 0).length;
  const d = pairedDifference(items, base, rule);
  console.log(
    `${run.name}: n ${n}, EX ${((100 * right) / n).toFixed(1)} (${right}), against the first ${d.firstOnly} won ${d.secondOnly} lost, ` +
      `p ${d.pValue.toPrecision(2)}, ${seconds.toFixed(1)} s/answer, probed ${probed}`,
  );
}

/**
 * Fits an answer-confidence model (src/decoding/confidence.ts) on eval reports of training-split
 * questions and writes it as a module: greedy reports for src/decoding/confidence-model.ts,
 * tree-prune reports for src/decoding/confidence-model-vote.ts (`--export FITTED_VOTE_MODEL`):
 *
 *   npx tsx scripts/fit-confidence.ts --out FILE [--export FITTED_MODEL] [--check OTHER.json …] REPORT.json [REPORT.json …]
 *   npx tsx scripts/fit-confidence.ts --check REPORT.json …     (the shipped models, fitting nothing)
 *
 * Each report's items with `signals` (answers whose SQL ran) are examples: label 1 when the final
 * SQL is right (never for a question marked unanswerable). An L2-penalised logistic regression is
 * fitted by Newton's method; the script prints the weights, the fit's calibration and, per
 * threshold, coverage, accuracy among answered items, right answers kept and the TrustSQL score
 * at c = 1 over all items of the reports (answers without signals count as confidence 0); each
 * `--check` report is then scored with the fitted model without fitting on it.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { SIGNALS, confidenceModelFor, probability, type ConfidenceModel, type Signals } from "../src/decoding/index.js";
import { trustMetrics, type TrustInput } from "../src/eval/trust.js";

interface ReportItem {
  ex: { bird: boolean };
  unanswerable?: boolean;
  signals?: Signals;
  error: string | null;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: "string" },
    export: { type: "string", default: "FITTED_MODEL" },
    l2: { type: "string", default: "1" },
    label: { type: "string" },
    check: { type: "string", multiple: true },
  },
});
if (positionals.length === 0 && values.check?.length) {
  for (const file of values.check) table(`${file} (shipped models)`, itemsOf(file).map(scoredWith()));
  process.exit(0);
}
if (positionals.length === 0) {
  console.error("usage: npx tsx scripts/fit-confidence.ts [--out FILE] [--export NAME] [--l2 1] [--label TEXT] [--check REPORT.json …] REPORT.json …");
  process.exit(2);
}
const items: ReportItem[] = positionals.flatMap((f) =>
  (JSON.parse(readFileSync(f, "utf8")) as { runs: { items: ReportItem[] }[] }).runs.flatMap((r) => r.items),
);
const examples = items.filter((i) => i.signals).map((i) => ({ x: [1, ...SIGNALS.map((s) => i.signals![s])], y: i.ex.bird && !i.unanswerable ? 1 : 0 }));
const l2 = Number(values.l2);
const d = SIGNALS.length + 1;
let w = new Array<number>(d).fill(0);
for (let iter = 0; iter < 50; iter++) {
  const grad = new Array<number>(d).fill(0);
  const hess = Array.from({ length: d }, () => new Array<number>(d).fill(0));
  for (const { x, y } of examples) {
    const p = 1 / (1 + Math.exp(-x.reduce((s, v, k) => s + v * w[k]!, 0)));
    for (let a = 0; a < d; a++) {
      grad[a]! += (p - y) * x[a]!;
      for (let b = 0; b < d; b++) hess[a]![b]! += p * (1 - p) * x[a]! * x[b]!;
    }
  }
  for (let a = 1; a < d; a++) {
    grad[a]! += l2 * w[a]!;
    hess[a]![a]! += l2;
  }
  for (let a = 0; a < d; a++) hess[a]![a]! += 1e-9;
  const step = solve(hess, grad);
  w = w.map((v, k) => v - step[k]!);
  if (Math.max(...step.map(Math.abs)) < 1e-8) break;
}
const model: ConfidenceModel = {
  bias: round(w[0]!),
  weights: Object.fromEntries(SIGNALS.map((s, k) => [s, round(w[k + 1]!)]).filter(([, v]) => v !== 0)),
  fittedOn:
    values.label ??
    `${examples.length} answers that ran (${examples.filter((e) => e.y === 1).length} right) of ${items.length} training-split questions; L2 ${l2}`,
};
console.log(JSON.stringify(model, null, 2));
const scored: TrustInput[] = items.map(scoredWith(model));
table("the fit's own items", scored);
for (const file of values.check ?? []) table(file, itemsOf(file).map(scoredWith(model)));

function itemsOf(file: string): ReportItem[] {
  return (JSON.parse(readFileSync(file, "utf8")) as { runs: { items: ReportItem[] }[] }).runs.flatMap((r) => r.items);
}

function scoredWith(m?: ConfidenceModel): (i: ReportItem) => TrustInput {
  return (i) => ({
    correct: i.ex.bird && !i.unanswerable,
    unanswerable: i.unanswerable === true,
    confidence: i.signals ? probability(m ?? confidenceModelFor(i.signals), i.signals) : 0,
    answered: false,
  });
}

function table(title: string, rows: TrustInput[]): void {
  const right = rows.filter((i) => i.correct).length;
  console.log(`\n${title}: ${rows.length} items, EX ${((right / rows.length) * 100).toFixed(1)}%, ECE ${trustMetrics(rows).ece?.toFixed(3)}`);
  console.log("threshold  answered  right-among-answered  right-kept  reliability(c=1)  (c=10)");
  for (const t of [0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7]) {
    const m = trustMetrics(rows.map((i) => ({ ...i, answered: i.confidence !== null && i.confidence >= t && (i.confidence > 0 || t === 0) })));
    console.log(
      `${t.toFixed(2).padStart(9)}  ${(m.coverage * 100).toFixed(1).padStart(8)}  ${((m.answeredAccuracy ?? 0) * 100).toFixed(1).padStart(20)}  ${((m.keptRight ?? 0) * 100).toFixed(1).padStart(10)}  ${m.reliability.c1.toFixed(3).padStart(16)}  ${m.reliability.c10.toFixed(3).padStart(7)}`,
    );
  }
}
if (values.out) {
  writeFileSync(
    values.out,
    `/** A fitted confidence model; written by scripts/fit-confidence.ts, do not edit by hand. */
import type { ConfidenceModel } from "./confidence.js";

/** Fitted on: ${model.fittedOn}. */
export const ${values.export}: ConfidenceModel = ${JSON.stringify(model, null, 2).replace(/"(\w+)":/g, "$1:")};
`,
  );
  execFileSync("npx", ["biome", "format", "--write", values.out], { stdio: "ignore" });
  console.log(`wrote ${values.out} (formatted as the linter wants it)`);
}

function round(v: number): number {
  return Math.round(v * 1000) / 1000;
}

/** Solves A x = b by Gaussian elimination with partial pivoting. */
function solve(a: number[][], b: number[]): number[] {
  const n = b.length;
  const m = a.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[p]![c]!)) p = r;
    [m[c], m[p]] = [m[p]!, m[c]!];
    for (let r = c + 1; r < n; r++) {
      const f = m[r]![c]! / m[c]![c]!;
      for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
    }
  }
  const x = new Array<number>(n).fill(0);
  for (let r = n - 1; r >= 0; r--) {
    let s = m[r]![n]!;
    for (let k = r + 1; k < n; k++) s -= m[r]![k]! * x[k]!;
    x[r] = s / m[r]![r]!;
  }
  return x;
}

/**
 * Evaluation reports: the JSON record of one or more runs, and a self-contained HTML page
 * (inline CSS, hand-written inline SVG plots, no external assets) with summary tables per
 * strategy and per difficulty, an accuracy-vs-latency scatter and an interactions histogram.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { ReexError } from "../errors/index.js";
import type { DatasetLayout } from "./datasets.js";
import { EX_RULES, pairedDifference, sortDifficulties, type ExRule, type Metrics } from "./metrics.js";
import type { EvalRun, SelfCheckFailure } from "./run.js";

/** Everything one `reex eval` invocation produced: the dataset, the self-check, and one run per strategy. */
export interface EvalReport {
  version: 1;
  createdAt: string;
  dataset: { file?: string; dbRoot?: string; layout?: DatasetLayout; count: number };
  /** The rule headline figures use (BIRD datasets: "bird"; Spider: "spider"). */
  primaryRule: ExRule;
  selfCheck?: { ok: boolean; checked: number; failures: SelfCheckFailure[] };
  runs: EvalRun[];
}

/** Options of {@link createReport}. */
export interface CreateReportOptions {
  runs: EvalRun[];
  dataset?: EvalReport["dataset"];
  /** Default: "spider" for a Spider layout, else "bird". */
  primaryRule?: ExRule;
  selfCheck?: EvalReport["selfCheck"];
  /** Default now. */
  createdAt?: Date;
}

/** Assembles a report record from finished runs. */
export function createReport(options: CreateReportOptions): EvalReport {
  const count = options.runs[0]?.items.length ?? 0;
  return {
    version: 1,
    createdAt: (options.createdAt ?? new Date()).toISOString(),
    dataset: options.dataset ?? { count },
    primaryRule: options.primaryRule ?? (options.dataset?.layout === "spider" ? "spider" : "bird"),
    ...(options.selfCheck ? { selfCheck: options.selfCheck } : {}),
    runs: options.runs,
  };
}

/** Writes `report.json` and `report.html` into `outDir` (created if needed) and returns their absolute paths. */
export function writeReport(report: EvalReport, outDir: string): { json: string; html: string } {
  mkdirSync(outDir, { recursive: true });
  const json = resolve(join(outDir, "report.json"));
  const html = resolve(join(outDir, "report.html"));
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(html, renderHtml(report));
  return { json, html };
}

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function pct(x: number | null | undefined, digits = 1): string {
  return x === null || x === undefined ? "–" : `${(x * 100).toFixed(digits)}`;
}

function num(x: number | null | undefined, digits = 1): string {
  return x === null || x === undefined ? "–" : x.toFixed(digits);
}

function secs(ms: number | null | undefined): string {
  return ms === null || ms === undefined ? "–" : (ms / 1000).toFixed(2);
}

/** About `count` round tick values spanning [min, max]. */
function ticks(min: number, max: number, count = 5): number[] {
  if (!(max > min)) return [min];
  const raw = (max - min) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(min / step - 1e-9) * step; v <= max + 1e-9; v += step) out.push(Number(v.toFixed(10)));
  return out;
}

function metricsRow(label: string, m: Metrics, rule: ExRule, extra: string[] = []): string {
  const cells = [
    ...extra,
    esc(label),
    String(m.count),
    ...EX_RULES.map((r) => pct(m.ex[r])),
    pct(m.voting[rule]),
    pct(m.pass1[rule]),
    pct(m.passK[rule]),
    num(m.meanK, 1),
    pct(m.syntaxErrorRate),
    pct(m.executionErrorRate),
    pct(m.noSqlRate),
    m.copyRate === null ? "–" : pct(m.copyRate),
    num(m.avgInteractions, 2),
    secs(m.latencyMs?.mean),
    secs(m.latencyMs?.p50),
    secs(m.latencyMs?.p90),
    num(m.generatedTokensPerItem, 0),
    num(m.evaluatedTokensPerItem, 0),
  ];
  return `<tr>${cells.map((c, i) => `<td${i >= extra.length + 1 ? ' class="n"' : ""}>${c}</td>`).join("")}</tr>`;
}

function metricsHead(rule: ExRule, extra: string[] = []): string {
  const heads = [
    ...extra,
    "run",
    "n",
    "EX bird %",
    "EX spider %",
    "EX refined %",
    `voting % (${rule})`,
    `pass@1 % (${rule})`,
    `pass@k % (${rule})`,
    "k",
    "syntax err %",
    "exec err %",
    "no SQL %",
    "copy %",
    "interactions",
    "latency mean s",
    "p50 s",
    "p90 s",
    "gen tokens/item",
    "eval tokens/item",
  ];
  return `<tr>${heads.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
}

function summaryTable(report: EvalReport): string {
  const rows = report.runs.map((run) => metricsRow(run.config.label, run.summary, report.primaryRule));
  return `<table id="summary"><thead>${metricsHead(report.primaryRule)}</thead><tbody>${rows.join("")}</tbody></table>`;
}

function difficultyTable(report: EvalReport): string {
  const labels = sortDifficulties(report.runs.flatMap((r) => Object.keys(r.summary.byDifficulty)));
  if (labels.length === 0) return `<p class="note">No item carries a difficulty label.</p>`;
  const rows: string[] = [];
  for (const run of report.runs) {
    for (const d of labels) {
      const m = run.summary.byDifficulty[d];
      if (m) rows.push(metricsRow(run.config.label, m, report.primaryRule, [esc(d)]));
    }
  }
  return `<table id="by-difficulty"><thead>${metricsHead(report.primaryRule, ["difficulty"])}</thead><tbody>${rows.join("")}</tbody></table>`;
}

/** Each later run against the first, question by question; empty when there is one run or they answered different questions. */
function pairedTable(report: EvalReport): string {
  const [base, ...rest] = report.runs;
  if (!base || rest.length === 0) return "";
  const rows: string[] = [];
  for (const run of rest) {
    let d;
    try {
      d = pairedDifference(run.items, base.items, report.primaryRule);
    } catch (err) {
      if (err instanceof ReexError) return `<p class="note">The runs answered different questions, so they are not compared pairwise.</p>`;
      throw err;
    }
    const p = d.pValue < 0.001 ? "&lt; 0.001" : d.pValue.toFixed(3);
    rows.push(
      `<tr><td>${esc(run.config.label)}</td><td class="n">${d.delta >= 0 ? "+" : ""}${pct(d.delta)}</td><td class="n">${pct(d.ci95[0])} to ${pct(d.ci95[1])}</td><td class="n">${d.firstOnly}</td><td class="n">${d.secondOnly}</td><td class="n">${p}</td></tr>`,
    );
  }
  const head = `<tr><th>run</th><th>Δ EX vs ${esc(base.config.label)}</th><th>95% interval</th><th>right only here</th><th>right only in ${esc(base.config.label)}</th><th>McNemar p</th></tr>`;
  return `<h2>Paired with the first run</h2>
<table id="paired"><thead>${head}</thead><tbody>${rows.join("")}</tbody></table>
<p class="note">EX under the headline rule, question by question against the first run: the interval is the normal approximation to the paired difference; p is McNemar's exact test on the questions only one of the two got right.</p>`;
}

function errorsTable(report: EvalReport): string {
  const cats = [...new Set(report.runs.flatMap((r) => Object.keys(r.summary.errors)))].sort();
  if (cats.length === 0) return `<p class="note">Every final SQL ran.</p>`;
  const head = `<tr><th>run</th>${cats.map((c) => `<th>${esc(c)}</th>`).join("")}<th>gold errors</th><th>truncated</th></tr>`;
  const rows = report.runs.map((run) => {
    const s = run.summary;
    const cells = cats.map((c) => {
      const k = s.errors[c as keyof typeof s.errors] ?? 0;
      return `<td class="n">${k} (${pct(s.count ? k / s.count : 0)}%)</td>`;
    });
    return `<tr><td>${esc(run.config.label)}</td>${cells.join("")}<td class="n">${s.goldErrors}</td><td class="n">${s.truncated}</td></tr>`;
  });
  return `<table id="errors"><thead>${head}</thead><tbody>${rows.join("")}</tbody></table>`;
}

const W = 560;
const H = 340;
const M = { left: 60, right: 20, top: 36, bottom: 50 };

function axes(
  xs: number[],
  ys: number[],
  sx: (v: number) => number,
  sy: (v: number) => number,
  xLabel: string,
  yLabel: string,
  xFmt: (v: number) => string,
  yFmt: (v: number) => string,
): string {
  const parts: string[] = [];
  const x0 = M.left;
  const x1 = W - M.right;
  const y0 = H - M.bottom;
  const y1 = M.top;
  for (const v of ys) {
    parts.push(`<line x1="${x0}" x2="${x1}" y1="${sy(v).toFixed(1)}" y2="${sy(v).toFixed(1)}" class="grid"/>`);
    parts.push(`<text x="${x0 - 6}" y="${(sy(v) + 4).toFixed(1)}" text-anchor="end">${esc(yFmt(v))}</text>`);
  }
  for (const v of xs) {
    parts.push(`<line x1="${sx(v).toFixed(1)}" x2="${sx(v).toFixed(1)}" y1="${y0}" y2="${y0 + 5}" class="axis"/>`);
    parts.push(`<text x="${sx(v).toFixed(1)}" y="${y0 + 18}" text-anchor="middle">${esc(xFmt(v))}</text>`);
  }
  parts.push(`<line x1="${x0}" x2="${x1}" y1="${y0}" y2="${y0}" class="axis"/><line x1="${x0}" x2="${x0}" y1="${y0}" y2="${y1}" class="axis"/>`);
  parts.push(`<text x="${(x0 + x1) / 2}" y="${H - 10}" text-anchor="middle" class="label">${esc(xLabel)}</text>`);
  parts.push(`<text transform="translate(16 ${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle" class="label">${esc(yLabel)}</text>`);
  return parts.join("");
}

/** Accuracy (primary-rule EX, and pass@k hollow) against mean latency, one colour per run. */
function scatterPlot(report: EvalReport): string {
  const rule = report.primaryRule;
  const points = report.runs
    .map((run, i) => ({ run, i, lat: run.summary.latencyMs?.mean ?? null }))
    .filter((p): p is { run: EvalRun; i: number; lat: number } => p.lat !== null);
  if (points.length === 0) return `<p class="note">No latency was measured (predictions only), so there is no accuracy-vs-latency plot.</p>`;
  const maxLat = Math.max(...points.map((p) => p.lat / 1000)) * 1.15 || 1;
  const accs = points.flatMap((p) => [p.run.summary.ex[rule], p.run.summary.passK[rule]]);
  const lo = Math.max(0, Math.floor((Math.min(...accs) * 100 - 5) / 5) * 5);
  const hi = Math.min(100, Math.ceil((Math.max(...accs) * 100 + 5) / 5) * 5);
  const sx = (v: number): number => M.left + (v / maxLat) * (W - M.left - M.right);
  const sy = (v: number): number => H - M.bottom - ((v - lo) / (hi - lo || 1)) * (H - M.top - M.bottom);
  const placed: { x: number; y: number }[] = [];
  const dots = points.map((p) => ({ x: sx(p.lat / 1000), y: sy(p.run.summary.ex[rule] * 100) }));
  const marks = points.map(({ run, i, lat }) => {
    const color = PALETTE[i % PALETTE.length]!;
    const x = sx(lat / 1000);
    const y = sy(run.summary.ex[rule] * 100);
    const yk = sy(run.summary.passK[rule] * 100);
    let ly = y + 4;
    const width = 7 * run.config.label.length;
    const hits = (ty: number): boolean =>
      placed.some((p) => Math.abs(p.y - ty) < 12 && Math.abs(p.x - x) < 90) ||
      dots.some((d) => d.x !== x && d.x > x && d.x - 7 < x + 9 + width && Math.abs(d.y - (ty - 4)) < 12);
    while (hits(ly)) ly += 13;
    placed.push({ x, y: ly });
    return (
      `<g class="pt"><title>${esc(run.config.label)}: EX ${pct(run.summary.ex[rule])}%, pass@k ${pct(run.summary.passK[rule])}%, ${secs(lat)} s/sample</title>` +
      (Math.abs(yk - y) > 0.5
        ? `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${y.toFixed(1)}" y2="${yk.toFixed(1)}" stroke="${color}" stroke-dasharray="3 2"/><circle cx="${x.toFixed(1)}" cy="${yk.toFixed(1)}" r="5" fill="white" stroke="${color}" stroke-width="2"/>`
        : "") +
      `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="6" fill="${color}"/>` +
      `<text x="${(x + 9).toFixed(1)}" y="${ly.toFixed(1)}" fill="${color}">${esc(run.config.label)}</text></g>`
    );
  });
  const legend = `<text x="${M.left}" y="16">● EX of the final SQL    ○ pass@k (any candidate)</text>`;
  return (
    `<svg id="accuracy-latency" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="accuracy vs latency">` +
    axes(
      ticks(0, maxLat),
      ticks(lo, hi),
      sx,
      sy,
      "mean latency per sample (s)",
      `accuracy, ${rule} rule (%)`,
      (v) => String(v),
      (v) => String(v),
    ) +
    legend +
    marks.join("") +
    `</svg>`
  );
}

/** Share of items per number of interactions (winning trajectory), grouped bars per run. */
function interactionsHistogram(report: EvalReport): string {
  const runs = report.runs
    .map((run, i) => ({ run, i, values: run.items.map((it) => it.interactions).filter((v): v is number => v !== null) }))
    .filter((r) => r.values.length > 0);
  if (runs.length === 0) return `<p class="note">No interaction counts were recorded (predictions only).</p>`;
  const maxX = Math.max(0, ...runs.flatMap((r) => r.values));
  const bins = Array.from({ length: maxX + 1 }, (_, k) => k);
  const shares = runs.map((r) => bins.map((k) => r.values.filter((v) => v === k).length / r.values.length));
  const top = Math.max(...shares.flat(), 0.01);
  const hi = Math.min(1, (Math.ceil((top * 100) / 10) * 10) / 100) || 1;
  const plotW = W - M.left - M.right;
  const slot = plotW / bins.length;
  const barW = Math.max(1, (slot * 0.8) / runs.length);
  const sy = (v: number): number => H - M.bottom - (v / hi) * (H - M.top - M.bottom);
  const sxCenter = (k: number): number => M.left + slot * (k + 0.5);
  const bars: string[] = [];
  runs.forEach((r, j) => {
    const color = PALETTE[r.i % PALETTE.length]!;
    bins.forEach((k) => {
      const share = shares[j]![k]!;
      if (share === 0) return;
      const x = M.left + slot * k + slot * 0.1 + barW * j;
      const y = sy(share);
      bars.push(
        `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${barW.toFixed(1)}" height="${(H - M.bottom - y).toFixed(1)}" fill="${color}"><title>${esc(r.run.config.label)}: ${k} interaction(s), ${pct(share)}% of items</title></rect>`,
      );
    });
  });
  let lx = M.left;
  const legend = runs
    .map((r) => {
      const mark = `<rect x="${lx}" y="7" width="10" height="10" fill="${PALETTE[r.i % PALETTE.length]}"/><text x="${lx + 14}" y="16">${esc(r.run.config.label)}</text>`;
      lx += 24 + 7 * r.run.config.label.length;
      return mark;
    })
    .join("");
  const xTicks = bins.length <= 20 ? bins : ticks(0, maxX).filter((v) => Number.isInteger(v));
  return (
    `<svg id="interactions" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="interactions histogram">` +
    axes(
      xTicks,
      ticks(0, hi * 100).map((v) => v / 100),
      sxCenter,
      sy,
      "interactions (probe rounds of the winning trajectory)",
      "items (%)",
      (v) => String(v),
      (v) => String(Math.round(v * 100)),
    ) +
    bars.join("") +
    legend +
    `</svg>`
  );
}

/** Abstention and calibration per run: coverage, accuracy among answered items, TrustSQL scores, ECE. */
function trustTable(report: EvalReport): string {
  const rows = report.runs.map((run) => {
    const t = run.summary.trust;
    const score = (v: number): string => v.toFixed(3);
    return `<tr><td>${esc(run.config.label)}</td><td>${pct(t.coverage)}</td><td>${pct(t.answeredAccuracy)}</td><td>${pct(run.summary.ex.bird)}</td><td>${pct(t.keptRight)}</td><td>${score(t.reliability.c0)} / ${score(t.reliability.c1)} / ${score(t.reliability.c10)}</td><td>${score(t.answerAll.c0)} / ${score(t.answerAll.c1)} / ${score(t.answerAll.c10)}</td><td>${t.ece === null ? "–" : t.ece.toFixed(3)}</td><td>${t.unanswerable === 0 ? "–" : `${t.abstainedUnanswerable} of ${t.unanswerable}`}</td></tr>`;
  });
  return `<table id="trust"><thead><tr><th>run</th><th>answered %</th><th>right among answered %</th><th>EX % (all)</th><th>right answers kept %</th><th>reliability c = 0 / 1 / 10</th><th>answering all, c = 0 / 1 / 10</th><th>ECE</th><th>unanswerable abstained</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

/** Reliability diagram: mean confidence against accuracy per confidence bin, one colour per run, the diagonal for perfect calibration. */
function reliabilityDiagram(report: EvalReport): string {
  const runs = report.runs.map((run, i) => ({ run, i })).filter((r) => r.run.summary.trust.bins.length > 0);
  if (runs.length === 0) return `<p class="note">No answer carried a confidence (predictions only), so there is no reliability diagram.</p>`;
  const sx = (v: number): number => M.left + v * (W - M.left - M.right);
  const sy = (v: number): number => H - M.bottom - v * (H - M.top - M.bottom);
  const marks = runs.map(({ run, i }) => {
    const color = PALETTE[i % PALETTE.length]!;
    const bins = run.summary.trust.bins;
    const line = bins.map((b) => `${sx(b.confidence).toFixed(1)},${sy(b.accuracy).toFixed(1)}`).join(" ");
    const dots = bins
      .map(
        (b) =>
          `<circle cx="${sx(b.confidence).toFixed(1)}" cy="${sy(b.accuracy).toFixed(1)}" r="${Math.min(9, 3 + Math.sqrt(b.count)).toFixed(1)}" fill="${color}" fill-opacity="0.7"><title>${esc(run.config.label)}: confidence ${b.lo.toFixed(1)}–${b.hi.toFixed(1)}, ${b.count} items, mean ${b.confidence.toFixed(2)}, right ${pct(b.accuracy)}%</title></circle>`,
      )
      .join("");
    return `<polyline points="${line}" fill="none" stroke="${color}" stroke-width="1.5"/>${dots}`;
  });
  let lx = M.left;
  const legend = runs
    .map(({ run, i }) => {
      const mark = `<rect x="${lx}" y="7" width="10" height="10" fill="${PALETTE[i % PALETTE.length]}"/><text x="${lx + 14}" y="16">${esc(run.config.label)} (ECE ${run.summary.trust.ece?.toFixed(3) ?? "–"})</text>`;
      lx += 100 + 7 * run.config.label.length;
      return mark;
    })
    .join("");
  const t = [0, 0.2, 0.4, 0.6, 0.8, 1];
  return (
    `<svg id="reliability" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="reliability diagram">` +
    axes(
      t,
      t,
      sx,
      sy,
      "predicted confidence",
      "observed accuracy",
      (v) => v.toFixed(1),
      (v) => v.toFixed(1),
    ) +
    `<line x1="${sx(0)}" y1="${sy(0)}" x2="${sx(1)}" y2="${sy(1)}" class="grid" stroke-dasharray="4 3"/>` +
    marks.join("") +
    legend +
    `</svg>`
  );
}

const MAX_ITEM_ROWS = 5000;

function itemsTable(run: EvalRun, rule: ExRule): string {
  const shown = run.items.slice(0, MAX_ITEM_ROWS);
  const rows = shown.map((it) => {
    const mark = (ok: boolean): string => (ok ? `<span class="ok">✔</span>` : `<span class="bad">✘</span>`);
    return (
      `<tr><td class="n">${it.index}</td><td>${esc(it.dbId)}</td><td>${esc(it.difficulty ?? "")}</td><td>${esc(it.question)}</td>` +
      `<td><code>${esc(it.gold)}</code></td><td><code>${esc(it.predicted ?? "")}</code></td>` +
      `<td>${EX_RULES.map((r) => mark(it.ex[r])).join(" ")}</td><td>${mark(it.voting[rule])}</td><td>${mark(it.passK[rule])} ${it.candidates.filter((c) => c.ex[rule]).length}/${it.k}</td>` +
      `<td>${esc(it.error ?? "")}${it.errorMessage ? `<br><small>${esc(it.errorMessage)}</small>` : ""}</td>` +
      `<td class="n">${it.confidence === null ? "–" : it.confidence.toFixed(2)}${it.answered ? "" : " ⊘"}${it.doubts?.length ? `<br><small>${esc(it.doubts.join("; "))}</small>` : ""}</td>` +
      `<td class="n">${it.interactions ?? "–"}</td><td class="n">${secs(it.latencyMs)}</td><td class="n">${it.tokens ? `${it.tokens.generated}/${it.tokens.evaluated}` : "–"}</td></tr>`
    );
  });
  const more = run.items.length > shown.length ? `<p class="note">First ${shown.length} of ${run.items.length} items; the JSON record has them all.</p>` : "";
  return (
    `<details><summary>${esc(run.config.label)}: ${run.items.length} items</summary>${more}<table class="items"><thead><tr>` +
    [
      "#",
      "db",
      "difficulty",
      "question",
      "gold",
      "predicted",
      "EX b/s/r",
      "vote",
      "pass@k",
      "error",
      "confidence (⊘ not answered)",
      "inter.",
      "s",
      "tokens gen/eval",
    ]
      .map((h) => `<th>${esc(h)}</th>`)
      .join("") +
    `</tr></thead><tbody>${rows.join("")}</tbody></table></details>`
  );
}

function configList(report: EvalReport): string {
  return report.runs
    .map((run) => {
      const c = run.config;
      const bits = [
        `source ${c.source}`,
        c.profile ? `profile ${c.profile}` : "",
        c.strategy ? `strategy ${c.strategy}` : "",
        c.candidates !== undefined ? `candidates ${c.candidates}` : "",
        c.limit !== undefined ? `limit ${c.limit}` : "",
        `concurrency ${c.concurrency}`,
        `SQL timeout ${c.timeoutMs} ms`,
        `row cap ${c.maxRows}`,
        `wall ${(c.wallMs / 1000).toFixed(1)} s`,
      ].filter(Boolean);
      return `<li><b>${esc(c.label)}</b>: ${esc(bits.join(", "))}</li>`;
    })
    .join("");
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:6px 0;font-size:13px}th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}
th{background:#f4f4f6;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
table.items td{max-width:380px;word-wrap:break-word}code{font-size:12px;white-space:pre-wrap}
.note{color:#666;font-style:italic}.ok{color:#2a7d2a}.bad{color:#b22}.plots{display:flex;flex-wrap:wrap;gap:24px}
svg text{font-size:11px;fill:#333}svg .label{font-size:12px}svg .grid{stroke:#eee}svg .axis{stroke:#666}
.check-ok{color:#2a7d2a}.check-bad{color:#b22;font-weight:bold}`;

/** Where runs scored a second row draw: EX on both draws and the spurious rate per run, under the headline rule. */
function drawsNote(report: EvalReport): string {
  const rule = report.primaryRule;
  const runs = report.runs.filter((run) => run.summary.exBothDraws);
  if (runs.length === 0) return "";
  const bits = runs.map((run) => {
    const s = run.summary;
    const spurious = s.spuriousRate?.[rule];
    return `<li id="draws-${esc(run.config.label)}"><b>${esc(run.config.label)}</b>: EX ${pct(s.ex[rule])}% on the first draw, ${pct(s.exBothDraws![rule])}% on both; spurious rate ${pct(spurious)}%</li>`;
  });
  return `<p>Second row draw (databases with a <code>.draw2.sqlite</code> beside them: the same schema, rows drawn again): an answer right on the first draw only may have hit the matching row by luck. The spurious rate is the share of answers right on exactly one draw among those right on the first (${esc(rule)} rule).</p><ul id="draws">${bits.join("")}</ul>`;
}

/** Renders the report as one self-contained HTML page. */
export function renderHtml(report: EvalReport): string {
  const ds = report.dataset;
  const check = report.selfCheck
    ? report.selfCheck.ok
      ? `<p class="check-ok">Self-check passed: gold vs gold scored 100% under every rule on ${report.selfCheck.checked} questions.</p>`
      : `<p class="check-bad">Self-check FAILED (${report.selfCheck.failures.length} problem(s)); figures below are not trustworthy.</p>`
    : "";
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>reex evaluation${ds.file ? ` — ${esc(ds.file)}` : ""}</title><style>${CSS}</style></head>
<body>
<h1>reex evaluation</h1>
<p>${esc(ds.file ?? "dataset")} · ${ds.count} questions${ds.layout ? ` · ${esc(ds.layout)} layout` : ""}${ds.dbRoot ? ` · databases ${esc(ds.dbRoot)}` : ""} · ${esc(report.createdAt)} · headline rule <b>${esc(report.primaryRule)}</b></p>
${check}
<h2>Summary per run</h2>
${summaryTable(report)}
<p class="note">EX: final SQL; voting: the vote's winning candidate; pass@1: first candidate; pass@k: any candidate. Error rates are shares of items whose final SQL failed (syntax: category syntax; exec: any category; no SQL: none given or the decoder failed). Latency is wall-clock per sample; tokens are per item.</p>
<ul>${configList(report)}</ul>
${drawsNote(report)}
${pairedTable(report)}
<h2>Per difficulty</h2>
${difficultyTable(report)}
<h2>Errors of the final SQL by category</h2>
${errorsTable(report)}
<h2>How far answers can be trusted</h2>
${trustTable(report)}
<p class="note">An answer counts as answered when it is marked answerable: its SQL ran and its confidence reached the threshold. Reliability is TrustSQL's score (Lee et al., 2024): +1 for a right answer or for abstaining on a question marked unanswerable, 0 for abstaining on one that is not, −c for a wrong answer; "answering all" scores every item as answered. ECE: expected calibration error over ten confidence bins.</p>
<h2>Plots</h2>
<div class="plots"><figure>${scatterPlot(report)}<figcaption>Accuracy vs latency per run</figcaption></figure>
<figure>${interactionsHistogram(report)}<figcaption>Interactions per item</figcaption></figure>
<figure>${reliabilityDiagram(report)}<figcaption>Reliability diagram: confidence vs accuracy (dot size: items per bin)</figcaption></figure></div>
<h2>Items</h2>
${report.runs.map((run) => itemsTable(run, report.primaryRule)).join("\n")}
</body></html>
`;
}

/**
 * Training metrics and their report: one JSON row per step in `<run>/metrics.jsonl`, and a
 * self-contained `<run>/report.html` (inline CSS and hand-written inline SVG line charts, no
 * external assets) with a curve per metric and per reward component.
 */
import { existsSync, readFileSync } from "node:fs";
import { writeFile, rename } from "node:fs/promises";
import type { TrainMode } from "./config.js";

/** One row of `metrics.jsonl`: a learner step (or, at step 0, the initial held-out evaluation). */
export interface MetricsRow {
  step: number;
  mode: TrainMode;
  /** ISO time the row was written. */
  time: string;
  /** Wall time of the step, rollouts to reload, seconds. */
  seconds: number;
  rollouts: number;
  /** Mean and population std of the total reward over the step's rollouts (null for SFT). */
  reward_mean: number | null;
  reward_std: number | null;
  /** Mean of each reward component (unweighted). */
  components: Record<string, number>;
  /** Mean of each reward diagnostic (correct, executable, cell precision, …). */
  details: Record<string, number>;
  /** Share of rollouts whose final result is correct (on the first row draw, the database the model saw). */
  train_ex: number | null;
  /** GRPO on databases with a second row draw: the share right on both draws, which is what the reward counts as correct. */
  train_ex_both_draws?: number | null;
  /** GRPO on databases with a second row draw: rollouts right on exactly one draw ÷ rollouts right on the first (null when none is). */
  spurious_rate?: number | null;
  /** Mean response length in generated (SFT: trained) tokens. */
  response_tokens: number;
  /** Mean interaction steps per rollout. */
  interactions: number | null;
  /** Share of rollouts cut off by the token limit. */
  truncated: number | null;
  zero_variance_groups: number | null;
  /** GRPO: groups trained on, and groups sampled for them (more under dynamic sampling). */
  groups?: number;
  sampled_groups?: number;
  /** GRPO: the `replay` traces added to the step's experience (absent without `replay`). */
  replay_records?: number;
  /** GRPO: the step's scheduled questions skipped because their prompt overflowed the context window (absent when none). */
  skipped_questions?: string[];
  /** GRPO: share of trained groups with a non-zero advantage, and with a correct-vs-wrong contrast. */
  informative_share?: number;
  contrast_share?: number;
  /** GRPO: share of the advantage mass explained by correctness (the rest is shaping); null when all advantages are 0. */
  correctness_share?: number | null;
  /** GRPO: the learner's mean |logp − old_logp| of the sampled tokens before the update. */
  old_logprob_abs_diff?: number | null;
  /** GRPO: mean cosine of split-half gradients (learner.splitHalf > 0). */
  split_half_cosine?: number | null;
  /** Held-out EX after this step, when evaluated. */
  heldout_ex: number | null;
  kl: number | null;
  loss: number | null;
  grad_norm: number | null;
  clip_frac: number | null;
  /** Everything the learner reported. */
  learner: Record<string, unknown>;
}

/** Reads `metrics.jsonl` (missing file: no rows; torn last line ignored). */
export function readMetrics(file: string): MetricsRow[] {
  if (!existsSync(file)) return [];
  const rows: MetricsRow[] = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      rows.push(JSON.parse(line) as MetricsRow);
    } catch {
      // a line cut short by a crash; everything before it stands
    }
  }
  return rows;
}

/** One line of a chart. */
export interface Series {
  name: string;
  points: [number, number][];
}

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];

function esc(value: unknown): string {
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function fmt(x: number): string {
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1000 || a < 0.001) return x.toExponential(2);
  return Number(x.toPrecision(3)).toString();
}

/** An inline SVG line chart over steps: axes with min/max labels, one polyline (and dots) per series, a legend. */
export function lineChart(title: string, series: readonly Series[], id = title.toLowerCase().replace(/[^a-z0-9]+/g, "-")): string {
  const W = 420;
  const H = 220;
  const L = 52;
  const R = 12;
  const T = 26;
  const B = 34;
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const head =
    `<svg id="${esc(id)}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}">` +
    `<text x="${W / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">${esc(title)}</text>`;
  if (all.length === 0) return `${head}<text x="${W / 2}" y="${H / 2}" text-anchor="middle" font-size="12" fill="#888">no data yet</text></svg>`;
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - (Math.abs(y0) || 1) * 0.1, y1 + (Math.abs(y1) || 1) * 0.1];
  const sx = (x: number): number => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y: number): number => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  const parts: string[] = [head];
  parts.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#444"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#444"/>`);
  parts.push(`<text x="${L - 4}" y="${sy(y1) + 4}" text-anchor="end" font-size="10">${esc(fmt(y1))}</text>`);
  parts.push(`<text x="${L - 4}" y="${sy(y0) + 4}" text-anchor="end" font-size="10">${esc(fmt(y0))}</text>`);
  parts.push(`<text x="${L}" y="${H - B + 14}" text-anchor="middle" font-size="10">${esc(fmt(x0))}</text>`);
  parts.push(`<text x="${W - R}" y="${H - B + 14}" text-anchor="middle" font-size="10">${esc(fmt(x1))}</text>`);
  parts.push(`<text x="${(L + W - R) / 2}" y="${H - 4}" text-anchor="middle" font-size="10">step</text>`);
  series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length]!;
    const pts = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    if (pts.length === 0) return;
    const d = pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
    parts.push(`<polyline class="series" data-name="${esc(s.name)}" fill="none" stroke="${color}" stroke-width="1.6" points="${d}"/>`);
    for (const [x, y] of pts)
      parts.push(
        `<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.2" fill="${color}"><title>${esc(`${s.name} @ ${x}: ${fmt(y)}`)}</title></circle>`,
      );
    if (series.length > 1) {
      const ly = T + 4 + i * 12;
      parts.push(
        `<rect x="${W - R - 110}" y="${ly - 7}" width="8" height="8" fill="${color}"/><text x="${W - R - 98}" y="${ly}" font-size="10">${esc(s.name)}</text>`,
      );
    }
  });
  parts.push("</svg>");
  return parts.join("");
}

function seriesOf(rows: readonly MetricsRow[], name: string, pick: (r: MetricsRow) => unknown): Series {
  const points: [number, number][] = [];
  for (const r of rows) {
    const v = pick(r);
    if (typeof v === "number" && Number.isFinite(v)) points.push([r.step, v]);
  }
  return { name, points };
}

const CSS = `body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;margin-top:28px}
.charts{display:flex;flex-wrap:wrap;gap:18px}.chart{border:1px solid #ddd;background:#fff}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}
.note{color:#666;font-style:italic}`;

/** Facts about the run shown at the top of the report. */
export interface ReportInfo {
  mode: TrainMode;
  runDir: string;
  model: string;
  description?: string;
  rewardPreset?: string;
  /** Settings shown in the header table. Default {}. */
  settings?: Record<string, unknown>;
}

/** The whole HTML report of a run's metrics rows. */
export function renderTrainingReport(rows: readonly MetricsRow[], info: ReportInfo): string {
  const steps = rows.filter((r) => r.step > 0);
  const componentNames = [...new Set(steps.flatMap((r) => Object.keys(r.components ?? {})))];
  const drawn = steps.some((r) => r.train_ex_both_draws !== undefined);
  const charts: string[] = [];
  if (info.mode === "grpo") {
    charts.push(lineChart("reward (mean)", [seriesOf(steps, "reward", (r) => r.reward_mean)], "reward-mean"));
    charts.push(
      lineChart(
        "reward components (mean, unweighted)",
        componentNames.map((n) => seriesOf(steps, n, (r) => r.components?.[n])),
        "reward-components",
      ),
    );
    for (const n of componentNames) charts.push(lineChart(`component: ${n}`, [seriesOf(steps, n, (r) => r.components?.[n])], `component-${n}`));
    charts.push(
      lineChart(
        "train EX (share correct)",
        [seriesOf(steps, "train EX", (r) => r.train_ex), ...(drawn ? [seriesOf(steps, "on both row draws", (r) => r.train_ex_both_draws)] : [])],
        "train-ex",
      ),
    );
    if (drawn)
      charts.push(
        lineChart("spurious rate (right on one row draw only ÷ right on the first)", [seriesOf(steps, "spurious", (r) => r.spurious_rate)], "spurious-rate"),
      );
    charts.push(lineChart("interactions per rollout", [seriesOf(steps, "interactions", (r) => r.interactions)], "interactions"));
    charts.push(lineChart("zero-variance groups", [seriesOf(steps, "zero-variance groups", (r) => r.zero_variance_groups)], "zero-variance-groups"));
    charts.push(
      lineChart(
        "signal: informative groups, correct-vs-wrong groups, advantage mass from correctness",
        [
          seriesOf(steps, "informative", (r) => r.informative_share),
          seriesOf(steps, "contrast", (r) => r.contrast_share),
          seriesOf(steps, "correctness share", (r) => r.correctness_share),
        ],
        "signal",
      ),
    );
    charts.push(lineChart("old log-prob agreement (mean |Δ|)", [seriesOf(steps, "|Δ logp|", (r) => r.old_logprob_abs_diff)], "old-logprob-diff"));
  }
  charts.push(lineChart("response length (tokens)", [seriesOf(steps, "tokens", (r) => r.response_tokens)], "response-length"));
  charts.push(lineChart("held-out EX", [seriesOf(rows, "held-out EX", (r) => r.heldout_ex)], "heldout-ex"));
  charts.push(lineChart("loss", [seriesOf(steps, "loss", (r) => r.loss)], "loss"));
  charts.push(lineChart("KL to the initial model", [seriesOf(steps, "kl", (r) => r.kl)], "kl"));
  charts.push(lineChart("grad norm", [seriesOf(steps, "grad norm", (r) => r.grad_norm)], "grad-norm"));
  if (info.mode === "grpo") charts.push(lineChart("clip fraction", [seriesOf(steps, "clip fraction", (r) => r.clip_frac)], "clip-fraction"));

  const cols: [string, (r: MetricsRow) => unknown][] = [
    ["step", (r) => r.step],
    ["reward", (r) => r.reward_mean],
    ["train EX", (r) => r.train_ex],
    ...(drawn ? ([["spurious", (r) => r.spurious_rate]] as [string, (r: MetricsRow) => unknown][]) : []),
    ["held-out EX", (r) => r.heldout_ex],
    ["tokens", (r) => r.response_tokens],
    ["interactions", (r) => r.interactions],
    ["zero-var", (r) => r.zero_variance_groups],
    ["loss", (r) => r.loss],
    ["kl", (r) => r.kl],
    ["grad norm", (r) => r.grad_norm],
    ["|Δ old logp|", (r) => r.old_logprob_abs_diff],
    ["clip", (r) => r.clip_frac],
    ["s", (r) => r.seconds],
  ];
  const cell = (v: unknown): string => (typeof v === "number" ? fmt(v) : v === null || v === undefined ? "–" : esc(v));
  const table =
    `<table id="steps"><tr>${cols.map(([h]) => `<th>${esc(h)}</th>`).join("")}</tr>` +
    rows.map((r) => `<tr>${cols.map(([, f]) => `<td>${cell(f(r))}</td>`).join("")}</tr>`).join("") +
    "</table>";
  const settings = Object.entries(info.settings ?? {})
    .map(([k, v]) => `<tr><th>${esc(k)}</th><td style="text-align:left">${esc(typeof v === "string" ? v : JSON.stringify(v))}</td></tr>`)
    .join("");
  const last = steps[steps.length - 1];
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>reex ${esc(info.mode)} training — ${esc(info.runDir)}</title><style>${CSS}</style></head><body>
<h1>reex ${esc(info.mode)} training</h1>
${info.description ? `<p>${esc(info.description)}</p>` : ""}
<p>run <code>${esc(info.runDir)}</code>, initial model <code>${esc(info.model)}</code>${info.rewardPreset ? `, reward preset <b>${esc(info.rewardPreset)}</b>` : ""}; ${steps.length} step(s) recorded${last ? `, last step ${last.step}` : ""}.</p>
${settings ? `<table id="settings">${settings}</table>` : ""}
<h2>Curves</h2><div class="charts">${charts.join("\n")}</div>
<h2>Steps</h2>${rows.length ? table : '<p class="note">no steps yet</p>'}
</body></html>
`;
}

/** Renders the report of `rows` to `file` atomically. */
export async function writeTrainingReport(file: string, rows: readonly MetricsRow[], info: ReportInfo): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, renderTrainingReport(rows, info));
  await rename(tmp, file);
}

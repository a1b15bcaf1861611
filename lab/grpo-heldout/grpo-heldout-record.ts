/**
 * Writes lab/runs/grpo-heldout.json, issue #61's record, from the held-out evaluations of its arms
 * (docs/experiments/2026-12-05-grpo-heldout.md).
 *
 *   npx tsx lab/grpo-heldout/grpo-heldout-record.ts --sets .reex/grpo-sets/sets.json --rollouts DIR --defaults DIR
 *       --start FILE --final FILE --shuffled FILE --rejection FILE [--final-run DIR --shuffled-run DIR --rejection-run DIR]
 *       [--earlier FILE]... [--ship-model FILE --ship SET=DIR:LABEL,DIR:LABEL]... [--out lab/runs/grpo-heldout.json] [--note TEXT]
 *
 * --rollouts: `reex eval --runs` output folders (their report.json; the flag repeats, as arms are evaluated when each
 * finishes) on heldout.json decoded as the rollouts decode, with runs labelled start, final, shuffled and rejection_sampling; --defaults: the same at the server's defaults with runs
 * start and final. --start … --rejection: the four GGUFs, hashed into the record. A question counts as right when it is
 * right on both row draws of its table (on its one draw where it has one); `ex_first_draw` is the first draw's alone.
 * --final-run, --shuffled-run: the GRPO run folders (their metrics.jsonl), --rejection-run: the rejection-sampling
 * folder (its rejection.json): each arm's compute (steps, sampled and trained groups, hours) goes into the record.
 * --earlier: a record an earlier design wrote, kept whole under `earlier` (repeats). --label ARM=LABEL (repeats) reads
 * an arm (start, final, shuffled, rejection_sampling) from runs labelled otherwise, in --rollouts and --defaults alike,
 * so a second design's folders (say final=dense_final) sit beside the first's; --defaults repeats as --rollouts does.
 * --ship-model, --ship: the check that gates shipping a GRPO model as the default: the file that would ship (hashed) and,
 * per set, the shipped model's run and the candidate's run (report folder and label each) at the server's defaults,
 * paired as the arms are (`ship_check` in the record).
 */
import { createHash } from "node:crypto";
import { createReadStream, readFileSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { type ItemScore, pairedDifference } from "../../src/eval/index.js";
import { lexSql } from "../../src/sql/index.js";
import { readMetrics } from "../../src/training/index.js";

const USAGE =
  "usage: npx tsx lab/grpo-heldout/grpo-heldout-record.ts --sets FILE --rollouts DIR --defaults DIR --start FILE --final FILE --shuffled FILE --rejection FILE [--final-run DIR] [--shuffled-run DIR] [--rejection-run DIR] [--earlier FILE] [--label ARM=LABEL] [--ship-model FILE --ship SET=DIR:LABEL,DIR:LABEL] [--out FILE] [--note TEXT]";

const { values } = parseArgs({
  options: {
    sets: { type: "string" },
    rollouts: { type: "string", multiple: true },
    defaults: { type: "string", multiple: true },
    start: { type: "string" },
    final: { type: "string" },
    shuffled: { type: "string" },
    rejection: { type: "string" },
    "final-run": { type: "string" },
    "shuffled-run": { type: "string" },
    "rejection-run": { type: "string" },
    earlier: { type: "string", multiple: true },
    label: { type: "string", multiple: true },
    "ship-model": { type: "string" },
    ship: { type: "string", multiple: true },
    out: { type: "string", default: "lab/runs/grpo-heldout.json" },
    note: { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
for (const k of ["sets", "rollouts", "defaults", "start", "final", "shuffled", "rejection"] as const) {
  if (!values[k]) {
    console.error(`--${k} is required\n${USAGE}`);
    process.exit(1);
  }
}

interface Run {
  config: { label: string; model?: string };
  items: ItemScore[];
}

/** The runs of a report folder, by label. */
function runsOf(dir: string): Map<string, Run> {
  const report = JSON.parse(readFileSync(join(resolve(dir), "report.json"), "utf8")) as { runs: Run[] };
  return new Map(report.runs.map((r) => [r.config.label, r]));
}

/** The items with `ex` meaning right on both row draws. */
function bothDraws(items: readonly ItemScore[]): ItemScore[] {
  return items.map((i) => ({
    ...i,
    ex: {
      bird: i.ex.bird && (i.exSecondDraw?.bird ?? true),
      spider: i.ex.spider && (i.exSecondDraw?.spider ?? true),
      refined: i.ex.refined && (i.exSecondDraw?.refined ?? true),
    },
  }));
}

const ex = (items: readonly ItemScore[]): number => items.filter((i) => i.ex.bird).length / items.length;

/** One arm against the start: n, EX (both draws), its difference, won/lost and the exact McNemar p. */
function arm(start: Run, run: Run) {
  const a = bothDraws(run.items);
  const s = bothDraws(start.items);
  const d = pairedDifference(a, s);
  return {
    n: a.length,
    ex: round(ex(a)),
    ex_first_draw: round(ex(run.items)),
    delta: round(d.delta),
    won: d.firstOnly,
    lost: d.secondOnly,
    p: Number(d.pValue.toPrecision(3)),
    ci95: d.ci95.map(round),
    shape: shape(run),
  };
}

/** WHERE conditions joined by AND at the top level, counted on the lexer's tokens (WikiSQL's gold and answers are one-table conjunctions); null without SQL. */
function conditions(sql: string | null): number | null {
  if (!sql) return null;
  const words = lexSql(sql).filter((t) => t.kind === "word" && t.depth === 0);
  const where = words.findIndex((t) => t.upper === "WHERE");
  if (where < 0) return 0;
  const rest = words.slice(where + 1);
  const stop = rest.findIndex((t) => ["GROUP", "ORDER", "LIMIT", "HAVING", "UNION", "EXCEPT", "INTERSECT"].includes(t.upper));
  return (stop < 0 ? rest : rest.slice(0, stop)).filter((t) => t.upper === "AND").length + 1;
}

/** Answers that failed, by the error's category (missing_column, syntax, no_sql, …), most frequent first. */
function errorCounts(items: readonly ItemScore[]): Record<string, number> {
  const counts = new Map<string, number>();
  for (const item of items) if (item.error) counts.set(item.error, (counts.get(item.error) ?? 0) + 1);
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]));
}

/** How a run's answers differ from gold in shape: fewer or more WHERE conditions, no SQL, probe rounds, right on the first draw only. */
function shape(run: Run) {
  let fewer = 0;
  let more = 0;
  let noSql = 0;
  for (const item of run.items) {
    const got = conditions(item.predicted);
    const want = conditions(item.gold)!;
    if (got === null) noSql++;
    else if (got < want) fewer++;
    else if (got > want) more++;
  }
  return {
    fewer_conditions_than_gold: fewer,
    more_conditions_than_gold: more,
    no_sql: noSql,
    mean_interactions: round(run.items.reduce((a, i) => a + (i.interactions ?? 0), 0) / run.items.length),
    right_on_first_draw_only: run.items.filter((i) => i.ex.bird && i.exSecondDraw?.bird === false).length,
    errors: errorCounts(run.items),
  };
}

const round = (x: number): number => Math.round(x * 1e4) / 1e4;

/** A GRPO run's compute from its metrics.jsonl (a resume cuts the file back to its checkpoint, so each step has one row). */
function grpoCompute(dir: string) {
  const rows = readMetrics(join(resolve(dir), "metrics.jsonl"));
  const steps = rows.filter((r) => r.step > 0);
  return {
    run: relative(process.cwd(), resolve(dir)),
    steps: steps.length,
    sampled_groups: steps.reduce((a, r) => a + (r.sampled_groups ?? 0), 0),
    trained_groups: steps.reduce((a, r) => a + (r.groups ?? 0), 0),
    trained_rollouts: steps.reduce((a, r) => a + r.rollouts, 0),
    hours: round(rows.reduce((a, r) => a + r.seconds, 0) / 3600),
  };
}

/** The rejection-sampling arm's compute from its rejection.json. */
function rejectionCompute(dir: string) {
  const c = JSON.parse(readFileSync(join(resolve(dir), "rejection.json"), "utf8")) as {
    groups: number;
    groupSize: number;
    right: number;
    kept: number;
    sft: unknown;
  };
  return { run: relative(process.cwd(), resolve(dir)), sampled_groups: c.groups, group_size: c.groupSize, right: c.right, kept_traces: c.kept, sft: c.sft };
}

function need(runs: Map<string, Run>, label: string, dir: string): Run {
  const run = runs.get(label);
  if (!run) throw new Error(`${dir}: no report.json there has a run labelled "${label}" (it has ${[...runs.keys()].join(", ")})`);
  return run;
}

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Whether two runs scored the same questions in the same order. */
const sameQuestions = (a: Run, b: Run): boolean => a.items.length === b.items.length && a.items.every((it, i) => it.questionId === b.items[i]!.questionId);

/** The runs of several report folders by label; a label given twice, or items that differ in ids, is an error. */
function mergedRuns(dirs: readonly string[]): Map<string, Run> {
  const merged = new Map<string, Run>();
  for (const dir of dirs)
    for (const [label, run] of runsOf(dir)) {
      if (merged.has(label)) throw new Error(`the run labelled "${label}" is in more than one of ${dirs.join(", ")}`);
      merged.set(label, run);
    }
  const [first, ...rest] = [...merged.values()];
  for (const run of rest)
    if (!sameQuestions(run, first!)) throw new Error(`the run labelled "${run.config.label}" scored other questions than "${first!.config.label}"`);
  return merged;
}

const ARMS = ["start", "final", "shuffled", "rejection_sampling"] as const;

/** The run label of each arm: its own name unless --label says otherwise. */
function labels(pairs: readonly string[]): Record<(typeof ARMS)[number], string> {
  const out = Object.fromEntries(ARMS.map((a) => [a, a])) as Record<(typeof ARMS)[number], string>;
  for (const pair of pairs) {
    const [arm, label] = pair.split("=", 2) as [string, string | undefined];
    if (!label || !(ARMS as readonly string[]).includes(arm)) throw new Error(`--label ${pair}: want ARM=LABEL, ARM one of ${ARMS.join(", ")}`);
    out[arm as (typeof ARMS)[number]] = label;
  }
  return out;
}

/** One `--ship SET=DIR:LABEL,DIR:LABEL` entry: the shipped model's run and the candidate's, paired. */
function shipSet(spec: string) {
  const [set, pair] = spec.split("=", 2) as [string, string | undefined];
  const sides = (pair ?? "").split(",").map((side) => {
    const at = side.lastIndexOf(":");
    return at > 0 ? { dir: side.slice(0, at), label: side.slice(at + 1) } : null;
  });
  if (!set || sides.length !== 2 || sides.some((s) => !s)) throw new Error(`--ship ${spec}: want SET=DIR:LABEL,DIR:LABEL`);
  const [base, cand] = sides.map((s) => need(runsOf(s!.dir), s!.label, s!.dir)) as [Run, Run];
  if (!sameQuestions(base, cand)) throw new Error(`--ship ${spec}: the two runs scored other questions`);
  return [set, { shipped: sides[0]!.label, candidate: sides[1]!.label, shipped_ex: round(ex(bothDraws(base.items))), ...arm(base, cand) }] as const;
}

async function main(): Promise<void> {
  const label = labels(values.label ?? []);
  const rollouts = mergedRuns(values.rollouts!);
  const rolloutDirs = values.rollouts!.join(", ");
  const defaults = mergedRuns(values.defaults!);
  const defaultDirs = values.defaults!.join(", ");
  const start = need(rollouts, label.start, rolloutDirs);
  const dStart = need(defaults, label.start, defaultDirs);
  const dFinal = need(defaults, label.final, defaultDirs);
  const sets = JSON.parse(readFileSync(resolve(values.sets!), "utf8")) as Record<string, unknown>;
  const model = async (file: string) => ({ file: relative(process.cwd(), resolve(file)), sha256: await sha256(resolve(file)) });
  const record = {
    issue: 61,
    ...(values.note ? { note: values.note } : {}),
    sets,
    models: {
      start: await model(values.start!),
      final: await model(values.final!),
      shuffled: await model(values.shuffled!),
      rejection_sampling: await model(values.rejection!),
    },
    scoring:
      "greedy, decoded as the rollouts decode (no final retries, unconstrained, no server rewrites); right = right on both row draws; p = exact two-sided McNemar against the start",
    start_ex: round(ex(bothDraws(start.items))),
    start_ex_first_draw: round(ex(start.items)),
    start_shape: shape(start),
    final: arm(start, need(rollouts, label.final, rolloutDirs)),
    shuffled: arm(start, need(rollouts, label.shuffled, rolloutDirs)),
    rejection_sampling: arm(start, need(rollouts, label.rejection_sampling, rolloutDirs)),
    compute: {
      ...(values["final-run"] ? { final: grpoCompute(values["final-run"]) } : {}),
      ...(values["shuffled-run"] ? { shuffled: grpoCompute(values["shuffled-run"]) } : {}),
      ...(values["rejection-run"] ? { rejection_sampling: rejectionCompute(values["rejection-run"]) } : {}),
    },
    defaults: { start_ex: round(ex(bothDraws(dStart.items))), final_ex: round(ex(bothDraws(dFinal.items))), final: arm(dStart, dFinal) },
    ...(values.ship?.length
      ? {
          ship_check: {
            ...(values["ship-model"] ? { candidate: await model(values["ship-model"]) } : {}),
            scoring:
              "greedy at the server's defaults; right = right on both row draws where a set has two; p = exact two-sided McNemar, the candidate against the shipped model",
            sets: Object.fromEntries(values.ship.map(shipSet)),
          },
        }
      : {}),
    ...(values.earlier ? { earlier: values.earlier.map((f) => JSON.parse(readFileSync(resolve(f), "utf8")) as unknown) } : {}),
  };
  writeFileSync(resolve(values.out), `${JSON.stringify(record, null, 2)}\n`);
  console.log(
    `start ${record.start_ex}; final ${record.final.ex} (${record.final.won} won, ${record.final.lost} lost, p ${record.final.p}); shuffled ${record.shuffled.ex} (p ${record.shuffled.p}); rejection sampling ${record.rejection_sampling.ex} (p ${record.rejection_sampling.p}); defaults ${record.defaults.start_ex} → ${record.defaults.final_ex} → ${values.out}`,
  );
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createReport, writeReport, type EvalRun, type ItemScore } from "../../src/eval/index.js";
import { renderHtml, summarize } from "../../src/eval/testing.js";
import { makeFixture } from "./fixtures.js";

function item(index: number, difficulty: string, correct: boolean, interactions: number | null, latencyMs: number | null): ItemScore {
  const ex = { bird: correct, spider: correct, refined: correct };
  return {
    index,
    questionId: index,
    dbId: "shop",
    difficulty,
    question: `question <${index}> & more`,
    gold: "SELECT 1",
    predicted: correct ? "SELECT 1" : "SELECT 2",
    ex,
    voting: ex,
    pass1: ex,
    passK: { bird: true, spider: true, refined: true },
    k: 4,
    error: null,
    candidates: [],
    interactions,
    latencyMs,
    tokens: latencyMs === null ? null : { generated: 100, evaluated: 150 },
    confidence: null,
    answered: correct,
  };
}

function run(label: string, items: ItemScore[]): EvalRun {
  return {
    config: { label, source: "decode", concurrency: 1, timeoutMs: 10_000, maxRows: 100_000, startedAt: "2025-01-01T00:00:00.000Z", wallMs: 1000 },
    items,
    summary: summarize(items),
  };
}

const runs = [
  run("greedy", [item(0, "simple", true, 1, 600), item(1, "moderate", false, 0, 500), item(2, "challenging", false, 2, 700)]),
  run("linear", [item(0, "simple", true, 3, 5000), item(1, "moderate", true, 2, 5400), item(2, "challenging", false, 5, 5600)]),
  run("tree", [item(0, "simple", true, 2, 2500), item(1, "moderate", true, 1, 2700), item(2, "challenging", true, 3, 2600)]),
];

describe("the evaluation report", () => {
  it("writes the JSON record and a self-contained HTML page with tables and SVG plots", () => {
    const out = join(makeFixture().dir, "report-out");
    const report = createReport({ runs, dataset: { file: "dev.json", layout: "bird", count: 3 }, selfCheck: { ok: true, checked: 3, failures: [] } });
    const paths = writeReport(report, out);
    expect(existsSync(paths.json) && existsSync(paths.html)).toBe(true);

    const json = JSON.parse(readFileSync(paths.json, "utf8"));
    expect(json.runs.map((r: EvalRun) => r.config.label)).toEqual(["greedy", "linear", "tree"]);
    expect(json.primaryRule).toBe("bird");

    const html = readFileSync(paths.html, "utf8");
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<table id="summary"');
    expect(html).toContain('<table id="by-difficulty"');
    for (const label of ["greedy", "linear", "tree", "simple", "moderate", "challenging"]) expect(html).toContain(`>${label}<`);
    expect(html).toContain('<svg id="accuracy-latency"');
    expect(html).toContain('<svg id="interactions"');
    expect(html).toContain("question &#60;1&#62; &#38; more");
    expect(html).toContain("Self-check passed");
    expect(html).not.toMatch(/<script|<link|<img|url\(|@import/i);
    for (const ref of html.match(/https?:\/\/[^"\s<]*/g) ?? []) expect(ref).toBe("http://www.w3.org/2000/svg");
  });

  it("explains the missing plots for a predictions-only run instead of drawing empty axes", () => {
    const bare = run("predictions", [item(0, "simple", true, null, null)]);
    bare.config.source = "predictions";
    const html = renderHtml(createReport({ runs: [bare] }));
    expect(html).toContain('<table id="summary"');
    expect(html).not.toContain("<svg");
    expect(html).toContain("No latency was measured");
  });

  it("compares every later run with the first question by question", () => {
    const html = renderHtml(createReport({ runs }));
    const table = html.slice(html.indexOf('<table id="paired"'), html.indexOf("</table>", html.indexOf('<table id="paired"')));
    // tree is right on items 1 and 2, which greedy got wrong: +66.7 points on 2 discordant questions.
    expect(table).toMatch(/<td>tree<\/td><td class="n">\+66\.7<\/td>.*?<td class="n">2<\/td><td class="n">0<\/td><td class="n">0\.500<\/td>/);
    expect(table).toMatch(/<td>linear<\/td><td class="n">\+33\.3<\/td>/);
  });

  it("does not pair runs over different questions", () => {
    const other = run("other", [item(7, "simple", true, 1, 600)]);
    const html = renderHtml(createReport({ runs: [runs[0]!, other] }));
    expect(html).not.toContain('<table id="paired"');
    expect(html).toContain("not compared pairwise");
  });
});

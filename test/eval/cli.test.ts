import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run, summary } from "../../src/cli/eval.js";
import { buildExamples, QUESTIONS_FILE } from "../../src/examples/index.js";
import { BIRD_QUESTIONS, makeFixture, PREDICTIONS, writeJson, type Fixture } from "./fixtures.js";

let fx: Fixture;
let out: string[];
let err: string[];

beforeAll(() => {
  fx = makeFixture();
});

function capture(): void {
  out = [];
  err = [];
  vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  vi.spyOn(process.stderr, "write").mockImplementation(() => true);
}
afterEach(() => {
  vi.restoreAllMocks();
});

describe("reex eval --predictions", () => {
  it("self-checks, scores, writes the JSON and HTML report and prints their paths", async () => {
    const preds = join(fx.dir, "cli-predict.sql");
    writeFileSync(preds, PREDICTIONS.join("\n") + "\n");
    const outDir = join(fx.dir, "cli-out");
    capture();
    const code = await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--predictions", preds, "--out", outDir]);
    expect(code, err.join("\n")).toBe(0);
    expect(err.join("\n")).toContain("self-check passed");
    expect(out).toContain(`wrote ${join(outDir, "report.json")}`);
    expect(out).toContain(`wrote ${join(outDir, "report.html")}`);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.selfCheck.ok).toBe(true);
    expect(report.runs[0].summary.ex.bird).toBeCloseTo(0.5);
    expect(readFileSync(join(outDir, "report.html"), "utf8")).toContain("<table");
    expect(summary).toMatch(/\w/);
    // the error columns say they are error rates, as the HTML report does
    expect(out.join("\n")).toMatch(/syntax err\s+exec err/);
    expect(out.join("\n")).toContain("syntax err / exec err are error rates");
  });

  it("scores only the first N questions with --limit, ignoring the rest of the file", async () => {
    const preds = join(fx.dir, "cli-predict-limit.sql");
    writeFileSync(preds, PREDICTIONS.join("\n"));
    const outDir = join(fx.dir, "cli-out-limit");
    capture();
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--predictions", preds, "--limit", "2", "--out", outDir, "--quiet"])).toBe(0);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.runs[0].summary.count).toBe(2);
    expect(report.runs[0].summary.ex).toEqual({ bird: 1, spider: 0.5, refined: 1 });
  });

  it("aborts loudly, writing nothing, when the self-check fails", async () => {
    const dataset = writeJson(fx, "broken-gold.json", [...BIRD_QUESTIONS.slice(0, 2), { ...BIRD_QUESTIONS[2], SQL: "SELECT nope FROM products" }]);
    const preds = join(fx.dir, "three.sql");
    writeFileSync(preds, PREDICTIONS.slice(0, 3).join("\n"));
    const outDir = join(fx.dir, "never-written");
    capture();
    expect(await run(["--dataset", dataset, "--db-root", fx.dbRoot, "--predictions", preds, "--out", outDir, "--quiet"])).toBe(1);
    expect(err.join("\n")).toMatch(/SELF-CHECK FAILED[\s\S]*question 2 \(shop\)/);
    expect(existsSync(outDir)).toBe(false);
  });

  it("rejects bad arguments with exit code 2", async () => {
    capture();
    expect(await run(["--dataset", fx.birdFile])).toBe(2);
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--strategy", "beam"])).toBe(2);
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--strategy", "greedy", "--predictions", "x"])).toBe(2);
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--predictions", "x", "--limit", "0"])).toBe(2);
    expect(await run(["--help"])).toBe(0);
  });
});

describe("the example databases", () => {
  it("pass the self-check: every gold query scores 100% against itself under every rule", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reex-eval-examples-"));
    await buildExamples(dir);
    const golds = JSON.parse(readFileSync(join(dir, QUESTIONS_FILE), "utf8")) as { SQL: string }[];
    const preds = join(dir, "gold.sql");
    writeFileSync(preds, golds.map((q) => q.SQL.replace(/\s*\n\s*/g, " ")).join("\n"));
    const outDir = join(dir, "out");
    capture();
    const code = await run(["--dataset", join(dir, QUESTIONS_FILE), "--db-root", join(dir, "databases"), "--predictions", preds, "--out", outDir, "--quiet"]);
    expect(code, err.join("\n")).toBe(0);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.runs[0].summary.count).toBe(golds.length);
    expect(report.runs[0].summary.ex).toEqual({ bird: 1, spider: 1, refined: 1 });
  });
});

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Config } from "../../src/config/index.js";
import type { Answer, AnswerRequest } from "../../src/decoding/types.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { BIRD_QUESTIONS, makeFixture } from "./fixtures.js";

const seen: { config?: Config; requests: AnswerRequest[]; closed: number } = { requests: [], closed: 0 };

/** A stand-in runtime: greedy answers the gold SQL, other strategies return a wrong and a right candidate with the wrong one winning. */
vi.mock("../../src/runtime/index.js", () => ({
  createRuntime: async (config: Config) => {
    seen.config = config;
    const executor = new ExecutorPool({ workers: 1 });
    return {
      executor,
      policy: { info: { metadata: {} } },
      decode: async (req: AnswerRequest): Promise<Answer> => {
        seen.requests.push(req);
        const gold = BIRD_QUESTIONS.find((q) => q.question === req.question)!.SQL;
        const usage = { promptTokens: 50, evaluatedTokens: 80, generatedTokens: 30 };
        if (req.strategy === "greedy") {
          return {
            sql: gold,
            answerable: true,
            candidates: [{ index: 0, path: "0", sql: gold, answerable: true, group: 0, votes: 1, interactions: 1, meanLogprob: -1, text: "" }],
            winner: 0,
            decidedBy: "majority",
            usage,
            timings: { totalMs: 1 },
            // as the decoder counts them: 7 tokens an example shown
            ...(req.examples?.length
              ? {
                  shown: {
                    examples: req.examples.map((e) => ({ id: e.id, question: e.question, score: e.score })),
                    turns: 0,
                    exampleTokens: 7 * req.examples.length,
                    turnTokens: 0,
                  },
                }
              : {}),
          };
        }
        return {
          sql: "SELECT 42",
          answerable: true,
          candidates: [
            { index: 0, path: "0", sql: "SELECT 42", answerable: true, group: 0, votes: 1, interactions: 2, meanLogprob: -0.1, text: "" },
            {
              index: 1,
              path: "1",
              sql: gold,
              answerable: true,
              group: 1,
              votes: 1,
              interactions: 3,
              meanLogprob: -0.9,
              text: "",
              repairs: [{ from: "x", to: "y" }],
            },
          ],
          winner: 0,
          decidedBy: "tie-logprob",
          usage,
          timings: { totalMs: 1 },
        };
      },
      close: async () => {
        seen.closed += 1;
        await executor.close();
      },
    };
  },
}));

afterEach(() => {
  vi.restoreAllMocks();
});

describe("reex eval --strategy", () => {
  it("runs every listed strategy through the runtime's decoder into one report", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const outDir = join(fx.dir, "decode-out");
    const out: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);

    const code = await run([
      "--dataset",
      fx.birdFile,
      "--db-root",
      fx.dbRoot,
      "--strategy",
      "greedy,linear",
      "--candidates",
      "2",
      "--limit",
      "4",
      "--model",
      "/models/x.gguf",
      "--out",
      outDir,
    ]);
    expect(code).toBe(0);
    expect(seen.config!.policy.model).toBe("/models/x.gguf");
    expect(seen.closed).toBe(1);
    expect(seen.requests.map((r) => [r.strategy, r.candidates])).toEqual([...Array(4).fill(["greedy", undefined]), ...Array(4).fill(["linear", 2])]);

    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.runs.map((r: { config: { label: string } }) => r.config.label)).toEqual(["greedy", "linear"]);
    const [greedy, linear] = report.runs;
    expect(greedy.summary.ex).toEqual({ bird: 1, spider: 1, refined: 1 });
    expect(linear.summary.voting.bird).toBe(0);
    expect(linear.summary.passK.bird).toBe(1);
    expect(linear.summary.avgInteractions).toBe(2);
    // a candidate whose final SQL the decoder rebound keeps its swaps in the report; the others have none
    expect(linear.items[0].candidates.map((c: { repairs?: unknown }) => c.repairs)).toEqual([undefined, [{ from: "x", to: "y" }]]);
    const html = readFileSync(join(outDir, "report.html"), "utf8");
    expect(html).toContain('<svg id="accuracy-latency"');
    expect(out.some((l) => l.startsWith("greedy"))).toBe(true);
    expect(out).toContain(`wrote ${join(outDir, "report.html")}`);
  });
});

describe("reex eval --runs", () => {
  it("runs labelled model × prompt family × strategy entries into one report, loading each model once", async () => {
    const { writeFileSync } = await import("node:fs");
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const outDir = join(fx.dir, "runs-out");
    const runsFile = join(fx.dir, "runs.json");
    writeFileSync(
      runsFile,
      JSON.stringify([
        { label: "direct", model: "a.gguf", promptFamily: "direct", strategy: "greedy" },
        { label: "exec", model: "a.gguf", promptFamily: "execution-aware", strategy: "greedy", schemaHints: false },
        { label: "exec-vote", model: "b.gguf", strategy: "linear", candidates: 2 },
        { label: "adapted", model: "b.gguf", lora: ["b-reex-lora.gguf"], strategy: "greedy" },
      ]),
    );
    seen.requests = [];
    seen.closed = 0;
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const code = await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--runs", runsFile, "--limit", "2", "--out", outDir, "--quiet"]);
    expect(code).toBe(0);
    expect(seen.config!.policy.model).toBe(join(fx.dir, "b.gguf")); // the last one loaded; resolved against the runs file
    expect(seen.config!.policy.lora).toEqual([join(fx.dir, "b-reex-lora.gguf")]);
    expect(seen.closed).toBe(3); // a.gguf once for two runs, then b.gguf, then b.gguf with the adapter
    expect(seen.requests.map((r) => [r.promptFamily, r.strategy, r.candidates, r.schemaHints])).toEqual([
      ["direct", "greedy", undefined, undefined],
      ["direct", "greedy", undefined, undefined],
      ["execution-aware", "greedy", undefined, false],
      ["execution-aware", "greedy", undefined, false],
      [undefined, "linear", 2, undefined],
      [undefined, "linear", 2, undefined],
      [undefined, "greedy", undefined, undefined],
      [undefined, "greedy", undefined, undefined],
    ]);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.runs.map((r: { config: { label: string } }) => r.config.label)).toEqual(["direct", "exec", "exec-vote", "adapted"]);
    expect(report.runs.map((r: { config: { lora?: string[] } }) => r.config.lora)).toEqual([
      undefined,
      undefined,
      undefined,
      [join(fx.dir, "b-reex-lora.gguf")],
    ]);
  });

  it("refuses a runs file with an unknown field or a repeated label, naming the entry", async () => {
    const { writeFileSync } = await import("node:fs");
    const { readRunSpecs } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const bad = join(fx.dir, "bad-runs.json");
    writeFileSync(bad, JSON.stringify([{ label: "x", strategy: "greedy", topK: 40 }]));
    expect(() => readRunSpecs(bad)).toThrow(/0: Unrecognized key/);
    writeFileSync(bad, JSON.stringify([{ label: "x", strategy: "tree", topP: 0 }]));
    expect(() => readRunSpecs(bad)).toThrow(/0\.topP/);
    // sampling settings are a run's own, so two runs can draw alike
    writeFileSync(bad, JSON.stringify([{ label: "x", strategy: "tree", temperature: 1, topP: 0.9, seed: 7 }]));
    expect(readRunSpecs(bad)[0]).toMatchObject({ temperature: 1, topP: 0.9, seed: 7 });
    writeFileSync(
      bad,
      JSON.stringify([
        { label: "x", strategy: "greedy" },
        { label: "x", strategy: "tree" },
      ]),
    );
    expect(() => readRunSpecs(bad)).toThrow(/label "x" is used twice/);
    writeFileSync(bad, JSON.stringify([{ label: "x", strategy: "beam" }]));
    expect(() => readRunSpecs(bad)).toThrow(/0\.strategy/);
  });
});

describe("reex eval --examples-from", () => {
  it("offers each question the most similar questions of its own database from the pool, never its own, and records k in the run", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const { writeJson } = await import("./fixtures.js");
    const fx = makeFixture();
    const pool = writeJson(fx, "train.json", [
      { db_id: "shop", question: "How many products are there?", SQL: "SELECT COUNT(*) FROM products", evidence: "" },
      { db_id: "shop", question: "How many fruit products are there?", SQL: "SELECT COUNT(*) FROM products WHERE category = 'fruit'", evidence: "" },
      { db_id: "shop", question: "List every category.", SQL: "SELECT DISTINCT category FROM products", evidence: "" },
      { db_id: "zoo", question: "How many animals are there?", SQL: "SELECT COUNT(*) FROM animals", evidence: "" },
    ]);
    const outDir = join(fx.dir, "examples-out");
    const err: string[] = [];
    vi.spyOn(console, "log").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
    vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    seen.requests.length = 0;
    const runs = writeJson(fx, "runs.json", [
      { label: "k0", strategy: "greedy", examples: 0 },
      { label: "k2", strategy: "greedy" },
    ]);
    const code = await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--runs", runs, "--examples-from", pool, "--examples", "2", "--out", outDir]);
    expect(code).toBe(0);
    const k0 = seen.requests.slice(0, BIRD_QUESTIONS.length);
    const k2 = seen.requests.slice(BIRD_QUESTIONS.length);
    expect(k0.every((r) => r.examples === undefined)).toBe(true);
    const first = k2.find((r) => r.question === "How many products are there?")!;
    // its own question is in the pool and is left out; the zoo question shares words but is another database
    expect(first.examples!.map((e) => e.question)).toEqual(["How many fruit products are there?"]);
    const zoo = k2.find((r) => r.question === "How many animals have four legs?")!;
    expect(zoo.examples!.map((e) => [e.question, e.sql])).toEqual([["How many animals are there?", "SELECT COUNT(*) FROM animals"]]);
    expect(k2.every((r) => (r.examples?.length ?? 0) <= 2)).toBe(true);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8"));
    expect(report.runs[0].config.examples).toBeUndefined();
    expect(report.runs[1].config.examples).toEqual({ k: 2, source: pool });
    // the prompt tokens the examples took: per item, and their mean over the items shown some
    expect(report.runs[0].summary.exampleTokensPerItem).toBeNull();
    const shown = k2.map((r) => r.examples?.length ?? 0).filter((n) => n > 0);
    expect(report.runs[1].summary.exampleTokensPerItem).toBeCloseTo((7 * shown.reduce((a, b) => a + b, 0)) / shown.length, 6);
    // the first run's report was written before the second began, so a long evaluation keeps what it finished
    expect(err).toContain(`reex eval: 1 of 2 runs done; the report so far is in ${join(outDir, "report.json")}`);
  });

  it("refuses --examples without a pool", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const err: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--strategy", "greedy", "--examples", "3"])).toBe(2);
    expect(err.join("\n")).toMatch(/need --examples-from/);
  });
});

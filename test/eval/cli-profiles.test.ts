/**
 * `reex eval` with model profiles: each run of one report decodes in its own profile through the
 * real decoder, rollout and parser (a scripted policy stands in for the model, so the protocol it
 * answers in is known), and the report names each run's profile.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Config } from "../../src/config/index.js";
import type { ScriptContext } from "../../src/policy/testing.js";
import { BIRD_QUESTIONS, makeFixture } from "./fixtures.js";

const seen = vi.hoisted(() => ({
  calls: [] as ScriptContext[],
  writes: "follow-prompt" as "follow-prompt" | "skyrl",
  modelName: undefined as string | undefined,
}));

function goldOf(prompt: string): string {
  const q = BIRD_QUESTIONS.find((x) => prompt.includes(x.question));
  if (!q) throw new Error("the prompt names no fixture question");
  return q.SQL;
}

/**
 * The stand-in model: answers in the protocol its prompt asks for (`<solution>` → SkyRL-SQL tags,
 * else ReEx tags), or always in SkyRL-SQL tags; one probe, then the gold SQL.
 */
function script(ctx: ScriptContext): string {
  const gold = goldOf(ctx.prompt);
  const skyrl = seen.writes === "skyrl" || ctx.prompt.includes("<solution>");
  if (skyrl) {
    if (!ctx.text.includes("</observation>")) return "<think>look first</think>\n<sql>SELECT COUNT(*) FROM sqlite_master</sql>";
    return `<think>done</think>\n<solution>${gold}</solution>`;
  }
  if (!ctx.text.includes("</result>")) return "<think>look first</think>\n<intermediate_sql>SELECT COUNT(*) FROM sqlite_master</intermediate_sql>";
  return `<think>done</think>\n<final_sql>${gold}</final_sql>`;
}

/** The runtime with the real decoder over a scripted policy. */
vi.mock("../../src/runtime/index.js", async () => {
  const { ExecutorPool } = await import("../../src/sql/index.js");
  const { ScriptedPolicy } = await import("../../src/policy/tooling.js");
  const { createDecoder } = await import("../../src/decoding/index.js");
  return {
    createRuntime: async (config: Config) => {
      const executor = new ExecutorPool({ workers: 1 });
      /** Names itself in its metadata as a GGUF would, when the test sets a name. */
      class Named extends ScriptedPolicy {
        override get info() {
          return { ...super.info, ...(seen.modelName ? { metadata: { name: seen.modelName } } : {}) };
        }
      }
      const policy = new Named((ctx) => {
        seen.calls.push(ctx);
        return script(ctx);
      });
      const decode = createDecoder({ policy, executor, config, indexDir: join(config.sql.dataDir, "indexes") });
      return {
        executor,
        policy,
        decode,
        close: async () => {
          decode.close();
          await policy.close();
          await executor.close();
        },
      };
    },
  };
});

afterEach(() => {
  vi.restoreAllMocks();
  seen.calls = [];
  seen.writes = "follow-prompt";
  seen.modelName = undefined;
});

function quiet(out: string[] = [], err: string[] = []): void {
  vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
  vi.spyOn(process.stderr, "write").mockImplementation(() => true);
}

interface ReportRun {
  config: { label: string; profile?: string; request?: { promptFamily?: string } };
  summary: { ex: { bird: number }; avgInteractions: number | null };
}

describe("reex eval --runs with model profiles", () => {
  it("decodes each run in its own profile and names every run's profile in one report", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const runsFile = join(fx.dir, "runs.json");
    writeFileSync(
      runsFile,
      JSON.stringify([
        { label: "reex", profile: "reex", strategy: "greedy" },
        { label: "skyrl", profile: "skyrl-sql", strategy: "greedy" },
      ]),
    );
    const outDir = join(fx.dir, "out");
    const out: string[] = [];
    quiet(out);
    const code = await run([
      "--dataset",
      fx.birdFile,
      "--db-root",
      fx.dbRoot,
      "--runs",
      runsFile,
      "--limit",
      "3",
      "--out",
      outDir,
      "--quiet",
      "--sql.dataDir",
      join(fx.dir, "data"),
    ]);
    expect(code).toBe(0);

    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8")) as { runs: ReportRun[] };
    expect(report.runs.map((r) => [r.config.label, r.config.profile])).toEqual([
      ["reex", "reex"],
      ["skyrl", "skyrl-sql"],
    ]);
    for (const r of report.runs) {
      expect(r.summary.ex.bird).toBe(1);
      expect(r.summary.avgInteractions).toBe(1);
    }
    const html = readFileSync(join(outDir, "report.html"), "utf8");
    expect(html).toContain("profile reex");
    expect(html).toContain("profile skyrl-sql");
    expect(out.find((l) => l.startsWith("skyrl"))).toMatch(/^skyrl\s+skyrl-sql\s/);

    // The first three decodes (two turns each) were prompted in ReEx tags, the rest in SkyRL-SQL's.
    const firstTurns = seen.calls.filter((c) => c.text === "");
    expect(firstTurns).toHaveLength(6);
    for (const c of firstTurns.slice(0, 3)) {
      expect(c.prompt).toContain("<final_sql>");
      expect(c.prompt).not.toContain("<solution>");
    }
    for (const c of firstTurns.slice(3)) {
      expect(c.prompt).toContain("Task Overview:");
      expect(c.prompt).toContain("<solution>");
    }
    const skyrlSecond = seen.calls.filter((c) => c.text.includes("<sql>"));
    expect(skyrlSecond).toHaveLength(3);
    for (const c of skyrlSecond) expect(c.text).toMatch(/<\/sql><observation>\n[\s\S]+\n<\/observation>\n$/);
  });

  it("reads the same SkyRL-SQL answers as right only in the run whose profile is skyrl-sql", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const runsFile = join(fx.dir, "runs.json");
    writeFileSync(
      runsFile,
      JSON.stringify([
        { label: "as-reex", profile: "reex", strategy: "greedy" },
        { label: "as-skyrl", profile: "skyrl-sql", strategy: "greedy" },
      ]),
    );
    seen.writes = "skyrl";
    quiet();
    const outDir = join(fx.dir, "out");
    expect(
      await run([
        "--dataset",
        fx.birdFile,
        "--db-root",
        fx.dbRoot,
        "--runs",
        runsFile,
        "--limit",
        "2",
        "--out",
        outDir,
        "--quiet",
        "--sql.dataDir",
        join(fx.dir, "data"),
      ]),
    ).toBe(0);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8")) as { runs: ReportRun[] };
    expect(report.runs.map((r) => [r.config.label, r.summary.ex.bird])).toEqual([
      ["as-reex", 0],
      ["as-skyrl", 1],
    ]);
  });

  it("records the profile detected from the model's metadata for a run that names none", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const runsFile = join(fx.dir, "runs.json");
    writeFileSync(runsFile, JSON.stringify([{ label: "detected", strategy: "greedy" }]));
    seen.modelName = "SkyRL-SQL-7B";
    const err: string[] = [];
    quiet([], err);
    const outDir = join(fx.dir, "out");
    expect(
      await run([
        "--dataset",
        fx.birdFile,
        "--db-root",
        fx.dbRoot,
        "--runs",
        runsFile,
        "--limit",
        "2",
        "--out",
        outDir,
        "--quiet",
        "--sql.dataDir",
        join(fx.dir, "data"),
      ]),
    ).toBe(0);
    const report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8")) as { runs: ReportRun[] };
    expect(report.runs.map((r) => [r.config.profile, r.summary.ex.bird])).toEqual([["skyrl-sql", 1]]);
    expect(err.join("\n")).toContain('run detected: profile skyrl-sql (general.name "SkyRL-SQL-7B" names SkyRL-SQL)');
  });

  it("runs --strategy in the --profile given, and in the configured profile without one", async () => {
    const { run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    quiet();
    const outDir = join(fx.dir, "out");
    expect(
      await run([
        "--dataset",
        fx.birdFile,
        "--db-root",
        fx.dbRoot,
        "--strategy",
        "greedy",
        "--profile",
        "skyrl-sql",
        "--limit",
        "2",
        "--out",
        outDir,
        "--quiet",
        "--sql.dataDir",
        join(fx.dir, "data"),
      ]),
    ).toBe(0);
    let report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8")) as { runs: ReportRun[] };
    expect(report.runs.map((r) => [r.config.profile, r.summary.ex.bird])).toEqual([["skyrl-sql", 1]]);
    expect(seen.calls[0]!.prompt).toContain("<solution>");

    seen.calls = [];
    expect(
      await run([
        "--dataset",
        fx.birdFile,
        "--db-root",
        fx.dbRoot,
        "--strategy",
        "greedy",
        "--limit",
        "1",
        "--out",
        outDir,
        "--quiet",
        "--sql.dataDir",
        join(fx.dir, "data"),
        "--policy.profile",
        "reex",
      ]),
    ).toBe(0);
    report = JSON.parse(readFileSync(join(outDir, "report.json"), "utf8")) as { runs: ReportRun[] };
    expect(report.runs.map((r) => r.config.profile)).toEqual(["reex"]);
    expect(seen.calls[0]!.prompt).toContain("<final_sql>");
  });

  it("refuses an unknown profile, naming the known ones, and a family the profile does not support", async () => {
    const { readRunSpecs, run } = await import("../../src/cli/eval.js");
    const fx = makeFixture();
    const file = join(fx.dir, "runs.json");
    writeFileSync(file, JSON.stringify([{ label: "x", profile: "sqlcoder", strategy: "greedy" }]));
    expect(() => readRunSpecs(file)).toThrow(
      expect.objectContaining({
        code: "BAD_REQUEST",
        message: expect.stringMatching(/0 \(x\): unknown profile "sqlcoder" \(known: reex, skyrl-sql, omnisql, think-answer, generic\)/),
      }),
    );
    writeFileSync(
      file,
      JSON.stringify([
        { label: "ok", profile: "omnisql", strategy: "greedy" },
        { label: "y", profile: "omnisql", promptFamily: "execution-aware", strategy: "greedy" },
      ]),
    );
    expect(() => readRunSpecs(file)).toThrow(
      expect.objectContaining({
        code: "BAD_REQUEST",
        message: expect.stringMatching(/1 \(y\): profile "omnisql" does not support the execution-aware prompt family \(it supports direct\)/),
      }),
    );

    const err: string[] = [];
    quiet([], err);
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--strategy", "greedy", "--profile", "sqlcoder"])).toBe(2);
    expect(err.join("\n")).toContain('unknown profile "sqlcoder" (known: reex, skyrl-sql');
    writeFileSync(file, JSON.stringify([{ label: "x", strategy: "greedy" }]));
    expect(await run(["--dataset", fx.birdFile, "--db-root", fx.dbRoot, "--runs", file, "--profile", "reex"])).toBe(2);
    expect(err.join("\n")).toContain("--profile go inside the --runs file");

    // No profile in the entry: the configured one, or the one detected from the model, is checked
    // against the entry's family before any question is decoded.
    writeFileSync(file, JSON.stringify([{ label: "direct", promptFamily: "direct", strategy: "greedy" }]));
    const args = [
      "--dataset",
      fx.birdFile,
      "--db-root",
      fx.dbRoot,
      "--runs",
      file,
      "--limit",
      "1",
      "--out",
      join(fx.dir, "o"),
      "--quiet",
      "--sql.dataDir",
      join(fx.dir, "data"),
    ];
    await expect(run([...args, "--policy.profile", "skyrl-sql"])).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining('profile "skyrl-sql" does not support the direct prompt family'),
    });
    seen.modelName = "SkyRL-SQL-7B";
    await expect(run(args)).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining('profile "skyrl-sql" does not support the direct prompt family'),
    });
    expect(seen.calls).toHaveLength(0);
  });
});

/**
 * Training in a model's own protocol: rewards read a response through its profile's tags and format
 * check, and the loop's rollouts, rewards and loss masks follow the config's profile (SkyRL-SQL's
 * `<think>`, `<sql>` → `<observation>`, `<solution>` here), on a real SQLite file.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { reexProfile } from "../../src/agent/index.js";
import { omnisqlProfile, skyrlSqlProfile, thinkAnswerProfile } from "../../src/agent/testing.js";
import { run as rewardCli } from "../../src/cli/reward.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { type ScriptContext } from "../../src/policy/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { GoldCache, loadTrainConfig, parseTrainConfig, runTraining } from "../../src/training/index.js";
import { readExperience, readMetrics, scoreResponse, splitInjected, type LearnerStep, type RewardSpec } from "../../src/training/testing.js";
import { GOLD, QUESTIONS, makeTrainingFixture, response, type TrainingFixture } from "./fixtures.js";

let fx: TrainingFixture;
let executor: ExecutorPool;

beforeAll(() => {
  fx = makeTrainingFixture();
  executor = new ExecutorPool({ workers: 2, timeoutMs: 5000 });
});
afterAll(async () => {
  await executor.close();
  rmSync(fx.dir, { recursive: true, force: true });
});
afterEach(() => vi.restoreAllMocks());

const PROBE = "SELECT DISTINCT country FROM singer";

/** A SkyRL-SQL response: one `<sql>` probe per entry with its `<observation>` as the server injects it, then `<solution>`. */
function skyrl(probes: string[], final: string): string {
  const parts = ["<think>Look at the data first.</think>\n"];
  for (const p of probes) parts.push(`<sql>${p}</sql><observation>\n   country\n0   France\n</observation>\n<think>checked</think>\n`);
  parts.push(`<solution>${final}</solution>`);
  return parts.join("");
}

async function score(text: string, profile: typeof reexProfile, spec: RewardSpec = { preset: "maxtune" }, family?: "execution-aware" | "standard" | "direct") {
  return scoreResponse({ response: text, profile, ...(family ? { family } : {}), goldSql: GOLD, dbPath: fx.dbPath }, spec, {
    executor,
    goldCache: new GoldCache(),
  });
}

describe("rewards under a model profile", () => {
  it("gives a well-formed SkyRL-SQL response format 1 under skyrl-sql and a ReEx-tag response 0", async () => {
    const own = await score(skyrl([PROBE], GOLD), skyrlSqlProfile);
    expect(own.facts).toMatchObject({
      profile: "skyrl-sql",
      family: "execution-aware",
      formatOk: true,
      softFormatOk: true,
      finalSql: GOLD,
      correct: true,
      interactions: 1,
    });
    expect(own.reward.components).toEqual({ format: 1, em: 1, exec: 2, entity: 1, exploration: 1 });
    expect(own.reward.total).toBe(12);

    const reexTags = response([PROBE], GOLD);
    const foreign = await score(reexTags, skyrlSqlProfile);
    expect(foreign.reward.components.format).toBe(0);
    expect(foreign.facts.formatProblems.join("; ")).toMatch(/no tagged blocks|does not match/);
    expect(foreign.facts.finalSql).toBeNull();
    expect(foreign.facts.softFormatOk).toBe(false);
    // The same ReEx-tag response is well formed under its own profile, and the SkyRL-SQL one is not.
    expect((await score(reexTags, reexProfile)).reward.components.format).toBe(1);
    expect((await score(skyrl([PROBE], GOLD), reexProfile)).reward.components.format).toBe(0);
  });

  it("counts <sql> probes for exploration under skyrl-sql, and repeats of them", async () => {
    const wrong = "SELECT name FROM singer";
    const two = await score(skyrl([PROBE, "SELECT COUNT(*) FROM singer"], wrong), skyrlSqlProfile);
    expect(two.facts.probes.map((p) => p.sql)).toEqual([PROBE, "SELECT COUNT(*) FROM singer"]);
    expect(two.facts.interactions).toBe(2);
    expect(two.reward.components.exploration).toBeCloseTo(1 / (1 + Math.exp(-2)), 12);
    const repeated = await score(skyrl([PROBE, `${PROBE.toLowerCase()};`], wrong), skyrlSqlProfile);
    expect(repeated.facts.probes.map((p) => p.repeated)).toEqual([false, true]);
    expect(repeated.reward.components.exploration).toBe(0);
    // Read as ReEx tags the same text has no probes: σ(0).
    expect((await score(skyrl([PROBE, "SELECT COUNT(*) FROM singer"], wrong), reexProfile)).reward.components.exploration).toBe(0.5);
  });

  it("reads the other papers' format terms through the profile: SQL-R1, Arctic, Think2SQL, CogniSQL", async () => {
    const text = skyrl([PROBE], GOLD);
    const r1 = await score(text, skyrlSqlProfile, { preset: "sql-r1" });
    expect(r1.reward.components).toMatchObject({ format: 1, execution: 2, result: 3 });
    expect((await score(text, reexProfile, { preset: "sql-r1" })).reward.components).toMatchObject({ format: -1, execution: 0, result: 0 });

    const thinkAnswer = "<think>Count the French singers' names.</think>\n<answer>\n```sql\n" + GOLD + "\n```\n</answer>";
    const arctic = await score(thinkAnswer, thinkAnswerProfile, { preset: "arctic" });
    expect(arctic.facts).toMatchObject({ family: "standard", formatOk: true, correct: true });
    expect(arctic.reward.total).toBe(1);
    const t2s = await score(thinkAnswer, thinkAnswerProfile, { preset: "think2sql" });
    expect(t2s.reward.components.format).toBe(1);
    expect((await score(thinkAnswer, reexProfile, { preset: "think2sql" }, "standard")).reward.components.format).toBe(0);

    const fenced = "The singers from France.\n```sql\n" + GOLD + "\n```";
    const cogni = await score(fenced, omnisqlProfile, { preset: "cognisql" });
    expect(cogni.facts).toMatchObject({ family: "direct", formatOk: true, softFormatOk: true, correct: true });
    expect(cogni.reward.total).toBe(3.5);
    expect((await score(response([], GOLD), omnisqlProfile, { preset: "cognisql" })).facts.formatOk).toBe(false);
  });

  it("scores SkyRL-SQL's own outcome reward: −1 off-format, 1 right, 0 wrong", async () => {
    const spec = { preset: "SkyRL-SQL" };
    expect((await score(skyrl([PROBE], GOLD), skyrlSqlProfile, spec)).reward).toMatchObject({ preset: "skyrl-sql", total: 1, components: { outcome: 1 } });
    expect((await score(skyrl([PROBE], "SELECT name FROM singer"), skyrlSqlProfile, spec)).reward.total).toBe(0);
    expect((await score(response([PROBE], GOLD), skyrlSqlProfile, spec)).reward.total).toBe(-1);
  });

  it("refuses a prompt family the profile does not support", async () => {
    await expect(score(skyrl([], GOLD), skyrlSqlProfile, {}, "direct")).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining('profile "skyrl-sql" does not support the direct prompt family'),
    });
  });
});

describe("reex reward --profile", () => {
  it("scores a SkyRL-SQL response in its own tags, and refuses an unknown profile or an unsupported family", async () => {
    const out: string[] = [];
    const err: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
    vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
    expect(await rewardCli(["--db", fx.dbPath, "--gold", GOLD, "--response", skyrl([PROBE], GOLD), "--profile", "skyrl-sql", "--json"])).toBe(0);
    const json = JSON.parse(out.join("\n"));
    expect(json).toMatchObject({ profile: "skyrl-sql", family: "execution-aware", formatOk: true, finalSql: GOLD, interactions: 1, total: 12 });
    out.length = 0;
    expect(await rewardCli(["--db", fx.dbPath, "--gold", GOLD, "--response", skyrl([PROBE], GOLD)])).toBe(0);
    expect(out.join("\n")).toContain("profile: reex, execution-aware family");
    expect(out.join("\n")).toContain("format: not ok");

    expect(await rewardCli(["--db", fx.dbPath, "--gold", GOLD, "--response", "x", "--profile", "sqlcoder"])).toBe(2);
    expect(err.join("\n")).toContain('unknown profile "sqlcoder" (known: reex, skyrl-sql, omnisql, think-answer, generic)');
    expect(await rewardCli(["--db", fx.dbPath, "--gold", GOLD, "--response", "x", "--profile", "omnisql", "--family", "execution-aware"])).toBe(2);
    expect(err.join("\n")).toContain('profile "omnisql" does not support the execution-aware prompt family');
  });
});

/** The stand-in model's script: SkyRL-SQL tags only when its prompt asks for them; even trajectories answer right. */
function skyrlScript(): (ctx: ScriptContext) => string {
  const order = new Map<string, number>();
  return (ctx) => {
    if (!ctx.prompt.includes("<solution>")) return "<final_sql>SELECT 1</final_sql>";
    if (!order.has(ctx.trajectoryId)) order.set(ctx.trajectoryId, order.size);
    const right = order.get(ctx.trajectoryId)! % 2 === 0;
    const gold = QUESTIONS.find((q) => ctx.prompt.includes(q.question))!.SQL;
    if (!ctx.text.includes("</observation>")) return `<think>look</think>\n<sql>${PROBE}</sql>`;
    return `<think>ok</think>\n<solution>${right ? gold : "SELECT name FROM singer"}</solution>`;
  };
}

function skyrlModel(): ScriptedPolicy {
  return new ScriptedPolicy(skyrlScript());
}

/** A learner that only writes a "model", so the loop can run its steps. */
const fakeLearner: LearnerStep = async (req) => {
  writeFileSync(req.out, `weights-${req.step}`);
  return { loss: 1 };
};

/** The expected mask of a response read one token per character: 0 over each injected `<observation>…</observation>\n`. */
function observationMask(text: string): (0 | 1)[] {
  const chars = [...text];
  const mask: (0 | 1)[] = chars.map(() => 1);
  for (const m of text.matchAll(/<observation>\n[\s\S]*?\n<\/observation>\n/g)) {
    const start = [...text.slice(0, m.index)].length;
    for (let i = 0; i < [...m[0]].length; i++) mask[start + i] = 0;
  }
  return mask;
}

describe("training in the skyrl-sql profile", () => {
  const model = (): string => {
    const path = join(fx.dir, "initial.gguf");
    writeFileSync(path, "weights-0");
    return path;
  };

  it("prompts, scores and masks GRPO rollouts in SkyRL-SQL's protocol: the experience masks exactly the <observation> tokens", async () => {
    const runDir = join(fx.dir, "run-skyrl");
    const logs: string[] = [];
    const config = parseTrainConfig(
      {
        model: model(),
        runDir,
        profile: "skyrl-sql",
        data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 1 },
        eval: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 2, atStart: true, every: 1 },
        steps: 1,
        questionsPerStep: 1,
        groupSize: 4,
        maxTokens: 400,
      },
      "grpo",
    );
    await runTraining(config, { mode: "grpo", createPolicy: async () => skyrlModel(), learner: fakeLearner, progress: null, log: (l) => logs.push(l) });
    expect(logs.join("\n")).toContain("profile skyrl-sql (set by the training config's profile), prompt family execution-aware");

    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(records).toHaveLength(4);
    for (const r of records) {
      const text = String.fromCodePoint(...r.tokens);
      expect(text).toMatch(
        /^<think>look<\/think>\n<sql>SELECT DISTINCT country FROM singer<\/sql><observation>\n[\s\S]+\n<\/observation>\n<think>ok<\/think>\n<solution>/,
      );
      expect(r.mask).toEqual(observationMask(text));
      expect(r.mask.filter((m) => m === 0).length).toBeGreaterThan(20);
      expect(r.components.format).toBe(1);
      expect(r.interactions).toBe(1);
      expect(String.fromCodePoint(...r.prompt_tokens)).toContain("Task Overview:");
    }
    expect(records.map((r) => r.components.exec)).toEqual([2, 1, 2, 1]);
    const rows = readMetrics(join(runDir, "metrics.jsonl"));
    // Held-out questions are decoded in the same profile: the model answers only SkyRL-SQL prompts right.
    expect(rows.map((r) => r.heldout_ex)).toEqual([0.5, 0.5]);
    expect(readFileSync(join(runDir, "report.html"), "utf8")).toContain("skyrl-sql");
  });

  it("masks the profile's feedback blocks in SFT traces: <observation> under skyrl-sql, <result> under reex", async () => {
    const resp = skyrl(["SELECT 1"], "SELECT 1");
    const traces = join(fx.dir, "skyrl-traces.jsonl");
    writeFileSync(traces, JSON.stringify({ prompt: "Q: one?\n", response: resp, question_id: "a" }));
    const runDir = join(fx.dir, "run-skyrl-sft");
    const config = parseTrainConfig({ model: model(), runDir, profile: "skyrl-sql", sft: { traces, endOfTurn: "" }, steps: 1, questionsPerStep: 1 }, "sft");
    await runTraining(config, { mode: "sft", createPolicy: async () => skyrlModel(), learner: fakeLearner, progress: null, log: () => undefined });
    const [rec] = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    expect(String.fromCodePoint(...rec!.tokens)).toBe(resp);
    expect(rec!.mask).toEqual(observationMask(resp));
    expect(rec!.interactions).toBe(1);

    expect(splitInjected(resp, reexProfile).every((p) => p.sampled === 1)).toBe(true);
    expect(splitInjected("a<result>\nx\n</result>\nb<observation>\ny\n</observation>\n", reexProfile).map((p) => p.sampled)).toEqual([1, 0, 1]);
    expect(splitInjected(resp, omnisqlProfile)).toEqual([{ text: resp, sampled: 1 }]);
  });

  it("detects the profile from the model's metadata with profile auto, records it in run.json, and keeps it on --resume", async () => {
    /** The stand-in model naming itself as a GGUF of SkyRL-SQL-7B would. */
    class NamedSkyrl extends ScriptedPolicy {
      override get info() {
        return { ...super.info, metadata: { name: "SkyRL-SQL-7B" } };
      }
    }
    const named = (): ScriptedPolicy => new NamedSkyrl(skyrlScript());
    const runDir = join(fx.dir, "run-auto");
    const base = {
      model: model(),
      runDir,
      data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 1 },
      questionsPerStep: 1,
      groupSize: 2,
      maxTokens: 400,
      checkpointEvery: 1,
    };
    const logs: string[] = [];
    await runTraining(parseTrainConfig({ ...base, steps: 1 }, "grpo"), {
      mode: "grpo",
      createPolicy: async () => named(),
      learner: fakeLearner,
      progress: null,
      log: (l) => logs.push(l),
    });
    expect(logs.join("\n")).toContain('profile skyrl-sql (general.name "SkyRL-SQL-7B" names SkyRL-SQL)');
    expect(JSON.parse(readFileSync(join(runDir, "run.json"), "utf8")).profile).toEqual({
      id: "skyrl-sql",
      reason: 'general.name "SkyRL-SQL-7B" names SkyRL-SQL',
    });

    // The checkpoint says nothing about itself (a renamed file): the resumed run keeps the recorded profile.
    logs.length = 0;
    await runTraining(parseTrainConfig({ ...base, steps: 2 }, "grpo"), {
      mode: "grpo",
      resume: true,
      createPolicy: async () => skyrlModel(),
      learner: fakeLearner,
      progress: null,
      log: (l) => logs.push(l),
    });
    expect(logs.join("\n")).toContain("profile skyrl-sql (set by the run being resumed)");
    const records = await readExperience(join(runDir, "experience", "step-000002.jsonl"));
    expect(records.map((r) => r.components.format)).toEqual([1, 1]);
    // An explicit profile still wins over the recorded one.
    logs.length = 0;
    await runTraining(parseTrainConfig({ ...base, steps: 3, profile: "reex" }, "grpo"), {
      mode: "grpo",
      resume: true,
      createPolicy: async () => skyrlModel(),
      learner: fakeLearner,
      progress: null,
      log: (l) => logs.push(l),
    });
    expect(logs.join("\n")).toContain("profile reex (set by the training config's profile)");
  });

  it("refuses a training config whose profile is unknown or does not support its prompt family", () => {
    const base = { model: "m.gguf", runDir: "run", data: { dataset: "q.json", dbRoot: "dbs" } };
    expect(() => parseTrainConfig({ ...base, profile: "sqlcoder" }, "grpo")).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID", issues: [expect.objectContaining({ path: ["profile"] })] }),
    );
    expect(() => parseTrainConfig({ ...base, profile: "omnisql", promptFamily: "execution-aware" }, "grpo")).toThrow(
      expect.objectContaining({
        code: "CONFIG_INVALID",
        issues: [
          expect.objectContaining({
            path: ["promptFamily"],
            message: expect.stringContaining('profile "omnisql" does not support the execution-aware prompt family'),
          }),
        ],
      }),
    );
    expect(parseTrainConfig(base, "grpo")).toMatchObject({ profile: "auto" });
    expect(parseTrainConfig(base, "grpo").promptFamily).toBeUndefined();
    const example = loadTrainConfig(fileURLToPath(new URL("../../examples/training/grpo-skyrl-sql.json", import.meta.url)), "grpo");
    expect(example).toMatchObject({ profile: "skyrl-sql", reward: { preset: "skyrl-sql" }, groupSize: 5 });
  });
});

/**
 * Rewards on a database with a second row draw (`<db_id>.draw2.sqlite` beside it): an answer is right
 * only when right on both draws, through scoreResponse and through the training loop, whose metrics
 * and report carry the spurious rate.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadDataset } from "../../src/eval/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { parseTrainConfig, runTraining } from "../../src/training/index.js";
import { readExperience, readMetrics, scoreResponse, type LearnerStep } from "../../src/training/testing.js";
import { GOLD, makeTrainingFixture, response, type TrainingFixture } from "./fixtures.js";

/** Right on the fixture's rows (the singers over 30 are the French ones), wrong on the second draw's. */
const LUCKY = "SELECT name FROM singer WHERE age > 30";

let fx: TrainingFixture;
let pool: ExecutorPool;
let dbPath2: string;

/** The fixture's schema with the singers' rows drawn again: the French ones are still Ann, Bob and Dee, their ages are not. */
function writeSecondDraw(
  path: string,
  singers = "(1, 'Ann', 'France', 25), (2, 'Bob', 'France', 42), (3, 'Cid', 'Spain', 50), (4, 'Dee', 'France', 55), (5, 'Eve', 'Italy', 23)",
): void {
  const db = new Database(path);
  db.exec(`
    CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);
    CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, year INTEGER, singer_id INTEGER REFERENCES singer(singer_id));
    INSERT INTO singer VALUES ${singers};
    INSERT INTO concert VALUES (1, 'Summer', 2014, 1), (2, 'Winter', 2015, 2), (3, 'Spring', 2015, 1);
  `);
  db.close();
}

beforeAll(() => {
  fx = makeTrainingFixture();
  dbPath2 = join(fx.dbRoot, "concerts", "concerts.draw2.sqlite");
  writeSecondDraw(dbPath2);
  pool = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await pool.close();
  rmSync(fx.dir, { recursive: true, force: true });
});

const score = (final: string, preset: string, second: boolean) =>
  scoreResponse({ response: response([], final), goldSql: GOLD, dbPath: fx.dbPath, ...(second ? { dbPath2 } : {}) }, { preset }, { executor: pool });

describe("a reward on two row draws", () => {
  it("counts an answer right only when it is right on both draws, and says which draw it was right on", async () => {
    const lucky = await score(LUCKY, "outcome", true);
    expect(lucky.reward.correct).toBe(false);
    expect(lucky.reward.draws).toEqual({ first: true, second: false });
    expect(lucky.reward.components.correct).toBe(0);
    expect(lucky.reward.details).toMatchObject({ correct: 0, correct_first_draw: 1, correct_second_draw: 0 });
    const right = await score(GOLD, "outcome", true);
    expect(right.reward.correct).toBe(true);
    expect(right.reward.draws).toEqual({ first: true, second: true });
    // without the second draw the lucky answer scores as right, as it did before
    const one = await score(LUCKY, "outcome", false);
    expect(one.reward.correct).toBe(true);
    expect(one.reward.draws).toBeUndefined();
    expect(one.reward.details.correct_first_draw).toBeUndefined();
  });

  it("takes the result half of ReEx's exec term, Arctic's outcome and the partial-credit terms from both draws", async () => {
    const maxtune = await score(LUCKY, "maxtune", true);
    expect(maxtune.reward.components.exec).toBe(1); // it runs (1), not right on both (0)
    expect(maxtune.reward.details).toMatchObject({ exec_valid: 1, exec_result: 0 });
    expect((await score(LUCKY, "maxtune", false)).reward.components.exec).toBe(2);
    expect((await score(GOLD, "maxtune", true)).reward.components.exec).toBe(2);
    expect((await score(LUCKY, "arctic", true)).reward.components.outcome).toBe(0.1);
    // QATCH: 1 on the first draw, (2/3 + 2/3 + 1) / 3 on the second; the lower counts
    expect((await score(LUCKY, "qatch", true)).reward.components.qatch).toBeCloseTo(7 / 9, 12);
    expect((await score(LUCKY, "qatch", false)).reward.components.qatch).toBe(1);
    // PaVeRL: every gold column matched on the first draw, none on the second: it only runs
    expect((await score(LUCKY, "paverl", true)).reward.components.partial).toBe(0.5);
    expect((await score(LUCKY, "paverl", false)).reward.components.partial).toBe(10);
  });
});

/** Per trajectory: right (GOLD) and lucky (LUCKY) final answers in turn, after one probe. */
function policy(): ScriptedPolicy {
  let n = 0;
  const seen = new Map<string, number>();
  return new ScriptedPolicy((ctx) => {
    if (!seen.has(ctx.trajectoryId)) seen.set(ctx.trajectoryId, n++);
    if (!ctx.text.includes("</result>")) return `<think>look</think>\n<intermediate_sql>SELECT DISTINCT country FROM singer</intermediate_sql>`;
    return `<think>ok</think>\n<final_sql>${seen.get(ctx.trajectoryId)! % 2 === 0 ? GOLD : LUCKY}</final_sql>`;
  });
}

const learner: LearnerStep = async (req) => {
  writeFileSync(req.out, `weights-${req.step}`);
  return { kl: null, loss: 0.5, grad_norm: 0.5, clip_frac: 0 };
};

describe("GRPO on databases with a second row draw", () => {
  it("finds the second draw beside the database, rewards only answers right on both, and logs the spurious rate", async () => {
    expect(loadDataset(fx.datasetFile, { dbRoot: fx.dbRoot }).items[0]!.dbPath2).toBe(dbPath2);
    const model = join(fx.dir, "initial.gguf");
    writeFileSync(model, "weights-0");
    const runDir = join(fx.dir, "run-draws");
    const config = parseTrainConfig(
      {
        model,
        runDir,
        data: { dataset: fx.datasetFile, dbRoot: fx.dbRoot, limit: 1 },
        steps: 1,
        questionsPerStep: 1,
        groupSize: 4,
        maxTokens: 400,
        klBeta: 0,
        advantage: "none",
        reward: { preset: "outcome" },
      },
      "grpo",
    );
    await runTraining(config, { mode: "grpo", createPolicy: async () => policy(), learner, progress: null, log: () => undefined });
    const [row] = readMetrics(join(runDir, "metrics.jsonl"));
    expect(row!.train_ex).toBe(1); // on the first draw, as without a second
    expect(row!.train_ex_both_draws).toBe(0.5);
    expect(row!.spurious_rate).toBe(0.5); // 2 right on the first draw only, of 4 right on it
    expect(row!.details.correct_first_draw).toBe(1);
    const records = await readExperience(join(runDir, "experience", "step-000001.jsonl"));
    const gold = records.filter((r) => r.final_sql === GOLD);
    const lucky = records.filter((r) => r.final_sql === LUCKY);
    expect(gold).toHaveLength(2);
    expect(Math.min(...gold.map((r) => r.advantage))).toBeGreaterThan(Math.max(...lucky.map((r) => r.advantage)));
    const html = readFileSync(join(runDir, "report.html"), "utf8");
    expect(html).toContain('id="spurious-rate"');
    expect(html).toContain("on both row draws");
  });

  it("refuses a run whose gold SQL does not run on the second draw", async () => {
    const other = makeTrainingFixture();
    try {
      const db = new Database(join(other.dbRoot, "concerts", "concerts.draw2.sqlite"));
      db.exec("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER)");
      db.close();
      const model = join(other.dir, "initial.gguf");
      writeFileSync(model, "weights-0");
      const config = parseTrainConfig({ model, runDir: join(other.dir, "run"), data: { dataset: other.datasetFile, dbRoot: other.dbRoot }, steps: 1 }, "grpo");
      await expect(
        runTraining(config, { mode: "grpo", createPolicy: async () => policy(), learner, progress: null, log: () => undefined }),
      ).rejects.toMatchObject({
        code: "DATASET_INVALID",
        message: expect.stringMatching(/does not run.*question 3: \w+ \(second row draw\)/),
      });
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  });
});

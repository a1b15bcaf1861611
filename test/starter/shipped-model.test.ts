import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatCheck, preparePrompt, runRollout } from "../../src/agent/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { ExecutorPool, executeDirect, exBird } from "../../src/sql/index.js";
import { generateSynth, synthDbPath } from "../../src/synth/index.js";

const SHIPPED = join(import.meta.dirname, "../../models/reex-starter.gguf");
let dir: string;
let policy: Policy;
const executor = new ExecutorPool({ workers: 1 });

describe.runIf(existsSync(SHIPPED))("the shipped starter policy", () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "reex-shipped-"));
    // database 48 of the starter build (seed 1): a held-out library database (48 % 7 = 6)
    generateSynth(dir, { seed: 1, dbs: 49, devEvery: 7, traces: false });
    policy = await createLlamaPolicy({ model: SHIPPED, gpu: "cpu", contextSize: 1024, sequences: 1, threads: 1 });
  }, 120_000);

  afterAll(async () => {
    await policy?.close();
    await executor.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("probes a held-out database for the stored form of a yes/no flag and answers correctly", async () => {
    const dbPath = synthDbPath(dir, "library_0048");
    const question = "How many loans that were not returned are there?";
    const prompt = preparePrompt(dbPath, { family: "execution-aware", question, evidence: "returned refers to loans.returned" });
    const r = await runRollout(policy, prompt, { executor, dbPath, family: "execution-aware", temperature: 0, maxTokens: 400 });
    expect(formatCheck(r.text, "execution-aware").ok).toBe(true);
    expect(r.probes.length).toBeGreaterThanOrEqual(1);
    expect(r.finalSql).not.toBeNull();
    const gold = executeDirect(dbPath, "SELECT COUNT(*) FROM loans WHERE returned = 'no'");
    const pred = executeDirect(dbPath, r.finalSql!);
    if (!pred.ok || !gold.ok) throw new Error(`final SQL failed: ${r.finalSql}`);
    expect(exBird(pred.rows, gold.rows)).toBe(true);
  }, 60_000);

  it("answers the README's example question through `reex ask` at its defaults", async () => {
    const clinic = (await buildExamples(join(dir, "examples"))).find((e) => e.dbId === "clinic")!;
    const q = clinic.questions.find((x) => x.question === "How many doctors specialise in dermatology?")!;
    const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", "src/cli.ts", "ask", "--db", clinic.path, "--json", q.question], {
      env: { ...process.env, REEX_POLICY_THREADS: "1", REEX_SQL_DATA_DIR: join(dir, "data") },
      timeout: 90_000,
    });
    const answer = JSON.parse(stdout) as { sql: string | null };
    const pred = executeDirect(clinic.path, answer.sql ?? "");
    const gold = executeDirect(clinic.path, q.SQL);
    if (!pred.ok || !gold.ok) throw new Error(`final SQL failed: ${answer.sql}`);
    expect(exBird(pred.rows, gold.rows)).toBe(true);
  }, 120_000);
});

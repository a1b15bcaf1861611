/** `reex ask` end to end: a real process, the tiny GGUF through node-llama-cpp, a real SQLite file. */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildExamples } from "../../src/examples/index.js";
import { ensureTestModel } from "../helpers/model.js";

const run = promisify(execFile);
let dir: string;
let db: string;
let model: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-ask-"));
  const sets = await buildExamples(join(dir, "examples"));
  db = sets.find((s) => s.dbId === "retail")!.path;
  model = await ensureTestModel();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function ask(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return run(process.execPath, ["--import", "tsx", "src/cli.ts", "ask", ...args], {
    env: { ...process.env, REEX_POLICY_THREADS: "1", REEX_SQL_DATA_DIR: join(dir, "data"), REEX_AGENT_MAX_TOKENS: "64" },
    timeout: 60_000,
  }).then(
    (r) => ({ ...r, code: 0 }),
    (e: { stdout: string; stderr: string; code: number }) => ({ stdout: e.stdout, stderr: e.stderr, code: e.code }),
  );
}

describe("reex ask", () => {
  it("prints the whole answer record as JSON with --json", async () => {
    const r = await ask(["--db", db, "--model", model, "--json", "--seed", "1", "How many customers are there?"]);
    const answer = JSON.parse(r.stdout) as { candidates: unknown[]; usage: { promptTokens: number; generatedTokens: number } };
    expect(answer.candidates).toHaveLength(1);
    expect(answer.usage.promptTokens).toBeGreaterThan(100);
    expect(answer.usage.generatedTokens).toBeGreaterThan(0);
    expect([0, 1]).toContain(r.code);
  });

  it("refuses a missing database with a typed error and exit code 1", async () => {
    const r = await ask(["--db", join(dir, "nope.sqlite"), "--model", model, "How many?"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("DB_FILE_NOT_FOUND");
  });

  it("explains usage and exits 2 without a question", async () => {
    const r = await ask(["--db", db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("usage: reex ask");
  });
});

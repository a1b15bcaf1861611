/** `reex ask` end to end: a real process, the tiny GGUF through node-llama-cpp, a real SQLite file. */
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildExamples } from "../../src/examples/index.js";
import { DatabaseRegistry } from "../../src/sql/index.js";
import { ensureTestModel } from "../helpers/model.js";
import { buildRealModel } from "../helpers/real-models.js";

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

function ask(args: string[], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string; code: number }> {
  return run(process.execPath, ["--import", "tsx", "src/cli.ts", "ask", ...args], {
    env: { ...process.env, REEX_POLICY_THREADS: "1", REEX_SQL_DATA_DIR: join(dir, "data"), REEX_AGENT_MAX_TOKENS: "64", ...env },
    timeout: 120_000,
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

  it("prints the answer's confidence, the same figure its --json record carries", { timeout: 180_000 }, async () => {
    const starter = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
    const clinic = join(dir, "examples", "databases", "clinic", "clinic.sqlite");
    const args = ["--db", clinic, "--model", starter, "How many doctors specialise in dermatology?"];
    const plain = await ask(args, { REEX_AGENT_MAX_TOKENS: "512" });
    const printed = /^confidence: (\d\.\d\d)/m.exec(plain.stdout);
    expect(printed, plain.stdout).not.toBeNull();
    const json = await ask(["--json", ...args], { REEX_AGENT_MAX_TOKENS: "512" });
    const answer = JSON.parse(json.stdout) as { confidence: { value: number; threshold: number; doubts: string[] } };
    expect(answer.confidence.value).toBeGreaterThanOrEqual(0);
    expect(answer.confidence.value).toBeLessThanOrEqual(1);
    expect(answer.confidence.value.toFixed(2)).toBe(printed![1]);
    expect(answer.confidence.threshold).toBe(0.5);
  });

  it("refuses a missing database with a typed error and exit code 1", async () => {
    const r = await ask(["--db", join(dir, "nope.sqlite"), "--model", model, "How many?"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("DB_FILE_NOT_FOUND");
  });

  it("answers over a file without adding it to the registry the server lists", async () => {
    const data = join(dir, "registry-kept");
    const before = await new DatabaseRegistry({ dataDir: data }).registerPath(db, { name: "shop" });
    const file = join(data, "registry.json");
    const bytes = readFileSync(file);
    const other = join(dir, "clinic-copy.sqlite");
    copyFileSync(join(dir, "examples", "databases", "clinic", "clinic.sqlite"), other);
    const r = await ask(["--db", other, "--model", model, "--json", "How many doctors are there?"], { REEX_SQL_DATA_DIR: data });
    expect(JSON.parse(r.stdout)).toHaveProperty("candidates");
    expect(readFileSync(file).equals(bytes)).toBe(true);
    expect(new DatabaseRegistry({ dataDir: data }).list().map((e) => e.id)).toEqual([before.id]);
  });

  it("refuses a file that is not a SQLite database with DB_INVALID and leaves it as it was", async () => {
    const bad = join(dir, "notes.sqlite");
    writeFileSync(bad, "not a database\n".repeat(20));
    const r = await ask(["--db", bad, "--model", model, "How many?"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("DB_INVALID");
    expect(readFileSync(bad, "utf8")).toBe("not a database\n".repeat(20));
  });

  it("explains usage and exits 2 without a question", async () => {
    const r = await ask(["--db", db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("usage: reex ask");
  });
});

interface AskJson {
  sql: string | null;
  result?: { ok: boolean };
  profile: { id: string; reason: string };
  candidates: { text: string; interactions: number; sql: string | null }[];
}

describe("reex ask in a model's own protocol", () => {
  it("runs SkyRL-SQL's <sql>/<observation>/<solution> loop end to end with --profile skyrl-sql, on the real Qwen2 tokenizer and ChatML template", {
    timeout: 180_000,
  }, async () => {
    // greedy on "longest-token" weights writes a fixed token stream; scoring tokens holding "ol" at 0
    // makes it open <sql> rather than <solution> (Qwen spells it "<s" "ol" "ution" ">"), so the
    // model probes, the executor answers in <observation>, and the interaction limit makes the server
    // open <solution> itself; the evidence's "../../../../../" is a string the grammar lists, which
    // that model writes (its longest tokens), so its SELECT runs
    const model = await buildRealModel("qwen2", { weights: "longest-token", avoid: ["ol"] });
    const r = await ask(
      [
        "--db",
        db,
        "--model",
        model,
        "--profile",
        "skyrl-sql",
        "--constrained",
        "--max-interactions",
        "1",
        "--evidence",
        "../../../../../",
        "--json",
        "How many customers are there?",
      ],
      { REEX_AGENT_MAX_TOKENS: "96" },
    );
    expect(r.code).toBe(0);
    const answer = JSON.parse(r.stdout) as AskJson;
    expect(answer.profile).toEqual({ id: "skyrl-sql", reason: "set by --profile" });
    const text = answer.candidates[0]!.text;
    const probe = /<sql>([\s\S]*?)<\/sql>\s*<observation>\n([\s\S]*?)\n<\/observation>/.exec(text);
    expect(probe, text).not.toBeNull();
    expect(probe![2]).toMatch(/^\s*\S.*\n0 /); // a dataframe: a header line, then row 0
    expect(answer.candidates[0]!.interactions).toBe(1);
    expect(text).toContain("Interaction limit reached");
    const solution = /<solution>([\s\S]*?)<\/solution>\s*$/.exec(text);
    expect(solution, text).not.toBeNull();
    expect(answer.sql).toBe(solution![1]!.trim().replace(/;$/, ""));
    expect(answer.result?.ok).toBe(true);
    expect(text).not.toContain("<final_sql>");
    expect(text).not.toContain("<result>");
  });

  it("names the profile and shows the end of what the model wrote when it gave no final SQL", { timeout: 180_000 }, async () => {
    const args = ["--db", db, "--model", model, "--profile", "skyrl-sql", "How many customers are there?"];
    const env = { REEX_AGENT_MAX_TOKENS: "24" };
    const [json, plain] = [await ask([...args, "--json"], env), await ask(args, env)];
    const written = (JSON.parse(json.stdout) as AskJson).candidates[0]!.text;
    expect(written.trim().length).toBeGreaterThan(0);
    expect(plain.code).toBe(1);
    expect(plain.stdout).toMatch(/^profile: skyrl-sql \(set by --profile\)\n/);
    expect(plain.stdout).toContain("No final SQL was produced. The model wrote");
    expect(plain.stdout).toContain([...written].slice(-400).join("").trimEnd());
  });
});

describe("reex ask takes the settings every command takes", () => {
  it("accepts --section.key settings, the README's among them, and applies them", async () => {
    const r = await ask([
      "--db",
      db,
      "--model",
      model,
      "--json",
      "--agent.schemaHints",
      "false",
      "--decoding.temperature",
      "0.2",
      "--agent.maxTokens=8",
      "--seed",
      "1",
      "How many customers are there?",
    ]);
    expect(r.stderr).not.toMatch(/Unknown option|unknown option/);
    const answer = JSON.parse(r.stdout) as { usage: { generatedTokens: number } };
    expect(answer.usage.generatedTokens).toBeGreaterThan(0);
    expect(answer.usage.generatedTokens).toBeLessThanOrEqual(8);
  });

  it("answers an unknown option with the settings flag it most likely meant", async () => {
    const r = await ask(["--db", db, "--port", "9000", "How many?"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option --port (did you mean --server.port?)");
    const bad = await ask(["--db", db, "--agent.schemaHint", "false", "How many?"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("did you mean --agent.schemaHints?");
  });

  it("prints the profile once, on stdout", async () => {
    const r = await ask(["--db", db, "--model", model, "--seed", "1", "How many customers are there?"]);
    expect(r.stdout.match(/^profile: /gm)).toHaveLength(1);
    expect(r.stderr).not.toMatch(/profile/);
  });

  it("says when the random-weight placeholder answered", async () => {
    const models = mkdtempSync(join(tmpdir(), "reex-no-starter-"));
    try {
      const r = await ask(["--db", db, "--policy.modelsDir", models, "--seed", "1", "How many customers are there?"]);
      expect(r.stdout).toMatch(/note: answered by a random-weight placeholder model/);
      const json = await ask(["--db", db, "--policy.modelsDir", models, "--json", "--seed", "1", "How many customers are there?"]);
      expect((JSON.parse(json.stdout) as { notice?: string }).notice).toMatch(/placeholder/);
    } finally {
      rmSync(models, { recursive: true, force: true });
    }
  });
});

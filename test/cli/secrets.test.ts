/**
 * No front end prints a PostgreSQL password: `serve`, `ask`, `exec`, `eval` and `mcp`, each started
 * through the real CLI with a bad `postgres://` value (a server that does not answer, a malformed
 * URL, a `name=` setting, a `?password=` parameter, the environment and a config file), exit with an
 * error whose output holds neither the password nor its URL-encoded form. `redactSecrets` on its own
 * covers every URL form.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redactSecrets, ReexError } from "../../src/errors/index.js";
import { buildExamples } from "../../src/examples/index.js";
import { ensureTestModel } from "../helpers/model.js";

const SECRET = "Sekr1t-pw_42";
const DOWN = `postgres://reader:${SECRET}@127.0.0.1:1/shop`;
const MALFORMED = `postgres://reader:${SECRET}@[bad/shop`;

let dir: string;
let model: string;
let dbRoot: string;

function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
      env: { ...(process.env as Record<string, string>), REEX_SQL_DATA_DIR: join(dir, "data"), REEX_POLICY_GPU: "cpu", REEX_POLICY_THREADS: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    p.stdout.on("data", (c: Buffer) => (out += c.toString()));
    p.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => p.kill("SIGKILL"), 90_000);
    p.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-secrets-"));
  model = await ensureTestModel();
  const sets = await buildExamples();
  dbRoot = join(sets[0]!.path, "..", "..");
  writeFileSync(join(dir, "predictions.json"), JSON.stringify({ "0": "SELECT 1" }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("redactSecrets", () => {
  it("hides the password of every postgres:// form and leaves the rest readable", () => {
    for (const [text, shown] of [
      [`postgres://u:${SECRET}@h/db`, "postgres://u:***@h/db"],
      [`POSTGRESQL://u:${SECRET}@h:5432/db?sslmode=require`, "POSTGRESQL://u:***@h:5432/db?sslmode=require"],
      [`name=postgres://u:${SECRET}@h/db`, "name=postgres://u:***@h/db"],
      [`file not found: /x/name=postgres://u:${encodeURIComponent("p@ss/w:rd")}@h/db`, "file not found: /x/name=postgres://u:***@h/db"],
      [`postgres://u@h/db?password=${SECRET}&sslmode=disable`, "postgres://u@h/db?password=***&sslmode=disable"],
      ["postgres://u@h/db and postgres://h/db", "postgres://u@h/db and postgres://h/db"],
    ] as const) {
      expect(redactSecrets(text)).toBe(shown);
    }
    expect(new ReexError("DB_FILE_NOT_FOUND", `no file ${DOWN}`, { issues: [{ path: ["db"], message: DOWN }] }).toJSON()).not.toMatchObject({
      message: expect.stringContaining(SECRET),
    });
    expect(JSON.stringify(new ReexError("BAD_REQUEST", DOWN, { issues: [{ path: ["db"], message: DOWN }] }))).not.toContain(SECRET);
  });
});

describe("no front end prints a password", () => {
  const clean = (r: { code: number | null; out: string }, what: string): void => {
    expect(r.code, `${what}: ${r.out}`).not.toBe(0);
    expect(r.out, what).not.toContain(SECRET);
    expect(r.out.length, `${what} said nothing`).toBeGreaterThan(0);
  };

  it("reex serve with --db, a name= setting, the environment and a config file", async () => {
    const file = join(dir, "config.json");
    writeFileSync(file, JSON.stringify({ sql: { postgres: [`shop=${DOWN}`] } }));
    const base = ["serve", "--server.port", "0", "--policy.model", model];
    const runs = await Promise.all([
      cli([...base, "--db", DOWN]),
      cli([...base, "--db", `shop=${MALFORMED}`]),
      cli([...base, "--db", `shop=${DOWN}`]),
      cli(base, { REEX_SQL_POSTGRES: `postgres://reader@127.0.0.1:1/shop?password=${SECRET}` }),
      cli([...base, "--config", file]),
    ]);
    runs.forEach((r, i) => clean(r, `serve #${i}`));
  }, 180_000);

  it("reex ask, exec, eval and mcp with an unreachable and a malformed URL", async () => {
    const runs = await Promise.all([
      cli(["ask", "--db", DOWN, "--model", model, "How many?"]),
      cli(["ask", "--db", `shop=${MALFORMED}`, "--model", model, "How many?"]),
      cli(["exec", "--db", DOWN, "SELECT 1"]),
      cli(["exec", "--db", MALFORMED, "SELECT 1"]),
      cli(["exec", "--db", `x=${DOWN}`, "SELECT 1"]),
      cli([
        "eval",
        "--dataset",
        "examples/questions.json",
        "--db-root",
        dbRoot,
        "--postgres",
        DOWN.replace("/shop", "/reex_{db_id}"),
        "--limit",
        "1",
        "--predictions",
        join(dir, "predictions.json"),
      ]),
      cli([
        "eval",
        "--dataset",
        "examples/questions.json",
        "--db-root",
        dbRoot,
        "--postgres",
        MALFORMED.replace("/shop", "/reex_{db_id}"),
        "--limit",
        "1",
        "--predictions",
        join(dir, "predictions.json"),
      ]),
      cli(["mcp", "--no-examples", "--db", DOWN, "--policy.model", model]),
      cli(["mcp", "--no-examples", "--db", `shop=${MALFORMED}`, "--policy.model", model]),
    ]);
    runs.forEach((r, i) => clean(r, `run #${i}`));
  }, 240_000);
});

/** `reex examples add|list|rm` end to end: a real process on a real SQLite file and a temp registry folder; the build stays the default. */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExampleStore } from "../../src/sql/index.js";

const run = promisify(execFile);
let dir: string;
let db: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-examples-cli-"));
  db = join(dir, "shop.sqlite");
  const d = new Database(db);
  d.exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, country TEXT); INSERT INTO orders VALUES (1, 'France'), (2, 'Peru');");
  d.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function reex(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return run(process.execPath, ["--import", "tsx", "src/cli.ts", "examples", ...args], {
    env: { ...process.env, REEX_SQL_DATA_DIR: join(dir, "data") },
    timeout: 120_000,
  }).then(
    (r) => ({ ...r, code: 0 }),
    (e: { stdout: string; stderr: string; code: number }) => ({ stdout: e.stdout, stderr: e.stderr, code: e.code }),
  );
}

describe("reex examples", { timeout: 180_000 }, () => {
  it("adds a verified example to a database given by path, lists it, and removes it; SQL that does not run is refused", async () => {
    const added = await reex([
      "add",
      "--db",
      db,
      "--question",
      "How many orders went to France?",
      "--sql",
      "SELECT COUNT(*) FROM orders WHERE country = 'France'",
    ]);
    expect(added.code, added.stderr).toBe(0);
    const id = /added (ex-[0-9a-f]{12})/.exec(added.stdout)![1]!;
    expect(added.stdout).toContain("1 rows of COUNT(*)");

    const bad = await reex(["add", "--db", db, "--question", "q", "--sql", "SELECT nope FROM orders"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("EXAMPLE_SQL_FAILED");

    const listed = await reex(["list", "--db", db, "--json"]);
    const body = JSON.parse(listed.stdout) as { database: string; examples: { id: string; shared: boolean }[] };
    expect(body.examples).toEqual([expect.objectContaining({ id, shared: true })]);
    expect(new ExampleStore({ dataDir: join(dir, "data"), maxPerDatabase: 10 }).list(body.database).map((e) => e.id)).toEqual([id]);

    const removed = await reex(["rm", "--db", db, id]);
    expect(removed.code, removed.stderr).toBe(0);
    expect((await reex(["list", "--db", db])).stdout).toContain("no verified examples");
  });

  it("documents the subcommands and keeps building the example databases without one", async () => {
    const help = await reex(["--help"]);
    expect(help.stdout).toContain("reex examples add  --db DB");
    const out = join(dir, "built");
    const built = await reex(["--out", out]);
    expect(built.code, built.stderr).toBe(0);
    expect(existsSync(join(out, "questions.json"))).toBe(true);
    expect((await reex(["list"])).code).toBe(2);
  });
});

/** `reex exec` as a real process: a double-quoted string probe returns rows, as in stock SQLite. */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const execFileAsync = promisify(execFile);
let dir: string;
let db: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-exec-dqs-"));
  db = join(dir, "world.sqlite");
  const w = new Database(db);
  w.exec(`CREATE TABLE country (Code TEXT, Name TEXT, Continent TEXT);
    INSERT INTO country VALUES ('ABW','Aruba','North America'), ('JPN','Japan','Asia'), ('NPL','Nepal','Asia');`);
  w.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function exec(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  return execFileAsync(process.execPath, ["--import", "tsx", "src/cli.ts", "exec", "--db", db, ...args], {
    env: { ...process.env, REEX_SQL_DATA_DIR: join(dir, "data") },
    timeout: 60_000,
  }).then(
    (r) => ({ ...r, code: 0 }),
    (e: { stdout: string; stderr: string; code: number }) => ({ stdout: e.stdout, stderr: e.stderr, code: e.code }),
  );
}

const hash = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

describe("reex exec with double-quoted strings", () => {
  it("returns the rows a double-quoted string selects, and keeps a double-quoted column a column", async () => {
    const before = hash(db);
    const r = await exec(["--json", `SELECT "Code", Name FROM country WHERE Continent = "Asia" ORDER BY "Code"`]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      ok: true,
      columns: ["Code", "Name"],
      rows: [
        ["JPN", "Japan"],
        ["NPL", "Nepal"],
      ],
    });
    expect(hash(db)).toBe(before);
  });

  it("still refuses a write written with double quotes, exit code 1", async () => {
    const r = await exec([`UPDATE country SET Name = "Nowhere" WHERE Code = "ABW"`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^SQL_REFUSED \(refused\)/m);
  });
});

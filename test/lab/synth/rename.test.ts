import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { executeDirect } from "../../../src/sql/index.js";
import { generateSynth, synthDbPath, type SynthResult } from "../../../lab/synth/index.js";
import { DOMAINS } from "../../../lab/synth/testing.js";

const SEED = 5;
const DBS = DOMAINS.length;
const dirs: string[] = [];
let plain: SynthResult;
let renamed: SynthResult;

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");
const tablesOf = (path: string): { name: string; rows: number; columns: string[] }[] => {
  const db = new Database(path, { readonly: true });
  try {
    const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").all() as { name: string }[];
    return names.map(({ name }) => ({
      name,
      rows: (db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n,
      columns: (db.prepare(`PRAGMA table_info("${name}")`).all() as { name: string }[]).map((c) => c.name),
    }));
  } finally {
    db.close();
  }
};

beforeAll(async () => {
  const a = await mkdtemp(join(tmpdir(), "reex-rename-a-"));
  const b = await mkdtemp(join(tmpdir(), "reex-rename-b-"));
  dirs.push(a, b);
  plain = generateSynth(a, { seed: SEED, dbs: DBS, devEvery: 7, lookalikes: 3, traces: false });
  renamed = generateSynth(b, { seed: SEED, dbs: DBS, devEvery: 7, lookalikes: 3, renameShare: 0.5, traces: false });
});

afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("synthetic data: renamed identifiers", () => {
  it("never touches a dev database", () => {
    const dev = plain.databases.filter((d) => d.split === "dev");
    expect(dev.length).toBeGreaterThan(0);
    for (const d of dev) expect(sha(synthDbPath(renamed.outDir, d.dbId))).toBe(sha(d.path));
    expect(renamed.dev).toEqual(plain.dev);
  });

  it("prefixes some train names and keeps the rows and the other names", () => {
    let prefixed = 0;
    for (const d of plain.databases.filter((x) => x.split === "train")) {
      const before = tablesOf(d.path);
      const after = tablesOf(synthDbPath(renamed.outDir, d.dbId));
      expect(after.map((t) => t.rows)).toEqual(before.map((t) => t.rows));
      for (const [k, t] of after.entries()) {
        const names = [t.name, ...t.columns];
        const old = [before[k]!.name, ...before[k]!.columns];
        for (const [j, n] of names.entries()) {
          if (n === old[j]) continue;
          expect(n).toMatch(new RegExp(`^[a-z]{2,3}_${old[j]}$`));
          prefixed++;
        }
      }
    }
    expect(prefixed).toBeGreaterThan(10);
    expect(renamed.manifest.renameShare).toBe(0.5);
    expect(plain.manifest.renameShare).toBeUndefined();
  });

  it("writes train questions whose gold SQL uses the new names and runs", () => {
    const renamedNames = new Map<string, string[]>();
    for (const d of plain.databases.filter((x) => x.split === "train")) {
      const before = tablesOf(d.path).flatMap((t) => [t.name, ...t.columns]);
      const after = tablesOf(synthDbPath(renamed.outDir, d.dbId)).flatMap((t) => [t.name, ...t.columns]);
      renamedNames.set(
        d.dbId,
        after.filter((n, j) => n !== before[j]),
      );
    }
    const items = renamed.train.filter((i) => (renamedNames.get(i.db_id) ?? []).some((n) => new RegExp(`\\b${n}\\b`).test(i.SQL)));
    expect(items.length).toBeGreaterThan(5);
    for (const item of items.slice(0, 40)) {
      const r = executeDirect(synthDbPath(renamed.outDir, item.db_id), item.SQL);
      expect(r.ok, `${item.db_id}: ${item.SQL}`).toBe(true);
    }
  });
});

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exampleQuestions } from "../../../src/examples/index.js";
import { EXAMPLE_DATABASES } from "../../../src/examples/testing.js";
import { executeDirect } from "../../../src/sql/index.js";
import { generateSynth, synthDbPath, type SynthResult } from "../../../lab/synth/index.js";
import { DOMAINS, LOOKALIKE_DOMAINS, SYNTH_FILES } from "../../../lab/synth/testing.js";

const SEED = 3;
const DBS = DOMAINS.length;
const LOOKALIKES = 2 * LOOKALIKE_DOMAINS.length;
const dirs: string[] = [];
let plain: SynthResult;
let withLookalikes: SynthResult;
let exact: SynthResult;

/** Every table's rows, as value arrays, in schema order: equal when only the names differ. */
const rowsOf = (path: string): unknown[][][] => {
  const db = new Database(path, { readonly: true });
  try {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid").pluck().all() as string[];
    return tables.map((t) => db.prepare(`SELECT * FROM "${t}" ORDER BY rowid`).raw().all() as unknown[][]);
  } finally {
    db.close();
  }
};

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

beforeAll(async () => {
  const a = await mkdtemp(join(tmpdir(), "reex-lookalike-a-"));
  const b = await mkdtemp(join(tmpdir(), "reex-lookalike-b-"));
  const c = await mkdtemp(join(tmpdir(), "reex-lookalike-c-"));
  dirs.push(a, b, c);
  plain = generateSynth(a, { seed: SEED, dbs: DBS, devEvery: 7, traces: false });
  withLookalikes = generateSynth(b, { seed: SEED, dbs: DBS, devEvery: 7, lookalikes: LOOKALIKES, traces: false });
  exact = generateSynth(c, { seed: SEED, dbs: DBS, devEvery: 7, lookalikes: LOOKALIKES, lookalikeExact: 1, traces: false });
});

afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe("synthetic data: example look-alikes", () => {
  it("leaves the other databases, the dev split and the train items before them unchanged", () => {
    for (const d of plain.databases) expect(sha(synthDbPath(withLookalikes.outDir, d.dbId))).toBe(sha(d.path));
    expect(readFileSync(join(withLookalikes.outDir, SYNTH_FILES.dev), "utf8")).toBe(readFileSync(join(plain.outDir, SYNTH_FILES.dev), "utf8"));
    expect(withLookalikes.train.slice(0, plain.train.length)).toEqual(plain.train);
    expect(plain.manifest.lookalikes).toBeUndefined();
    expect(withLookalikes.manifest.lookalikes).toBe(LOOKALIKES);
  });

  it("builds every look-alike into train, over the three look-alike domains", () => {
    const extra = withLookalikes.databases.slice(DBS);
    expect(extra).toHaveLength(LOOKALIKES);
    expect(extra.every((d) => d.split === "train" && !d.heldOutDomain)).toBe(true);
    expect(new Set(extra.map((d) => d.domain))).toEqual(new Set(LOOKALIKE_DOMAINS.map((d) => d.name)));
    expect(withLookalikes.train.length).toBeGreaterThan(plain.train.length);
  });

  it("imitates each example database's tables, one look-alike domain per example", () => {
    for (const [k, example] of EXAMPLE_DATABASES.entries()) {
      const domain = LOOKALIKE_DOMAINS[k]!;
      expect(domain.name).toBe(`${example.dbId}_like`);
      const tables = [...example.ddl.matchAll(/CREATE TABLE (\w+)/g)].map((m) => m[1]).sort();
      expect(tables.length).toBeGreaterThan(1);
      expect(domain.tables.map((t) => t.names[0]![0]).sort()).toEqual(tables);
    }
  });

  it("asks none of the examples' questions and writes gold SQL that runs on its database", () => {
    const asked = new Set(withLookalikes.train.map((i) => i.question.toLowerCase()));
    for (const q of exampleQuestions()) expect(asked.has(q.question.toLowerCase())).toBe(false);
    const items = withLookalikes.train.slice(plain.train.length);
    for (const item of items.filter((_, i) => i % 5 === 0)) {
      const r = executeDirect(synthDbPath(withLookalikes.outDir, item.db_id), item.SQL);
      expect(r.ok, `${item.db_id}: ${item.SQL}`).toBe(true);
    }
  });

  it("names look-alikes exactly as the examples on request, with the same rows and nothing else changed", () => {
    expect(exact.manifest.lookalikeExact).toBe(1);
    for (const d of plain.databases) expect(sha(synthDbPath(exact.outDir, d.dbId))).toBe(sha(d.path));
    const exampleTables = new Map(EXAMPLE_DATABASES.map((e) => [`${e.dbId}_like`, new Set([...e.ddl.matchAll(/CREATE TABLE (\w+)/g)].map((m) => m[1]!))]));
    for (const [k, d] of exact.databases.slice(DBS).entries()) {
      const varied = withLookalikes.databases[DBS + k]!;
      const tables = d.signature.split(";").map((t) => t.slice(0, t.indexOf("(")));
      expect(new Set(tables)).toEqual(exampleTables.get(d.domain));
      expect(d.signature).toMatch(/\b(customer|patient|artist)_id\b/);
      expect(d.signature).not.toMatch(/[A-Z]/);
      expect(d.dbId).toBe(varied.dbId);
      expect(rowsOf(d.path)).toEqual(rowsOf(varied.path));
    }
    const varied = withLookalikes.databases.slice(DBS).filter((d, k) => d.signature !== exact.databases[DBS + k]!.signature);
    expect(varied.length).toBeGreaterThan(0);
    for (const item of exact.train.slice(plain.train.length).filter((_, i) => i % 5 === 0)) {
      const r = executeDirect(synthDbPath(exact.outDir, item.db_id), item.SQL);
      expect(r.ok, `${item.db_id}: ${item.SQL}`).toBe(true);
    }
  });
});

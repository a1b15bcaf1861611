/**
 * The whole synthetic data set: N databases over the domain templates, their questions, a split by
 * database (dev = the databases of held-out domains), BIRD-layout files and the SFT traces of the
 * train items. Byte-for-byte deterministic for a seed: every database draws from its own seed
 * string, so database i is the same whatever N is.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, posix } from "node:path";
import { Rng, type BirdQuestion, type Difficulty } from "../../src/examples/index.js";
import { closeDirectConnections } from "../../src/sql/index.js";
import { DEFAULT_DEV_DOMAINS, DOMAINS, LOOKALIKE_DOMAINS, type DomainTemplate } from "./domains.js";
import { generateDatabase, writeSynthDb, type SynthDb } from "./generate.js";
import { buildQuestions, type SynthQuestion } from "./questions.js";
import { buildTraces, ServerPromptParts, type SftRecord, type SynthItem } from "./traces.js";

/** Bump when the generator's output changes for the same seed. */
export const SYNTH_VERSION = 5;

/** File names under the output root. */
export const SYNTH_FILES = { train: "train.json", dev: "dev.json", traces: "train_sft.jsonl", manifest: "synth.json" } as const;

/** What {@link generateSynth} builds. */
export interface SynthOptions {
  /** Default 1. */
  seed?: number;
  /** Databases to build. Default 200. */
  dbs?: number;
  /** Domains whose databases go to dev. Default {@link DEFAULT_DEV_DOMAINS}. */
  devDomains?: readonly string[];
  /**
   * Also send database i of the other domains to dev when `i % devEvery === devEvery - 1`: held-out
   * databases of seen domains (their own naming, encodings and rows). Default 0 (off).
   */
  devEvery?: number;
  /** Questions attempted per database, inclusive range. Default [12, 26]. */
  questionsPerDb?: readonly [number, number];
  /** Write the SFT traces of the train items. Default true. */
  traces?: boolean;
  /**
   * Extra train databases over {@link LOOKALIKE_DOMAINS} (look-alikes of the example databases), built
   * after the `dbs` others from their own seed strings, so databases 0 … dbs-1 do not change. Default 0.
   */
  lookalikes?: number;
  /**
   * Share of the look-alikes named exactly as the example databases (each table, key and column by
   * its first name variant, snake_case), drawn per database from its own seed string. Default 0.
   */
  lookalikeExact?: number;
  /**
   * Share of train databases' table and non-key column names given a random prefix (`renameIdentifiers`), so that
   * names must be read from the schema, not recalled. Dev databases never change. Default 0.
   */
  renameShare?: number;
}

/** One built database. */
export interface SynthDatabaseInfo {
  dbId: string;
  domain: string;
  split: "train" | "dev";
  /** The database's domain is one of the held-out dev domains. */
  heldOutDomain: boolean;
  /** Sorted table and column names, "table(col,col);…": two databases with equal signatures share a schema. */
  signature: string;
  path: string;
  questions: number;
}

/** What a build produced (items keep their generator metadata; the JSON files hold only BIRD fields). */
export interface SynthResult {
  outDir: string;
  databases: SynthDatabaseInfo[];
  train: SynthItem[];
  dev: SynthItem[];
  /** SFT records written (3 per train item), 0 when traces are off. */
  traces: number;
  /** Approximate tokens (characters / 4) of all SFT records, prompts included. */
  traceTokens: number;
  /** The manifest written to `synth.json`. */
  manifest: SynthManifest;
}

/** Summary written next to the data. */
export interface SynthManifest {
  version: number;
  seed: number;
  dbs: number;
  /** Extra train databases over the example look-alike domains (absent when 0). */
  lookalikes?: number;
  /** Share of look-alikes named exactly as the examples (absent when 0). */
  lookalikeExact?: number;
  /** Share of train identifiers renamed (absent when 0). */
  renameShare?: number;
  devDomains: string[];
  devEvery: number;
  domains: { train: string[]; dev: string[] };
  /** Dev databases whose table and column names equal some train database's (0 = every dev schema is unseen). */
  devSchemasSeenInTrain: number;
  databases: { train: number; dev: number };
  items: { train: number; dev: number };
  difficulty: { train: Record<Difficulty, number>; dev: Record<Difficulty, number> };
  /** Share of items whose naive natural-value SQL gives a different result. */
  encodedShare: { train: number; dev: number };
  traces: number;
  traceTokens: number;
  /** sha256 of every written file, by path relative to the root. */
  files: Record<string, string>;
}

/** Path of one database under an output root, BIRD style. */
export function synthDbPath(outDir: string, dbId: string): string {
  return join(outDir, "databases", dbId, `${dbId}.sqlite`);
}

/** The BIRD fields of an item, in BIRD's order. */
export function birdRecord(item: SynthItem): BirdQuestion {
  return { question_id: item.question_id, db_id: item.db_id, question: item.question, evidence: item.evidence, SQL: item.SQL, difficulty: item.difficulty };
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

function difficultyCounts(items: SynthItem[]): Record<Difficulty, number> {
  const out: Record<Difficulty, number> = { simple: 0, moderate: 0, challenging: 0 };
  for (const i of items) out[i.difficulty]++;
  return out;
}

const share = (items: SynthItem[]): number => (items.length ? Number((items.filter((i) => i.encoded).length / items.length).toFixed(4)) : 0);

/** The SFT records of the training questions, one JSON line each, prompted as the server prompts; their approximate token count. */
function traceLines(train: readonly SynthItem[], pathOf: ReadonlyMap<string, string>, outDir: string, seed: number): { lines: string[]; tokens: number } {
  const lines: string[] = [];
  let tokens = 0;
  const prompts = new ServerPromptParts(join(outDir, ".trace-indexes"));
  try {
    for (const item of train) {
      const path = pathOf.get(item.db_id)!;
      const { schema, matchedValues } = prompts.for(path, item.question, item.evidence);
      for (const rec of buildTraces(item, path, schema, `reex-synth:${seed}:trace:${item.db_id}:${item.question_id}`, matchedValues)) {
        lines.push(JSON.stringify(rec));
        tokens += approxRecordTokens(rec);
      }
    }
  } finally {
    prompts.close();
  }
  return { lines, tokens };
}

/** Builds every database, question and trace into `outDir` (created if needed; files it writes are replaced). */
export function generateSynth(outDir: string, options: SynthOptions = {}): SynthResult {
  const seed = options.seed ?? 1;
  const count = options.dbs ?? 200;
  const devDomains = [...(options.devDomains ?? DEFAULT_DEV_DOMAINS)];
  for (const d of devDomains) if (!DOMAINS.some((x) => x.name === d)) throw new Error(`unknown dev domain: ${d}`);
  const devEvery = options.devEvery ?? 0;
  if (!Number.isInteger(devEvery) || devEvery < 0 || devEvery === 1) throw new Error(`devEvery must be 0 or an integer ≥ 2, got ${devEvery}`);
  const [qMin, qMax] = options.questionsPerDb ?? [12, 26];
  const lookalikes = options.lookalikes ?? 0;
  const renameShare = options.renameShare ?? 0;
  const lookalikeExact = options.lookalikeExact ?? 0;
  if (!(lookalikeExact >= 0 && lookalikeExact <= 1)) throw new Error(`lookalikeExact must be in [0, 1], got ${lookalikeExact}`);
  if (!(renameShare >= 0 && renameShare <= 1)) throw new Error(`renameShare must be in [0, 1], got ${renameShare}`);
  if (!Number.isInteger(lookalikes) || lookalikes < 0) throw new Error(`lookalikes must be an integer ≥ 0, got ${lookalikes}`);
  const plan: { domain: DomainTemplate; dbId: string; base: string; lookalike: boolean; index: number }[] = [];
  for (let i = 0; i < count; i++) {
    const domain = DOMAINS[i % DOMAINS.length]!;
    plan.push({ domain, dbId: `${domain.name}_${String(i).padStart(4, "0")}`, base: `reex-synth:${seed}:${i}`, lookalike: false, index: i });
  }
  for (let j = 0; j < lookalikes; j++) {
    const domain = LOOKALIKE_DOMAINS[j % LOOKALIKE_DOMAINS.length]!;
    plan.push({ domain, dbId: `${domain.name}_${String(j).padStart(4, "0")}`, base: `reex-synth:${seed}:lookalike:${j}`, lookalike: true, index: j });
  }
  mkdirSync(outDir, { recursive: true });
  closeDirectConnections(); // a cached connection may point at a file this build replaces

  const databases: SynthDatabaseInfo[] = [];
  const perDb: { db: SynthDb; info: SynthDatabaseInfo; questions: SynthQuestion[] }[] = [];
  try {
    for (const { domain, dbId, base, lookalike, index: i } of plan) {
      const heldOutDomain = !lookalike && devDomains.includes(domain.name);
      const split = !lookalike && (heldOutDomain || (devEvery > 0 && i % devEvery === devEvery - 1)) ? "dev" : "train";
      const exactNames = lookalike && lookalikeExact > 0 && new Rng(`${base}:exact`).chance(lookalikeExact);
      const db = generateDatabase(domain, dbId, base, { renameShare: split === "train" && !exactNames ? renameShare : 0, exactNames });
      const path = synthDbPath(outDir, dbId);
      mkdirSync(join(outDir, "databases", dbId), { recursive: true });
      rmSync(path, { force: true });
      writeSynthDb(db, path);
      const target = new Rng(`${base}:n`).int(qMin, qMax);
      const questions = buildQuestions(db, path, `${base}:q`, target);
      const info: SynthDatabaseInfo = { dbId, domain: domain.name, split, heldOutDomain, signature: schemaSignature(db), path, questions: questions.length };
      databases.push(info);
      perDb.push({ db, info, questions });
    }

    const train: SynthItem[] = [];
    const dev: SynthItem[] = [];
    for (const { info, questions } of perDb) {
      const into = info.split === "dev" ? dev : train;
      for (const q of questions) into.push({ ...q, question_id: into.length });
    }
    writeFileSync(join(outDir, SYNTH_FILES.train), `${JSON.stringify(train.map(birdRecord), null, 2)}\n`);
    writeFileSync(join(outDir, SYNTH_FILES.dev), `${JSON.stringify(dev.map(birdRecord), null, 2)}\n`);

    let traces = 0;
    let traceTokens = 0;
    const tracesPath = join(outDir, SYNTH_FILES.traces);
    if (options.traces ?? true) {
      const { lines, tokens } = traceLines(train, new Map(databases.map((d) => [d.dbId, d.path])), outDir, seed);
      traceTokens = tokens;
      traces = lines.length;
      writeFileSync(tracesPath, lines.length ? `${lines.join("\n")}\n` : "");
    } else {
      rmSync(tracesPath, { force: true });
    }

    const files: Record<string, string> = {};
    for (const d of databases) files[posix.join("databases", d.dbId, `${d.dbId}.sqlite`)] = sha256(d.path);
    for (const f of [SYNTH_FILES.train, SYNTH_FILES.dev, ...(traces > 0 || (options.traces ?? true) ? [SYNTH_FILES.traces] : [])])
      files[f] = sha256(join(outDir, f));
    const manifest: SynthManifest = {
      version: SYNTH_VERSION,
      seed,
      dbs: count,
      ...(lookalikes > 0 ? { lookalikes } : {}),
      ...(lookalikeExact > 0 ? { lookalikeExact } : {}),
      ...(renameShare > 0 ? { renameShare } : {}),
      devDomains,
      devEvery,
      devSchemasSeenInTrain: (() => {
        const seen = new Set(databases.filter((d) => d.split === "train").map((d) => d.signature));
        return databases.filter((d) => d.split === "dev" && seen.has(d.signature)).length;
      })(),
      domains: {
        train: [...new Set(databases.filter((d) => d.split === "train").map((d) => d.domain))],
        dev: [...new Set(databases.filter((d) => d.split === "dev").map((d) => d.domain))],
      },
      databases: { train: databases.filter((d) => d.split === "train").length, dev: databases.filter((d) => d.split === "dev").length },
      items: { train: train.length, dev: dev.length },
      difficulty: { train: difficultyCounts(train), dev: difficultyCounts(dev) },
      encodedShare: { train: share(train), dev: share(dev) },
      traces,
      traceTokens,
      files,
    };
    writeFileSync(join(outDir, SYNTH_FILES.manifest), `${JSON.stringify(manifest, null, 2)}\n`);
    return { outDir, databases, train, dev, traces, traceTokens, manifest };
  } finally {
    closeDirectConnections();
  }
}

function schemaSignature(db: SynthDb): string {
  return db.tables
    .map((t) => `${t.name}(${[t.pk, ...t.columns.map((c) => c.name)].sort().join(",")})`)
    .sort()
    .join(";");
}

/** Approximate tokens of an SFT record (characters / 4 over its messages and response). */
export function approxRecordTokens(rec: SftRecord): number {
  const chars = rec.messages.reduce((n, m) => n + m.content.length, 0) + rec.response.length;
  return Math.ceil(chars / 4);
}

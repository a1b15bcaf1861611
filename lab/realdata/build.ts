/**
 * The real-question training data in one folder: databases rebuilt for WikiSQL, Advising and
 * Spider's schemas, their questions in BIRD layout per split, and SFT traces of the train items in
 * the synthetic data's format (lab/synth/traces.ts). Deterministic for a seed.
 */
import { createHash } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { BirdQuestion, Difficulty } from "../../src/examples/index.js";
import { closeDirectConnections } from "../../src/sql/index.js";
import { approxRecordTokens, buildTraces, ServerPromptParts, type TraceItem } from "../synth/index.js";
import { buildAdvising } from "./advising.js";
import { defaultDataDir, readWikiSqlEntries, type RealSplit } from "./source.js";
import { buildSpider } from "./spider.js";
import {
  buildWikiTable,
  checkWikiTable,
  type WikiQuestion,
  type WikiTable,
  type WikiTableNames,
  wikiDatabase,
  wikiNeighbours,
  wikiPools,
  wikiQuestions,
  wikiSecondDraw,
} from "./wikisql.js";

/** Bump when the output changes for the same seed (4: WikiSQL's second row draw added; everything of 3 byte-identical). */
export const REAL_DATA_VERSION = 4;

/** The sources, in build order. */
export const REAL_SOURCES = ["wikisql", "advising", "spider"] as const;

/** One of {@link REAL_SOURCES}. */
export type RealSource = (typeof REAL_SOURCES)[number];

/** What {@link generateRealData} builds. */
export interface RealDataOptions {
  /** Default 1. */
  seed?: number;
  /** Where the data files are. Default `data/text2sql` in the repository. */
  dataDir?: string;
  /** Sources to build. Default all of {@link REAL_SOURCES}. */
  sources?: readonly RealSource[];
  /** Build only the first N WikiSQL tables (in file order of their first question). Default all. */
  wikisqlTables?: number;
  /** How WikiSQL tables are named ({@link WikiTableNames}). Default "nouns"; "ids" with `wikisqlOthers: 0` rebuilds the v3 starter's data. */
  wikisqlNames?: WikiTableNames;
  /**
   * Most other WikiSQL tables of the same split put beside each table in its database (each gets 0
   * to this many, seeded), so that natural questions meet schemas of several tables. Default 2;
   * 0: one table a database, as real-data version 1.
   */
  wikisqlOthers?: number;
  /**
   * Also write each WikiSQL database's second row draw, `<db_id>.draw2.sqlite` beside it
   * ({@link realSecondDrawPath}): the same schema and gold SQL over rows drawn again, on which
   * rewards and `reex eval` check EX a second time. Default true.
   */
  wikisqlSecondDraw?: boolean;
  /** Spider databases to build (in file order). Default all 164. */
  spiderDatabases?: number;
  /** Write `train_sft.jsonl`. Default true. */
  traces?: boolean;
  /** Called with a line of progress now and then. */
  onProgress?: (line: string) => void;
}

/** An item in a split file, with what its trace needs. */
export interface RealItem extends TraceItem {
  source: RealSource;
  split: RealSplit;
  difficulty: Difficulty;
}

/** Counts per source. */
export interface RealSourceStats {
  /** Questions in the source (WikiSQL: 80,654; Advising: 4,387; Spider: generated ones). */
  questions: number;
  /** Questions kept: gold SQL runs and returns rows. */
  kept: number;
  /** Left out, by reason. */
  dropped: Record<string, number>;
  databases: number;
  /** WikiSQL with its second row draw: databases written, and kept questions whose gold SQL returns no rows on it (0 by construction). */
  secondDraw?: { databases: number; failing: number };
  /** Kept items per split. */
  splits: Partial<Record<RealSplit, number>>;
  seconds: number;
}

/** The manifest written to `realdata.json`. */
export interface RealDataManifest {
  version: number;
  seed: number;
  sources: Partial<Record<RealSource, RealSourceStats>>;
  traces: number;
  traceTokens: number;
  files: Record<string, string>;
}

/** File names under the output root: `<source>_<split>.json` per split, and these. */
export const REAL_FILES = { traces: "train_sft.jsonl", manifest: "realdata.json" } as const;

/** Path of one database under an output root, BIRD style. */
export function realDbPath(outDir: string, dbId: string): string {
  return join(outDir, "databases", dbId, `${dbId}.sqlite`);
}

/**
 * Path of a database's second row draw: the first draw's file with `.sqlite` replaced by
 * `.draw2.sqlite` (`<outDir>/databases/<db_id>/<db_id>.draw2.sqlite`), as src/eval's loader finds it.
 */
export function realSecondDrawPath(outDir: string, dbId: string): string {
  return realDbPath(outDir, dbId).replace(/\.sqlite$/, ".draw2.sqlite");
}

function writeDb(outDir: string, dbId: string, bytes: Buffer, path = realDbPath(outDir, dbId)): string {
  mkdirSync(join(outDir, "databases", dbId), { recursive: true });
  writeFileSync(path, bytes);
  return path;
}

function bump(into: Record<string, number>, from: Partial<Record<string, number>>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + (v ?? 0);
}

function buildWikiSql(outDir: string, seed: number, options: RealDataOptions, progress: (l: string) => void): { items: RealItem[]; stats: RealSourceStats } {
  const started = performance.now();
  const { questions, dropped: parseDrops, total } = wikiQuestions(readWikiSqlEntries(options.dataDir ?? defaultDataDir()));
  const dropped: Record<string, number> = {};
  bump(dropped, parseDrops);
  const pools = wikiPools(questions);
  const byTable = new Map<string, WikiQuestion[]>();
  for (const q of questions) {
    const list = byTable.get(q.tableId);
    if (list) list.push(q);
    else byTable.set(q.tableId, [q]);
  }
  const ids = [...byTable.keys()].slice(0, options.wikisqlTables ?? byTable.size);
  progress(`wikisql: ${total} questions read, ${questions.length} parsed, ${ids.length} tables to build`);
  const items: RealItem[] = [];
  const tableSeed = `reex-real:${seed}:wikisql`;
  const tables = ids.map((id) => buildWikiTable(id, byTable.get(id)!, pools, tableSeed, options.wikisqlNames));
  const bySplit = new Map<RealSplit, WikiTable[]>();
  for (const t of tables) {
    const list = bySplit.get(t.split);
    if (list) list.push(t);
    else bySplit.set(t.split, [t]);
  }
  const second = options.wikisqlSecondDraw === false ? undefined : new Map(tables.map((t) => [t, wikiSecondDraw(t, pools, tableSeed)]));
  const secondDraw = { databases: 0, failing: 0 };
  let n = 0;
  for (const table of tables) {
    const others = wikiNeighbours(table, bySplit.get(table.split)!, options.wikisqlOthers ?? 2, tableSeed);
    const db = wikiDatabase(table, others);
    const checked = checkWikiTable(db, table);
    writeDb(outDir, table.dbId, db.serialize());
    db.close();
    if (second) {
      const db2 = wikiDatabase(
        second.get(table)!,
        others.map((o) => second.get(o)!),
      );
      const kept2 = new Set(checkWikiTable(db2, second.get(table)!).items.map((it) => it.SQL));
      secondDraw.failing += checked.items.filter((it) => !kept2.has(it.SQL)).length;
      writeDb(outDir, table.dbId, db2.serialize(), realSecondDrawPath(outDir, table.dbId));
      db2.close();
      secondDraw.databases++;
    }
    bump(dropped, checked.dropped);
    for (const it of checked.items) items.push({ ...it, source: "wikisql", question_id: 0, evidence: "" });
    if (++n % 2500 === 0)
      progress(`wikisql: ${n}/${ids.length} tables, ${items.length} questions run and return rows (${((performance.now() - started) / 1000).toFixed(0)} s)`);
  }
  if (secondDraw.failing > 0) progress(`wikisql: warning: ${secondDraw.failing} kept questions return no rows on their second draw`);
  const considered = ids.length === byTable.size ? total : [...ids].reduce((s, id) => s + byTable.get(id)!.length, 0);
  return {
    items,
    stats: {
      questions: considered,
      kept: items.length,
      dropped: ids.length === byTable.size ? dropped : subsetDrops(dropped, parseDrops),
      databases: ids.length,
      ...(second ? { secondDraw } : {}),
      splits: {},
      seconds: 0,
    },
  };
}

/** With a subset of tables, questions that failed to parse belong to no table: leave them out of the counts. */
function subsetDrops(all: Record<string, number>, parse: Partial<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(all)) {
    const n = v - (parse[k] ?? 0);
    if (n > 0) out[k] = n;
  }
  return out;
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/** The BIRD fields of an item. */
export function realRecord(item: RealItem): BirdQuestion {
  return { question_id: item.question_id, db_id: item.db_id, question: item.question, evidence: item.evidence, SQL: item.SQL, difficulty: item.difficulty };
}

/** Builds every selected source into `outDir` (created if needed; files it writes are replaced). */
export function generateRealData(outDir: string, options: RealDataOptions = {}): { manifest: RealDataManifest; items: RealItem[] } {
  const seed = options.seed ?? 1;
  const sources = options.sources ?? REAL_SOURCES;
  const progress = options.onProgress ?? (() => {});
  mkdirSync(outDir, { recursive: true });
  closeDirectConnections();
  const all: RealItem[] = [];
  const stats: Partial<Record<RealSource, RealSourceStats>> = {};
  const files: Record<string, string> = {};
  const dbs = new Set<string>();
  try {
    for (const source of REAL_SOURCES) {
      if (!sources.includes(source)) continue;
      const started = performance.now();
      const built =
        source === "wikisql"
          ? buildWikiSql(outDir, seed, options, progress)
          : source === "advising"
            ? buildAdvising(options.dataDir ?? defaultDataDir(), seed, (dbId, bytes) => writeDb(outDir, dbId, bytes))
            : buildSpider(options.dataDir ?? defaultDataDir(), seed, options.spiderDatabases, (dbId) => {
                mkdirSync(join(outDir, "databases", dbId), { recursive: true });
                return realDbPath(outDir, dbId);
              });
      const items = built.items as RealItem[];
      for (const it of items) dbs.add(it.db_id);
      const splits: Partial<Record<RealSplit, RealItem[]>> = {};
      for (const it of items) (splits[it.split] ??= []).push(it);
      const counts: Partial<Record<RealSplit, number>> = {};
      for (const [split, list] of Object.entries(splits) as [RealSplit, RealItem[]][]) {
        list.forEach((it, i) => (it.question_id = i));
        counts[split] = list.length;
        const file = `${source}_${split}.json`;
        writeFileSync(join(outDir, file), `${JSON.stringify(list.map(realRecord), null, 2)}\n`);
        files[file] = sha256(join(outDir, file));
      }
      stats[source] = { ...built.stats, splits: counts, seconds: Number(((performance.now() - started) / 1000).toFixed(1)) };
      progress(
        `${source}: ${built.stats.kept} of ${built.stats.questions} questions kept on ${built.stats.databases} databases (${stats[source]!.seconds} s); dropped ${JSON.stringify(built.stats.dropped)}`,
      );
      all.push(...items);
    }

    let traces = 0;
    let traceTokens = 0;
    const tracesPath = join(outDir, REAL_FILES.traces);
    if (options.traces ?? true) {
      const started = performance.now();
      const train = all.filter((it) => it.split === "train");
      const fd = openSync(tracesPath, "w");
      const prompts = new ServerPromptParts(join(outDir, ".trace-indexes"));
      try {
        for (const item of train) {
          const path = realDbPath(outDir, item.db_id);
          const { schema, matchedValues } = prompts.for(path, item.question, item.evidence);
          const recs = buildTraces(item, path, schema, `reex-real:${seed}:trace:${item.source}:${item.question_id}`, matchedValues);
          writeSync(fd, recs.map((rec) => `${JSON.stringify(rec)}\n`).join(""));
          for (const rec of recs) traceTokens += approxRecordTokens(rec);
          traces += recs.length;
          if (traces % 30000 === 0) progress(`traces: ${traces / 3}/${train.length} train items (${((performance.now() - started) / 1000).toFixed(0)} s)`);
        }
      } finally {
        closeSync(fd);
        prompts.close();
      }
      files[REAL_FILES.traces] = sha256(tracesPath);
      progress(`traces: ${traces} SFT records (~${traceTokens} tokens) in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    } else {
      rmSync(tracesPath, { force: true });
    }
    const manifest: RealDataManifest = { version: REAL_DATA_VERSION, seed, sources: stats, traces, traceTokens, files };
    writeFileSync(join(outDir, REAL_FILES.manifest), `${JSON.stringify(manifest, null, 2)}\n`);
    return { manifest, items: all };
  } finally {
    closeDirectConnections();
  }
}

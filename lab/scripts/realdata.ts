/**
 * Builds the real-question training data (see docs/real-data.md):
 *
 *   npx tsx lab/scripts/realdata.ts --out DIR [--seed N] [--sources wikisql,advising,spider] [--wikisql-tables N] [--wikisql-names nouns|ids] [--wikisql-others N] [--spider-dbs N] [--no-second-draw] [--no-traces]
 *
 * Writes DIR/databases/<db_id>/<db_id>.sqlite (and, for WikiSQL, its second row draw
 * <db_id>.draw2.sqlite beside it unless --no-second-draw), DIR/<source>_<split>.json (BIRD layout),
 * DIR/train_sft.jsonl (SFT traces of the train items) and DIR/realdata.json (counts, dropped
 * questions by reason, file hashes), printing progress as it goes.
 */
import { resolve } from "node:path";
import { REAL_SOURCES, generateRealData, type RealSource, type WikiTableNames } from "../realdata/index.js";

const USAGE =
  "usage: npx tsx lab/scripts/realdata.ts --out DIR [--seed N] [--sources wikisql,advising,spider] [--wikisql-tables N] [--wikisql-names nouns|ids] [--wikisql-others N] [--spider-dbs N] [--no-second-draw] [--no-traces]";

function parse(argv: string[]): {
  out: string;
  seed: number;
  sources: RealSource[];
  wikisqlTables?: number;
  wikisqlNames?: WikiTableNames;
  wikisqlOthers?: number;
  spiderDatabases?: number;
  wikisqlSecondDraw: boolean;
  traces: boolean;
} {
  let out: string | undefined;
  let seed = 1;
  let sources: RealSource[] = [...REAL_SOURCES];
  let wikisqlTables: number | undefined;
  let spiderDatabases: number | undefined;
  let wikisqlNames: WikiTableNames | undefined;
  let wikisqlOthers: number | undefined;
  let traces = true;
  let wikisqlSecondDraw = true;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    const int = (v: string, min: number): number => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) throw new Error(`${arg} must be an integer >= ${min}\n${USAGE}`);
      return n;
    };
    if (arg === "--out") out = value();
    else if (arg === "--seed") seed = int(value(), 0);
    else if (arg === "--sources") {
      sources = value()
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean) as RealSource[];
      for (const s of sources) if (!REAL_SOURCES.includes(s)) throw new Error(`unknown source ${s} (one of ${REAL_SOURCES.join(", ")})\n${USAGE}`);
    } else if (arg === "--wikisql-tables") wikisqlTables = int(value(), 1);
    else if (arg === "--wikisql-names") {
      const v = value();
      if (v !== "nouns" && v !== "ids") throw new Error(`--wikisql-names is nouns or ids\n${USAGE}`);
      wikisqlNames = v;
    } else if (arg === "--wikisql-others") wikisqlOthers = int(value(), 0);
    else if (arg === "--spider-dbs") spiderDatabases = int(value(), 1);
    else if (arg === "--no-traces") traces = false;
    else if (arg === "--no-second-draw") wikisqlSecondDraw = false;
    else if (arg === "--help" || arg === "-h") {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  if (!out) throw new Error(`--out is required\n${USAGE}`);
  return {
    out: resolve(out),
    seed,
    sources,
    ...(wikisqlTables !== undefined ? { wikisqlTables } : {}),
    ...(spiderDatabases !== undefined ? { spiderDatabases } : {}),
    ...(wikisqlNames !== undefined ? { wikisqlNames } : {}),
    ...(wikisqlOthers !== undefined ? { wikisqlOthers } : {}),
    wikisqlSecondDraw,
    traces,
  };
}

function main(): number {
  let args;
  try {
    args = parse(process.argv.slice(2));
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    return 2;
  }
  const started = performance.now();
  const stamp = (): string => `[${((performance.now() - started) / 1000).toFixed(0).padStart(4)} s]`;
  const { manifest } = generateRealData(args.out, { ...args, onProgress: (line) => console.log(`${stamp()} ${line}`) });
  console.log(`${stamp()} real-question data in ${args.out} (seed ${manifest.seed})`);
  for (const [source, s] of Object.entries(manifest.sources)) {
    console.log(
      `  ${source}: ${s.kept} of ${s.questions} questions run and return rows, ${s.databases} databases${s.secondDraw ? ` (+${s.secondDraw.databases} second row draws, ${s.secondDraw.failing} questions without rows on theirs)` : ""}; splits ${JSON.stringify(s.splits)}; dropped ${JSON.stringify(s.dropped)}`,
    );
  }
  if (manifest.traces > 0)
    console.log(`  SFT records: ${manifest.traces} (~${manifest.traceTokens} tokens, ~${Math.round(manifest.traceTokens / manifest.traces)} per record)`);
  return 0;
}

process.exitCode = main();

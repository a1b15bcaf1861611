/**
 * Builds the synthetic text-to-SQL data set (see docs/synthetic-data.md):
 *
 *   npx tsx lab/scripts/synth.ts --out DIR [--seed N] [--dbs N] [--dev-domains a,b] [--dev-every N] [--lookalikes N] [--lookalike-exact P] [--rename-share P] [--no-traces]
 *
 * Writes DIR/databases/<db_id>/<db_id>.sqlite, DIR/train.json, DIR/dev.json, DIR/train_sft.jsonl
 * and DIR/synth.json (a manifest with counts and file hashes), then prints a summary.
 */
import { resolve } from "node:path";
import { DEFAULT_DEV_DOMAINS, generateSynth } from "../synth/index.js";

const USAGE =
  "usage: npx tsx lab/scripts/synth.ts --out DIR [--seed N] [--dbs N] [--dev-domains a,b] [--dev-every N] [--lookalikes N] [--lookalike-exact P] [--rename-share P] [--no-traces]";

function parse(argv: string[]): {
  out: string;
  seed: number;
  dbs: number;
  devDomains: string[];
  devEvery: number;
  lookalikes: number;
  lookalikeExact: number;
  renameShare: number;
  traces: boolean;
} {
  let out: string | undefined;
  let seed = 1;
  let dbs = 200;
  let devDomains = [...DEFAULT_DEV_DOMAINS];
  let traces = true;
  let devEvery = 0;
  let lookalikes = 0;
  let renameShare = 0;
  let lookalikeExact = 0;
  const share = (name: string, v: string): number => {
    const n = Number(v);
    if (!(n >= 0 && n <= 1)) throw new Error(`${name} must be a number in [0, 1]\n${USAGE}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value\n${USAGE}`);
      return v;
    };
    const int = (name: string, v: string, min: number): number => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer >= ${min}\n${USAGE}`);
      return n;
    };
    if (arg === "--out") out = value();
    else if (arg === "--seed") seed = int("--seed", value(), 0);
    else if (arg === "--dbs") dbs = int("--dbs", value(), 1);
    else if (arg === "--dev-domains")
      devDomains = value()
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    else if (arg === "--dev-every") devEvery = int("--dev-every", value(), 0);
    else if (arg === "--lookalikes") lookalikes = int("--lookalikes", value(), 0);
    else if (arg === "--lookalike-exact") lookalikeExact = share("--lookalike-exact", value());
    else if (arg === "--rename-share") renameShare = share("--rename-share", value());
    else if (arg === "--no-traces") traces = false;
    else if (arg === "--help" || arg === "-h") {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}\n${USAGE}`);
  }
  if (!out) throw new Error(`--out is required\n${USAGE}`);
  return { out: resolve(out), seed, dbs, devDomains, devEvery, lookalikes, lookalikeExact, renameShare, traces };
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
  const result = generateSynth(args.out, {
    seed: args.seed,
    dbs: args.dbs,
    devDomains: args.devDomains,
    devEvery: args.devEvery,
    lookalikes: args.lookalikes,
    lookalikeExact: args.lookalikeExact,
    renameShare: args.renameShare,
    traces: args.traces,
  });
  const m = result.manifest;
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`synthetic data in ${args.out} (${seconds} s, seed ${m.seed})`);
  console.log(`  databases: ${m.databases.train} train (${m.domains.train.join(", ")}), ${m.databases.dev} dev (${m.domains.dev.join(", ")})`);
  console.log(`  items: ${m.items.train} train, ${m.items.dev} dev`);
  console.log(`  difficulty train: ${JSON.stringify(m.difficulty.train)}; dev: ${JSON.stringify(m.difficulty.dev)}`);
  console.log(`  needs probing (naive SQL differs): train ${(m.encodedShare.train * 100).toFixed(1)}%, dev ${(m.encodedShare.dev * 100).toFixed(1)}%`);
  if (m.traces > 0) console.log(`  SFT records: ${m.traces} (~${m.traceTokens} tokens, ~${Math.round(m.traceTokens / m.traces)} per record)`);
  return 0;
}

process.exitCode = main();

/**
 * `reex reward`: scores one model response against a gold query on a database and prints every
 * reward component, its weight and the diagnostics, for one preset or all of them.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { PROFILE_IDS, PROMPT_FAMILIES, familyFor, getProfile, type ModelProfile, type PromptFamily } from "../agent/index.js";
import { ReexError } from "../errors/index.js";
import { ExecutorPool, approxTokens } from "../sql/index.js";
import { EX_RULES } from "../eval/index.js";
import {
  GoldCache,
  REWARD_PRESETS,
  REWARD_TEMPLATES,
  gatherFacts,
  resolveRewardSpec,
  rewardFromFacts,
  type RewardBreakdown,
  type RewardFacts,
} from "../training/index.js";

/** One-line description shown by `reex --help`. */
export const summary = "score one response against a gold query and print every reward component";

const FAMILIES: readonly PromptFamily[] = PROMPT_FAMILIES;

const HELP = `usage: reex reward --db PATH --gold SQL|@FILE --response TEXT|@FILE [--preset NAME|all] [--profile ID] [--family F] [--json]

Scores one response (its probes, injected feedback blocks and final SQL, read in the model
profile's tags) against the gold SQL on a SQLite database, executing both, and prints each reward
component, its weight and diagnostics.

options:
  --db PATH            SQLite database file
  --gold SQL|@FILE     gold query (or @file holding it)
  --response TEXT|@FILE the model's whole response, injected <result> blocks included
  --preset NAME|all    ${REWARD_PRESETS.join(", ")}; "all" scores every preset (default maxtune)
  --profile ID         protocol the response is written in: ${PROFILE_IDS.join(", ")} (default reex);
                       the format check is the profile's, probes and the answer are its tags
  --family F           prompt family of the format check: ${FAMILIES.join(", ")}, one the profile
                       supports (default the profile's first: execution-aware for reex and skyrl-sql)
  --no-exploration     ReEx presets: exploration weight 0
  --ex-rule R          ${EX_RULES.join(" | ")}: what "correct" means (default bird)
  --template T         ${REWARD_TEMPLATES.join(" | ")} (default family)
  --tokens N           generated tokens of the response, for length terms (default ≈ characters / 4)
  --length-tokens K    k of the SQL-R1 / CogniSQL length terms (default 512)
  --timeout-ms MS      limit per query (default 30000)
  --json               print JSON
  -h, --help           show this help`;

const OPTIONS = {
  db: { type: "string" },
  gold: { type: "string" },
  response: { type: "string" },
  preset: { type: "string" },
  family: { type: "string" },
  profile: { type: "string" },
  "no-exploration": { type: "boolean" },
  "ex-rule": { type: "string" },
  template: { type: "string" },
  tokens: { type: "string" },
  "length-tokens": { type: "string" },
  "timeout-ms": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

function textArg(name: string, raw: string): string {
  if (!raw.startsWith("@")) return raw;
  try {
    return readFileSync(raw.slice(1), "utf8");
  } catch (err) {
    throw new ReexError("BAD_REQUEST", `--${name}: cannot read ${raw.slice(1)}: ${(err as Error).message}`);
  }
}

function intArg(name: string, raw: string | undefined, min: number): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new ReexError("BAD_REQUEST", `--${name} must be an integer ≥ ${min}, got "${raw}"`);
  return n;
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(4).replace(/0+$/, "");
}

function describeResult(label: string, r: RewardFacts["finalResult"]): string {
  if (r === null) return `${label}: no SQL`;
  return r.ok ? `${label}: ${r.rowCount} row(s) × ${r.columns.length} column(s)` : `${label}: ${r.error.code}: ${r.error.message}`;
}

function table(reward: RewardBreakdown): string[] {
  const names = Object.keys(reward.components);
  const w = Math.max(9, ...names.map((n) => n.length));
  const lines = [`${"component".padEnd(w)}  ${"value".padStart(8)}  ${"weight".padStart(7)}  ${"weighted".padStart(9)}`];
  for (const n of names) {
    const v = reward.components[n]!;
    const wt = reward.weights[n] ?? 0;
    lines.push(`${n.padEnd(w)}  ${fmt(v).padStart(8)}  ${fmt(wt).padStart(7)}  ${fmt(v * wt).padStart(9)}`);
  }
  lines.push(`${"total".padEnd(w)}  ${"".padStart(8)}  ${"".padStart(7)}  ${fmt(reward.total).padStart(9)}`);
  const details = Object.entries(reward.details).map(([k, v]) => `${k} ${fmt(v)}`);
  if (details.length) lines.push(`details: ${details.join(", ")}`);
  return lines;
}

/** Runs `reex reward`; returns the exit code (0 scored, 1 the gold SQL does not run, 2 bad arguments). */
export async function run(argv: string[]): Promise<number> {
  let values: { [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K]["type"] extends "boolean" ? boolean : string };
  try {
    ({ values } = parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }));
  } catch (err) {
    console.error(`reex reward: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  let db: string;
  let gold: string;
  let response: string;
  let family: PromptFamily;
  let profile: ModelProfile;
  let presets: string[];
  let tokens: number;
  let timeoutMs: number;
  let specBase: Parameters<typeof resolveRewardSpec>[0];
  try {
    if (!values.db || values.gold === undefined || values.response === undefined)
      throw new ReexError("BAD_REQUEST", "--db, --gold and --response are required");
    db = resolve(values.db);
    gold = textArg("gold", values.gold).trim();
    response = textArg("response", values.response);
    profile = getProfile(values.profile ?? "reex");
    if (values.family !== undefined && !FAMILIES.includes(values.family as PromptFamily))
      throw new ReexError("BAD_REQUEST", `--family must be one of ${FAMILIES.join(", ")}, got "${values.family}"`);
    family = familyFor(profile, values.family as PromptFamily | undefined);
    const exRule = values["ex-rule"] ?? "bird";
    if (!(EX_RULES as readonly string[]).includes(exRule))
      throw new ReexError("BAD_REQUEST", `--ex-rule must be one of ${EX_RULES.join(", ")}, got "${exRule}"`);
    const template = values.template ?? "family";
    if (!(REWARD_TEMPLATES as readonly string[]).includes(template))
      throw new ReexError("BAD_REQUEST", `--template must be one of ${REWARD_TEMPLATES.join(", ")}, got "${template}"`);
    const lengthTokens = intArg("length-tokens", values["length-tokens"], 1);
    specBase = {
      exploration: !values["no-exploration"],
      exRule: exRule as "bird",
      template: template as "family",
      ...(lengthTokens !== undefined ? { lengthTokens } : {}),
    };
    presets = values.preset === "all" ? [...REWARD_PRESETS].filter((p) => p !== "custom") : [values.preset ?? "maxtune"];
    for (const p of presets) resolveRewardSpec({ ...specBase, preset: p });
    tokens = intArg("tokens", values.tokens, 0) ?? approxTokens(response);
    timeoutMs = intArg("timeout-ms", values["timeout-ms"], 1) ?? 30_000;
  } catch (err) {
    console.error(`reex reward: ${(err as Error).message}\n\n${HELP}`);
    return 2;
  }

  const executor = new ExecutorPool({ workers: 1, timeoutMs, maxRows: 100_000 });
  try {
    const env = { executor, goldCache: new GoldCache(), timeoutMs };
    const first = resolveRewardSpec({ ...specBase, preset: presets[0]! });
    const facts = await gatherFacts({ response, profile, family, goldSql: gold, dbPath: db, generatedTokens: tokens }, env, first);
    const rewards = presets.map((p) => rewardFromFacts(facts, resolveRewardSpec({ ...specBase, preset: p })));
    const code = facts.goldResult.ok ? 0 : 1;
    if (!facts.goldResult.ok)
      console.error(`reex reward: the gold SQL does not run (${facts.goldResult.error.code}: ${facts.goldResult.error.message}); nothing can be correct`);
    if (values.json) {
      console.log(
        JSON.stringify(
          {
            finalSql: facts.finalSql,
            goldSql: facts.goldSql,
            profile: facts.profile,
            family: facts.family,
            formatOk: facts.formatOk,
            formatProblems: facts.formatProblems,
            softFormatOk: facts.softFormatOk,
            executable: facts.executable,
            correct: facts.correct,
            probes: facts.probes,
            interactions: facts.interactions,
            generatedTokens: facts.generatedTokens,
            goldError: facts.goldResult.ok ? null : facts.goldResult.error,
            finalError: facts.finalResult && !facts.finalResult.ok ? facts.finalResult.error : null,
            ...(rewards.length === 1 ? rewards[0] : { rewards }),
          },
          null,
          2,
        ),
      );
      return code;
    }
    const lines: string[] = [];
    lines.push(`profile: ${facts.profile}, ${facts.family} family`);
    lines.push(`final SQL: ${facts.finalSql ?? "(none)"}`);
    lines.push(describeResult("gold", facts.goldResult), describeResult("final", facts.finalResult));
    lines.push(`format: ${facts.formatOk ? "ok" : `not ok (${facts.formatProblems.join("; ")})`}; soft format ${facts.softFormatOk ? "ok" : "not ok"}`);
    lines.push(
      `probes: ${facts.probes.length} (${facts.probes.filter((p) => p.repeated).length} repeated), interactions ${facts.interactions}, generated tokens ${facts.generatedTokens}`,
    );
    lines.push(`correct (${first.exRule} EX): ${facts.correct ? "yes" : "no"}`);
    for (const r of rewards) {
      lines.push("", `preset ${r.preset}: total ${fmt(r.total)}`, ...table(r));
    }
    console.log(lines.join("\n"));
    return code;
  } finally {
    await executor.close();
  }
}

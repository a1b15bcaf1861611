/**
 * Server-side rewrites of a final SQL as one stage: each rule is one module implementing
 * {@link RewriteRule} (when it applies, what it changes, each change as text, never offsets), and
 * {@link REWRITE_RULES} lists them in the order the rollout applies them. Everything a rule shows
 * outside the agent is derived from that list: the rollout's switch (the `agent.*` config key of
 * the same name), the candidate, rollout-result, eval and REST field, the `repair` event's field,
 * the `/metrics` counter, the confidence signal and its doubt, the playground's and the CLI's
 * sentence, and the row of docs/architecture.md's "Server rewrites" table.
 *
 * A new rule is its own file (the rule object, and its field of the `repair` event declared into
 * src/events' `RepairFixes`) plus one entry below; its switch is one `agent.*` key of the config
 * schema (src/config may not import the agent) and its docs row (test/agent/rewrites.test.ts).
 */
import type { RepairFixes } from "../events/index.js";
import type { SqlErrorCategory } from "../sql/index.js";
import { COVERAGE_REWRITE } from "./coverage.js";
import { LITERAL_REWRITE } from "./literals.js";
import { TABLE_REWRITE } from "./repair.js";
import type { RewriteContext, RewriteFix, RewriteRule } from "./rewrite-types.js";

export type { FixShape, RewriteContext, RewriteFix, RewriteResult, RewriteRule } from "./rewrite-types.js";

/** The rewrite rules, in the order the rollout applies them to a final SQL. */
export const REWRITE_RULES = [TABLE_REWRITE, LITERAL_REWRITE, COVERAGE_REWRITE] as const;

/** One rule of the list. */
type ListedRule = (typeof REWRITE_RULES)[number];

/** The fix type of a rule, read off its `apply`. */
type FixOf<R> = R extends { apply(...args: never[]): Promise<infer Out> } ? (Out extends { fixes: (infer F)[] } ? F : never) : never;

/** A rule's id. */
export type RewriteId = ListedRule["id"];

/** A rule's confidence signal. */
export type RewriteSignal = ListedRule["signal"];

/** The rules' fields of a rollout result, candidate or eval record (`repairs`, …), each absent when the rule changed nothing. */
export type RewriteFields = { [R in ListedRule as R["field"]]?: FixOf<R>[] };

/** The rules' switches (`repairTables`, …), each an `agent.*` config key. */
export type RewriteSwitches = { [R in ListedRule as R["flag"]]: boolean };

/** One rule's rewrite of a final SQL, as the rollout keeps it. */
export interface AppliedRewrite {
  rule: RewriteId;
  fixes: readonly RewriteFix[];
}

const rules: readonly RewriteRule[] = REWRITE_RULES;

/** The fixes `record[key]` lists, or undefined when it lists none. */
function fixesIn(record: object, key: string): readonly RewriteFix[] | undefined {
  const fixes = (record as Record<string, readonly RewriteFix[] | undefined>)[key];
  return fixes && fixes.length > 0 ? fixes : undefined;
}

/**
 * Applies the switched-on rules to a closed final SQL, in list order: a rule with `fails` to a SQL
 * that failed with that category, the others to one that ran or that a rule before them mended.
 * `failed` is the SQL's error category (null when it ran); `context` is read only when a rule applies.
 */
export async function applyRewrites(
  sql: string,
  failed: SqlErrorCategory | null,
  switches: Partial<RewriteSwitches>,
  context: () => RewriteContext | undefined,
): Promise<{ sql: string; applied: AppliedRewrite[] } | undefined> {
  let out = sql;
  let failing = failed;
  let given: RewriteContext | undefined;
  const applied: AppliedRewrite[] = [];
  for (const rule of rules) {
    if (!switches[rule.flag as keyof RewriteSwitches] || (rule.fails === undefined ? failing !== null : failing !== rule.fails)) continue;
    given ??= context();
    if (!given) return undefined; // the schema cannot be read: no rule applies
    const result = await rule.apply(out, given);
    if (!result || result.fixes.length === 0) continue;
    out = result.sql;
    failing = null;
    applied.push({ rule: rule.id as RewriteId, fixes: result.fixes });
  }
  return applied.length > 0 ? { sql: out, applied } : undefined;
}

/** Whether any rule is switched on. */
export function rewritesOn(switches: Partial<RewriteSwitches>): boolean {
  return rules.some((r) => switches[r.flag as keyof RewriteSwitches]);
}

/** Every rule switched off: how training rollouts run, and the trainer's held-out evaluation with them. */
export const REWRITES_OFF: Readonly<RewriteSwitches> = Object.fromEntries(rules.map((r) => [r.flag, false])) as RewriteSwitches;

/** The rules' switches read off `source` (the agent config, the decoder's defaults). */
export function rewriteSwitches(source: RewriteSwitches): RewriteSwitches {
  return Object.fromEntries(rules.map((r) => [r.flag, source[r.flag as keyof RewriteSwitches]])) as RewriteSwitches;
}

/** The changes `applied` holds for rule `id`, copied, in order. */
function changesOf(applied: readonly AppliedRewrite[], id: string): RewriteFix[] {
  return applied.filter((a) => a.rule === id).flatMap((a) => a.fixes.map((f) => ({ ...f })));
}

/** Each rule's fixes in `applied`, under the rule's field (a rollout result's `repairs`, …); a rule that changed nothing is absent. */
export function rewriteFields(applied: readonly AppliedRewrite[]): RewriteFields {
  const out: Record<string, RewriteFix[]> = {};
  for (const rule of rules) {
    const fixes = changesOf(applied, rule.id);
    if (fixes.length > 0) out[rule.field] = fixes;
  }
  return out as RewriteFields;
}

/** The rules' fields of `source` (a rollout result, a candidate), each fix copied; absent ones stay absent. */
export function copyRewriteFields(source: RewriteFields): RewriteFields {
  const out: Record<string, RewriteFix[]> = {};
  for (const rule of rules) {
    const fixes = (source as Record<string, readonly RewriteFix[] | undefined>)[rule.field];
    if (fixes) out[rule.field] = fixes.map((f) => ({ ...f }));
  }
  return out as RewriteFields;
}

/** The `repair` event's fields for `applied`: each rule's fixes under its event field (`swaps` always, as `[]` when no table was rebound). */
export function rewriteEventFields(applied: readonly AppliedRewrite[]): RepairFixes {
  const out: Record<string, RewriteFix[]> = {};
  for (const rule of rules) {
    const fixes = changesOf(applied, rule.id);
    if (fixes.length > 0 || rule.eventAlways) out[rule.eventField] = fixes;
  }
  return out as unknown as RepairFixes;
}

/** The ids of the rules whose fixes `record` lists under their field (`"field"`: a candidate) or their event field (`"eventField"`: a `repair` event). */
export function rewritesIn(record: object, key: "field" | "eventField"): RewriteId[] {
  return rules.filter((r) => fixesIn(record, r[key]) !== undefined).map((r) => r.id as RewriteId);
}

/** One change as the CLI and MCP show it: `from -> to`, `+ to` for an addition (the playground writes `→`). */
function describeFix(fix: RewriteFix): string {
  return fix.from ? `${fix.from} -> ${fix.to}` : `+ ${fix.to}`;
}

/** One line on what a `repair` event changed, rule by rule: `final SQL failed; tables rebound (a -> b); …`. */
export function describeRewrites(event: RepairFixes): string {
  return rules
    .flatMap((r) => {
      const fixes = fixesIn(event, r.eventField);
      return fixes ? [`${r.says} (${fixes.map((f) => describeFix(f)).join(", ")})`] : [];
    })
    .join("; ");
}

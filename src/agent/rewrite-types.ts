/**
 * The shapes the rewrite rules share (types only): a rule, what it reads, what it changes. The
 * rules (repair.ts, literals.ts, coverage.ts) implement {@link RewriteRule} and rewrites.ts lists
 * them, so neither imports the other's module for its types.
 */
import type { AGENT_DEFAULTS } from "../config/index.js";
import type { RepairFixes } from "../events/index.js";
import type { SqlErrorCategory, SqlValue } from "../sql/index.js";
import type { SchemaNames } from "./grammar.js";

/** A value of the database that the question names (the prompt's matched values), with how surely (0–1]. */
export interface NamedValue {
  table: string;
  column: string;
  value: string;
  score: number;
}

/** Runs a read-only query for {@link repairLiterals}: its rows, or undefined when it fails. */
export type ReadRows = (sql: string) => Promise<SqlValue[][] | undefined>;

/** What every change a rule makes says: the text the SQL had (empty when the rule added it) and the text it has now. */
export interface RewriteFix {
  from: string;
  to: string;
}

/** What a rule may read besides the SQL: the schema's names, lookups, the values the question names and the question. */
export interface RewriteContext {
  schema: SchemaNames;
  /** Runs a read-only lookup query: its rows, or undefined when it fails. */
  read: ReadRows;
  /** The values the question names (the prompt's matched values); absent when none. */
  named?: readonly NamedValue[];
  /** The user's question; absent when unknown. */
  question?: string;
}

/** A rule's rewrite: the new SQL and each change, in order. */
export interface RewriteResult<Fix extends RewriteFix = RewriteFix> {
  sql: string;
  fixes: Fix[];
}

/** How the API schema describes one field of a fix: any string, or the values it takes. */
type FixFieldShape<V> = string extends V ? "string" : readonly V[];

/** The fields of a fix as the API schema (`/openapi.json`) lists them, in order. */
export type FixShape<Fix extends RewriteFix> = { [K in keyof Fix]-?: FixFieldShape<Fix[K]> };

/** The agent's boolean config keys: a rule's switch is one of them. */
type AgentSwitch = { [K in keyof typeof AGENT_DEFAULTS]: (typeof AGENT_DEFAULTS)[K] extends boolean ? K : never }[keyof typeof AGENT_DEFAULTS];

/** One server-side rewrite of a final SQL, and every name it is known by outside the agent. */
export interface RewriteRule<Fix extends RewriteFix = RewriteFix> {
  /** The rule's id (the docs table's first column). */
  id: string;
  /** The rollout option and `agent.*` config key that switch it on. */
  flag: AgentSwitch;
  /** The field of the rollout result, the decoder's candidates, the REST answer and the eval record that lists its fixes. */
  field: string;
  /** The field of the `repair` event that lists its fixes (declared into src/events' `RepairFixes` by the rule's module). */
  eventField: keyof RepairFixes;
  /** The `repair` event carries the field even when the rule changed nothing (`[]`): table repair's `swaps`, as the event always had it. */
  eventAlways?: true;
  /** The confidence signal (1 when the winner was rewritten by the rule) and the doubt it reads as. */
  signal: string;
  doubt: string;
  /** The `/metrics` counter of final SQL the rule rewrote. */
  metric: { name: string; help: string };
  /** What the playground, the CLI and MCP traces say before the changes (`<says>: a → b, + c`). */
  says: string;
  /** The API schema of the field: each fix's fields, and the field's description. */
  api: { shape: FixShape<Fix>; description: string };
  /** What it does, as the docs table says it. */
  docs: string;
  /** It rewrites a final SQL that failed with this error category (before any retry); absent: one that runs (or that a rule before it mended). */
  fails?: SqlErrorCategory;
  /** The rewritten SQL and its changes, or undefined when the rule changes nothing; the caller runs the result before it takes it. */
  apply(sql: string, context: RewriteContext): Promise<RewriteResult<Fix> | undefined>;
}

/**
 * A rollout's options, resolved in one place. The agent settings (`maxInteractions`, `maxTokens`,
 * `feedback`, `finalRetries`, each rewrite rule's switch, …) are typed from the config schema's
 * `agent` section and take its defaults; the few options the config does not hold (sampling of a
 * lone rollout, the profile, log-probabilities, the longest cell shown) take {@link ROLLOUT_DEFAULTS}.
 * The rollout reads {@link RolloutOptions} as given: it has no default of its own.
 */
import { AGENT_DEFAULTS, type Config } from "../config/index.js";
import type { EventSink } from "../events/index.js";
import type { Executor } from "../sql/index.js";
import type { SegmentGrammars } from "./grammar.js";
import { REWRITES_OFF } from "./rewrites.js";
import type { NamedValue } from "./literals.js";
import { reexProfile, type ModelProfile } from "./profiles/index.js";
import type { PromptFamily } from "./types.js";

/** The config schema's `agent` section, resolved (`z.infer` of it). */
type AgentSettings = Config["agent"];

/** The options the config does not hold, with their values where a caller leaves them out. */
export const ROLLOUT_DEFAULTS = Object.freeze({
  /** Greedy. */
  temperature: 0,
  topP: 1,
  /** `meanLogprob` is NaN without them. */
  logprobs: true,
  /** Longest cell shown in feedback. */
  maxCellChars: 60,
  /** Stop at end-of-turn tokens (true is for benchmarks: a rollout runs until it answers or spends `maxTokens`). */
  ignoreEos: false,
});

/** The policy's own answers: no final retries, no server rewrites (training's rollouts, the starter's and the benchmarks' evaluations). */
export const OWN_ANSWERS: Readonly<Pick<RolloutOptions, "finalRetries" | keyof typeof REWRITES_OFF>> = Object.freeze({ finalRetries: 0, ...REWRITES_OFF });

/**
 * How one rollout runs, resolved (see {@link resolveRolloutOptions}). The config's `agent` section
 * documents each setting; each rewrite rule's switch rewrites a closed final SQL before any retry
 * and needs a trajectory that can rewind; `finalRetries` needs the execution-aware family too.
 */
export interface RolloutOptions extends AgentSettings {
  executor: Executor;
  /** The database probes run against. */
  dbPath: string;
  /** The model's protocol: tags, stops, feedback wrapper and parser. */
  profile: ModelProfile;
  /** Only "execution-aware" (in a profile with probes) executes probes; the others generate until the answer closes. */
  family: PromptFamily;
  temperature: number;
  topP: number;
  /** Compute sampled tokens' log-probabilities (see the policy's `GenerateOptions.logprobs`). */
  logprobs: boolean;
  /** Longest cell shown. */
  maxCellChars: number;
  /** Sample past end-of-turn tokens (the policy's `ignoreEos`). */
  ignoreEos: boolean;
  /** The values the question names (the prompt's matched values), for the rewrite rules (literal and coverage repair); none when absent. */
  namedValues?: readonly NamedValue[];
  /** The user's question, for the rewrite rules (coverage repair's year and row count); none when absent. */
  question?: string;
  /** Seed passed to every generate call; random when absent. */
  seed?: number;
  /** Per-probe execution limit, ms; the executor's when absent. */
  timeoutMs?: number;
  /** Rows fetched per probe; the executor's when absent. */
  maxRows?: number;
  /** GBNF grammars for constrained decoding (see `buildSegmentGrammars`); none when absent. */
  grammar?: SegmentGrammars;
  signal?: AbortSignal;
  /** Receives token, probe, result and error events (and final, with `emitFinal`). */
  sink?: EventSink;
  /** The `path` of emitted events; the trajectory's id when absent. */
  path?: string;
  /** Emit a `final` event when the rollout ends (for single-rollout callers; decoders emit their own). */
  emitFinal?: boolean;
}

/** What a caller gives: the executor and database, and any option it sets. */
export type RolloutInput = Pick<RolloutOptions, "executor" | "dbPath"> & {
  [K in Exclude<keyof RolloutOptions, "executor" | "dbPath">]?: RolloutOptions[K] | undefined;
};

/** The one place a rollout's options are resolved: the config schema's `agent` defaults, {@link ROLLOUT_DEFAULTS}, the `reex` profile and its first family. */
export function resolveRolloutOptions(input: RolloutInput): RolloutOptions {
  const given = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== undefined)) as RolloutInput;
  const profile = given.profile ?? reexProfile;
  return { ...AGENT_DEFAULTS, ...ROLLOUT_DEFAULTS, profile, family: profile.families[0]!, ...given } as RolloutOptions;
}

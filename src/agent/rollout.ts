/**
 * The stepwise rollout of ReEx Algorithm 1 on one trajectory: generate until the model closes a
 * probe or its final SQL (or ends its turn, or the token budget runs out); execute each probe and
 * inject its `<result>` block as unsampled text; repeat.
 *
 * The loop is resumable: all of its progress lives in a {@link RolloutState}. Tree decoding runs
 * {@link rolloutStep} until a probe has been answered, then {@link forkRollout}s the trajectory and
 * its state k times and calls {@link continueRollout} on each child independently.
 *
 * Interaction limit: probes 1..N are executed (repeats are counted but not executed). A probe
 * written after that is not executed: the server answers it with {@link LIMIT_FEEDBACK} and opens
 * `<final_sql>` itself, so the model must write its answer next (the opening tag is injected,
 * marked 0 in the record, and counts for the format check as the model's). With `repeatLimit` N,
 * the Nth repeated probe of a rollout ends probing the same way ({@link REPEAT_LIMIT_FEEDBACK}).
 *
 * Token reserve (`finalReserve`): the last N tokens of the budget are kept for the answer. A segment
 * that reaches the reserve without a final SQL is closed by the server (the open tag's closing tag,
 * then `<final_sql>`, both injected) and the model writes its answer within the reserve; a final SQL
 * the model had already opened just goes on. Off at 0 (training measures truncation as is).
 *
 * Final retries (`finalRetries`): a closed final SQL is run, and when it fails the trajectory is
 * rewound to the segment's start, the segment written back (injected, marked 0) with that SQL in
 * the probe tags, and the probe answered with its error; the model then answers again. Training
 * turns it off (its rollouts see the model's own answers).
 *
 * Options arrive resolved ({@link RolloutOptions}, from `resolveRolloutOptions`): the rollout has no
 * default of its own.
 */
import { ReexError, toReexError } from "../errors/index.js";
import { guardSink, type EventSink } from "../events/index.js";
import type { GenerateResult, Policy, TokenRecord, TokenUsage, Trajectory } from "../policy/index.js";
import { loadSchema, type DatabaseSchema, type ExecResult, type SqlValue } from "../sql/index.js";
import { LIMIT_FEEDBACK, REPEAT_LIMIT_FEEDBACK, REPEATED_PROBE_FEEDBACK, formatFeedback, wrapFeedback } from "./feedback.js";
import type { GrammarStart, SchemaNames, SegmentGrammars } from "./grammar.js";
import type { NameBinding } from "./binding.js";
import { extractFinal, indexOfTag, normalizeSql, segments, unanswerableReason, unwrapSql, type Segment } from "./parse.js";
import type { ModelProfile } from "./profiles/index.js";
import type { RolloutOptions } from "./rollout-options.js";
import { applyRewrites, rewriteEventFields, rewriteFields, rewritesOn, type AppliedRewrite, type RewriteContext, type RewriteFields } from "./rewrites.js";
import { closeTag } from "./syntax.js";
import type { BuiltPrompt } from "./prompts.js";

/** The stop strings of one segment: a probe's and the answer's closing markers (an answer closer that also opens it, like a fence, only once the server opened the answer). */
function segmentStops(profile: ModelProfile, probing: boolean, forcedFinal: boolean): string[] {
  const answer = profile.answer;
  const answerStop = forcedFinal || !answer.open.startsWith(answer.close) ? [answer.close] : [];
  return probing && profile.probe ? [profile.probe.close, ...answerStop] : answerStop;
}

/** A closed fenced answer, for profiles whose answer is a fence rather than a tag. */
const CLOSED_FENCE = /```[ \t]*(?:sql|sqlite)?[ \t]*\n[\s\S]*?```/i;

/** The names a schema hint lists (read only after a name error; cached by `loadSchema`); none for an unreadable file. */
function hintSchema(dbPath: string): DatabaseSchema | undefined {
  try {
    return loadSchema(dbPath, { examples: 0 });
  } catch {
    return undefined;
  }
}

/** One probe the model wrote and what it was answered. */
export interface ProbeRecord {
  /** 1-based interaction number (the limit-refused probe gets N + 1). */
  step: number;
  sql: string;
  /** The execution (for a repeat, the earlier one's); null for a probe refused by the limit. */
  result: ExecResult | null;
  /** The exact text injected inside `<result>`. */
  feedback: string;
  /** Same normalised SQL as an earlier probe: not executed again. */
  repeated: boolean;
  /** Written after the interaction limit: not executed, the final SQL was forced. */
  overLimit: boolean;
}

/** Why a rollout ended: a closed final SQL, the model stopped without one, budget, abort, or a backend failure. */
export type RolloutStopReason = "final" | "end" | "maxTokens" | "aborted" | "error";

/** Everything a rollout has done so far; copy it with {@link cloneRolloutState} to continue a fork. */
export interface RolloutState {
  /** The response so far (sampled and injected text after the prompt). */
  text: string;
  probes: ProbeRecord[];
  /** Probe rounds used (executed and repeated probes). */
  interactions: number;
  /** Tokens sampled so far, counted against `maxTokens`. */
  generatedTokens: number;
  /** The server has opened `<final_sql>` (interaction limit or token reserve), or the reserve let an open one go on. */
  forcedFinal: boolean;
  /** Failed final SQL taken back as probes so far (see `finalRetries`). */
  finalRetries?: number;
  /** The rewrite rules that changed the final SQL, in order, each with its changes (see `REWRITE_RULES`). */
  rewrites: AppliedRewrite[];
  /** How the grammars' name binding went (see `SegmentGrammars.binding`); absent without one. */
  binding?: BindingReport;
  done: boolean;
  stopReason: RolloutStopReason | null;
  error?: { code: string; message: string };
}

/** What one {@link rolloutStep} did: answered a probe, refused one at the limit, or ended the rollout. */
export type StepOutcome = { kind: "probe"; probe: ProbeRecord } | { kind: "limit"; probe: ProbeRecord } | { kind: "done"; stopReason: RolloutStopReason };

/** The outcome of a rollout; each rewrite rule that changed the final SQL lists its changes under its field (`repairs`, …). */
export interface RolloutResult extends RewriteFields {
  path: string;
  /** The final SQL; null when there is none, the model declared the question unanswerable, or the rollout was cut off. */
  finalSql: string | null;
  answerable: boolean;
  reason?: string;
  /** The full response after the prompt, injected blocks included. */
  text: string;
  probes: ProbeRecord[];
  /** Token ids after the prompt; `sampled` is 0 for injected text. */
  record: TokenRecord;
  promptTokens: number[];
  /** The trajectory's own usage (a fork counts its generated tokens from the fork on). */
  usage: TokenUsage;
  interactions: number;
  /** Ran out of tokens before closing a final SQL. */
  truncated: boolean;
  stopReason: RolloutStopReason;
  /** Mean log-probability of the sampled tokens: 0 when none was sampled, NaN when they were sampled without log-probabilities (`logprobs: false`). */
  meanLogprob: number;
  /** How the grammars' name binding went; absent without one. */
  binding?: BindingReport;
  error?: { code: string; message: string };
}

/**
 * How name binding went in a rollout: "decoder" when every SQL token passed the check as it was
 * drawn, "fallback" when some position was kept after every redraw was refused, "unavailable" when
 * the decode path could not apply it (the final SQL is then only checked afterwards: `unbound`).
 */
export interface BindingReport {
  mode: "decoder" | "fallback" | "unavailable";
  /** Tokens drawn again because they would not bind. */
  redrawn: number;
  /** SQL whose FROM list was drawn again, knowing the columns named after it (see `NameBinding.rebind`); absent when none was. */
  fromRedraws?: number;
  /** Why the final SQL's names do not bind, when they do not (checked after generation). */
  unbound?: string;
}

/** A fresh state for a rollout that starts right after the prompt. */
export function createRolloutState(): RolloutState {
  return { text: "", probes: [], interactions: 0, generatedTokens: 0, forcedFinal: false, rewrites: [], done: false, stopReason: null };
}

/** An independent copy of a state (probe records are immutable and shared). */
export function cloneRolloutState(state: RolloutState): RolloutState {
  return {
    ...state,
    probes: state.probes.slice(),
    rewrites: state.rewrites.slice(),
    ...(state.error ? { error: { ...state.error } } : {}),
    ...(state.binding ? { binding: { ...state.binding } } : {}),
  };
}

/** Forks a trajectory and copies its rollout state so both can continue independently. */
export async function forkRollout(trajectory: Trajectory, state: RolloutState): Promise<{ trajectory: Trajectory; state: RolloutState }> {
  return { trajectory: await trajectory.fork(), state: cloneRolloutState(state) };
}

function end(state: RolloutState, stopReason: RolloutStopReason): StepOutcome {
  state.done = true;
  state.stopReason = stopReason;
  return { kind: "done", stopReason };
}

function fail(state: RolloutState, error: unknown, sink: EventSink | undefined, path: string): StepOutcome {
  const e = toReexError(error);
  state.error = { code: e.code, message: e.message };
  sink?.({ type: "error", path, code: e.code, message: e.message });
  return end(state, "error");
}

function emptyQuery(): ExecResult {
  return { ok: false, error: { code: "SQL_SYNTAX", category: "syntax", message: "empty query" }, elapsedMs: 0 };
}

/**
 * Runs one segment: generates until a probe or the final SQL closes, then executes and answers the
 * probe (or ends the rollout). Mutates `state`; a finished state returns `done` again.
 */
export async function rolloutStep(trajectory: Trajectory, state: RolloutState, options: RolloutOptions): Promise<StepOutcome> {
  const path = options.path ?? trajectory.id;
  const sink = guardSink(options.sink);
  if (state.done) return { kind: "done", stopReason: state.stopReason ?? "end" };
  if (options.signal?.aborted) return end(state, "aborted");
  const maxTokens = options.maxTokens;
  const remaining = maxTokens - state.generatedTokens;
  if (remaining <= 0) return end(state, "maxTokens");
  const reserve = state.forcedFinal ? 0 : Math.min(Math.max(0, Math.floor(options.finalReserve)), Math.floor(maxTokens / 2));
  if (reserve > 0 && remaining <= reserve) return forceFinal(trajectory, state, options, path);
  const profile = options.profile;
  const probing = profile.probe !== undefined && options.family === "execution-aware" && !state.forcedFinal;
  const grammars = options.grammar;
  const grammar = state.forcedFinal ? grammars?.finalBody : state.text.length === 0 ? (grammars?.first ?? grammars?.segment) : grammars?.segment;
  const binding = grammar !== undefined ? grammars?.binding : undefined;
  const segmentStart: GrammarStart = state.forcedFinal ? "final-body" : state.text.length === 0 ? "first" : "segment";

  const start = { tokens: trajectory.record.tokens.length, text: state.text.length };
  const draw = (admit: NameBinding | undefined, prefix: string, g: string | undefined, maxTokens: number): Promise<GenerateResult> =>
    trajectory.generate({
      stop: segmentStops(profile, probing, state.forcedFinal),
      maxTokens,
      temperature: options.temperature,
      topP: options.topP,
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
      logprobs: options.logprobs,
      ...(options.ignoreEos ? { ignoreEos: true } : {}),
      ...(g !== undefined ? { grammar: g } : {}),
      ...(admit
        ? { admit: (text: string) => admit.admits(prefix + text, segmentStart), admitWatch: (text: string) => admit.watches(prefix + text, segmentStart) }
        : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(sink ? { onText: (text: string) => sink({ type: "token", path, text }) } : {}),
    });
  let generated: Pick<GenerateResult, "text" | "stop" | "stopReason">;
  try {
    const first = await draw(binding, "", grammar, remaining - reserve);
    state.text += first.text;
    state.generatedTokens += first.tokens.length;
    if (binding) state.binding = mergeBinding(state.binding, first.admitted ?? "unavailable", first.redrawn ?? 0);
    generated = first;
    if (binding && grammars?.fromRest && first.stopReason !== "aborted" && !options.signal?.aborted)
      generated =
        (await redrawFrom(
          trajectory,
          state,
          options,
          start,
          { binding, fromRest: grammars.fromRest, draw, budget: remaining - reserve - first.tokens.length },
          path,
        )) ?? first;
  } catch (error) {
    return fail(state, error, sink, path);
  }
  if (generated.stopReason === "aborted" || options.signal?.aborted) return end(state, "aborted");

  const blocks = segments(generated.text, profile.syntax);
  const finalClosed =
    blocks.some((b) => b.role === "final" && b.closed) || (state.forcedFinal && generated.text.toLowerCase().includes(profile.answer.close.toLowerCase()));
  if (finalClosed) return closeFinal(trajectory, state, options, start, path, probing);
  const probe = probing ? closingProbe(blocks, generated.stop !== undefined && generated.stop === profile.probe?.close) : undefined;
  if (!probe && generated.stopReason === "maxTokens" && reserve > 0) return forceFinal(trajectory, state, options, path);
  if (!probe) return end(state, generated.stopReason === "maxTokens" ? "maxTokens" : "end");
  return answerProbe(trajectory, state, options, unwrapSql(probe.content), path);
}

/**
 * Spends the token reserve on the answer: closes the open segment and opens the profile's answer
 * (`<final_sql>`; injected text), or lets an answer the model opened itself go on, then generates
 * within the reserve.
 */
async function forceFinal(trajectory: Trajectory, state: RolloutState, options: RolloutOptions, path: string): Promise<StepOutcome> {
  const profile = options.profile;
  const open = segments(state.text, profile.syntax).at(-1);
  const ownFinal = open !== undefined && !open.closed && open.role === "final";
  // a grammar cannot resume inside the model's own unfinished final SQL: end as the budget would have
  if (ownFinal && options.grammar) return end(state, "maxTokens");
  const injected = ownFinal ? "" : `${open && !open.closed && open.kind !== "text" ? closeTag(open.kind) : ""}\n${profile.answer.open}`;
  if (injected) {
    try {
      await trajectory.append(injected);
    } catch (error) {
      return fail(state, error, guardSink(options.sink), path);
    }
    state.text += injected;
  }
  state.forcedFinal = true;
  return rolloutStep(trajectory, state, options);
}

/** Where a segment starts: its first token and its offset in the rollout's text. */
type SegmentStart = { tokens: number; text: number };

/** What {@link redrawFrom} draws with: the segment's binding, the grammars after a FROM, its draw call and token budget. */
interface FromRedraw {
  binding: NameBinding;
  fromRest: NonNullable<SegmentGrammars["fromRest"]>;
  draw: (admit: NameBinding | undefined, prefix: string, grammar: string | undefined, maxTokens: number) => Promise<GenerateResult>;
  budget: number;
}

/**
 * Draws the closed SQL of the segment since `start` (a probe or the final SQL) again from just
 * past its statement's first FROM when columns named after that FROM are in no table of its list
 * (`NameBinding.rebind`): the segment is rewound, written back up to that FROM (injected text) and
 * the rest drawn with those columns held to the FROM list, so that the model, not a rewrite, picks
 * the tables (and joins) that hold them. The segment as it now stands; undefined when nothing was
 * drawn again, or when the new draw closed no SQL (the segment is then put back as it was).
 */
async function redrawFrom(
  trajectory: Trajectory,
  state: RolloutState,
  options: RolloutOptions,
  start: SegmentStart,
  redraw: FromRedraw,
  path: string,
): Promise<Pick<GenerateResult, "text" | "stop" | "stopReason"> | undefined> {
  const profile = options.profile;
  const segment = state.text.slice(start.text);
  const closed = closedSql(segment, profile, state.forcedFinal);
  if (!closed || !trajectory.rewind || redraw.budget < MIN_REDRAW_TOKENS) return undefined;
  const rebinding = redraw.binding.rebind(closed.sql);
  if (!rebinding) return undefined;
  const prefix = segment.slice(0, closed.at + rebinding.at);
  const columns = [...rebinding.columns, ...rebinding.qualified.map((q) => `${q.alias}.${q.column}`)];
  guardSink(options.sink)?.({ type: "rebind", path, sql: closed.sql, columns });
  await trajectory.rewind(start.tokens);
  state.text = state.text.slice(0, start.text);
  await trajectory.append(prefix);
  state.text += prefix;
  const again = await redraw.draw(redraw.binding.requiring(rebinding), prefix, redraw.fromRest(closed.role, rebinding.aliases), redraw.budget);
  state.text += again.text;
  state.generatedTokens += again.tokens.length;
  state.binding = mergeBinding(state.binding, again.admitted ?? "unavailable", again.redrawn ?? 0, 1);
  const text = prefix + again.text;
  if (again.stopReason === "aborted" || closedSql(text, profile, state.forcedFinal)?.role === closed.role) return { ...again, text };
  await trajectory.rewind(start.tokens);
  state.text = state.text.slice(0, start.text);
  await trajectory.append(segment);
  state.text += segment;
  return undefined;
}

/** Tokens a segment must have left for {@link redrawFrom} to draw its FROM list again. */
const MIN_REDRAW_TOKENS = 8;

/** The SQL that closes a segment, a probe's or the final one, and its offset in the segment; undefined when it closes none (or an unanswerable final). */
function closedSql(segment: string, profile: ModelProfile, forced: boolean): { sql: string; at: number; role: "final" | "probe" } | undefined {
  const final = closedFinal(segment, profile, forced);
  if (final) return { ...final, role: "final" };
  const probe = closingProbe(segments(segment, profile.syntax), false);
  if (!probe) return undefined;
  const sql = unwrapSql(probe.content);
  const from = segment.indexOf(probe.content, probe.start);
  const at = from < 0 ? -1 : segment.indexOf(sql, from);
  return sql.length > 0 && at >= 0 ? { sql, at, role: "probe" } : undefined;
}

/**
 * The final SQL a segment closed, unwrapped, and its offset in the segment; undefined when there is
 * none, it is unanswerable or empty, or it cannot be located. After a server-opened answer the
 * segment holds the body only, up to the answer's closer.
 */
function closedFinal(segment: string, profile: ModelProfile, forced: boolean): { sql: string; at: number } | undefined {
  const block = segments(segment, profile.syntax).find((b) => b.role === "final" && b.closed);
  const close = forced && !block ? indexOfTag(segment, profile.answer.close) : -1;
  const content = block ? block.content : close >= 0 ? segment.slice(0, close) : undefined;
  if (content === undefined || unanswerableReason(content) !== null) return undefined;
  const sql = unwrapSql(content);
  const from = block ? segment.indexOf(content, block.start) : 0;
  const at = from < 0 ? -1 : segment.indexOf(sql, from);
  return sql.length > 0 && at >= 0 ? { sql, at } : undefined;
}

/**
 * Ends the rollout on the final SQL the segment since `start` closed. The switched-on rewrite rules
 * rewrite it first (`REWRITE_RULES`, in order: a failing SQL's missing column rebound, then a SQL
 * that runs mended); a rewrite that runs is written back. Otherwise a SQL that fails goes back to
 * the model as a probe (`finalRetries`).
 */
async function closeFinal(
  trajectory: Trajectory,
  state: RolloutState,
  options: RolloutOptions,
  start: SegmentStart,
  path: string,
  probing: boolean,
): Promise<StepOutcome> {
  const retry = probing && (state.finalRetries ?? 0) < options.finalRetries && state.interactions < options.maxInteractions;
  if ((!retry && !rewritesOn(options)) || !trajectory.rewind) return end(state, "final");
  const segment = state.text.slice(start.text);
  const final = closedFinal(segment, options.profile, state.forcedFinal);
  if (!final) return end(state, "final");
  let result: ExecResult;
  let rewrite: FinalRewrite | undefined;
  try {
    result = await execute(options, final.sql);
    if (options.signal?.aborted) return end(state, "final");
    rewrite = await applyRewrites(final.sql, result.ok ? null : result.error.category, options, () => rewriteContext(options));
  } catch (error) {
    return fail(state, error, guardSink(options.sink), path);
  }
  const rewritten = rewrite ? await rewriteFinal(trajectory, state, options, start, path, final, rewrite) : undefined;
  if (rewritten || result.ok) return rewritten ?? end(state, "final");
  return (retry ? await retryFinal(trajectory, state, options, start, path, result) : undefined) ?? end(state, "final");
}

/** A final SQL rewritten by the server's rewrite rules, and what each rule changed. */
interface FinalRewrite {
  sql: string;
  applied: AppliedRewrite[];
}

/** What the rewrite rules read: the schema's names (undefined when they cannot be read), lookups through the executor, the question and its named values. */
function rewriteContext(options: RolloutOptions): RewriteContext | undefined {
  const schema = repairSchema(options.dbPath);
  if (!schema) return undefined;
  return {
    schema,
    read: (q) => readRows(options, q),
    ...(options.namedValues ? { named: options.namedValues } : {}),
    ...(options.question !== undefined ? { question: options.question } : {}),
  };
}

/** The schema's names for the repairs, read from `dbPath`; undefined when it cannot be read. */
function repairSchema(dbPath: string): SchemaNames | undefined {
  const schema = hintSchema(dbPath);
  return schema ? { tables: schema.tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) } : undefined;
}

/** The rows of a lookup query, or undefined when it fails. */
async function readRows(options: RolloutOptions, sql: string): Promise<SqlValue[][] | undefined> {
  const result = await execute(options, sql);
  return result.ok ? result.rows : undefined;
}

/**
 * Runs the rewritten final SQL and, when it runs, writes the segment back with it (injected text)
 * and ends the rollout; undefined when the rewrite fails to run.
 */
async function rewriteFinal(
  trajectory: Trajectory,
  state: RolloutState,
  options: RolloutOptions,
  start: SegmentStart,
  path: string,
  final: { sql: string; at: number },
  rewrite: FinalRewrite,
): Promise<StepOutcome | undefined> {
  const sink = guardSink(options.sink);
  try {
    const result = await execute(options, rewrite.sql);
    if (!result.ok || options.signal?.aborted) return undefined;
    const segment = state.text.slice(start.text);
    const rewritten = `${segment.slice(0, final.at)}${rewrite.sql}${segment.slice(final.at + final.sql.length)}`;
    await trajectory.rewind!(start.tokens);
    state.text = state.text.slice(0, start.text);
    await trajectory.append(rewritten);
    state.text += rewritten;
  } catch (error) {
    return fail(state, error, sink, path);
  }
  state.rewrites.push(...rewrite.applied);
  sink?.({ type: "repair", path, sql: final.sql, repaired: rewrite.sql, ...rewriteEventFields(rewrite.applied) });
  return end(state, "final");
}

/**
 * Takes back the final SQL the segment since `start` closed, which failed with `result`: rewinds the
 * segment, writes it back (as injected text) with the final SQL inside the profile's probe tags and
 * answers that probe with the error. Undefined when the profile has no probes.
 */
async function retryFinal(
  trajectory: Trajectory,
  state: RolloutState,
  options: RolloutOptions,
  start: SegmentStart,
  path: string,
  result: ExecResult,
): Promise<StepOutcome | undefined> {
  const profile = options.profile;
  const probeTags = profile.probe;
  const segment = state.text.slice(start.text);
  const final = segments(segment, profile.syntax).find((b) => b.role === "final" && b.closed);
  if (!probeTags || !trajectory.rewind || !final) return undefined;
  const sql = unwrapSql(final.content);
  const rewritten = `${segment.slice(0, final.start)}${probeTags.open}${final.content}${probeTags.close}`;
  try {
    await trajectory.rewind(start.tokens);
    state.text = state.text.slice(0, start.text);
    await trajectory.append(rewritten);
  } catch (error) {
    return fail(state, error, guardSink(options.sink), path);
  }
  state.text += rewritten;
  state.finalRetries = (state.finalRetries ?? 0) + 1;
  return answerProbe(trajectory, state, options, sql, path, result, true);
}

function execute(options: RolloutOptions, sql: string): Promise<ExecResult> {
  return options.executor.execute(options.dbPath, sql, {
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.maxRows !== undefined ? { maxRows: options.maxRows } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

/**
 * The probe that ended a segment: the last block when it is a closed probe (trailing whitespace
 * allowed), or, when the policy reports the probe stop string, the last closed probe even if the
 * final token ran on past the tag.
 */
function closingProbe(blocks: Segment[], stoppedAtProbe: boolean): Segment | undefined {
  const last = [...blocks].reverse().find((b) => b.kind !== "text" || b.content.trim().length > 0);
  if (last?.role === "probe" && last.closed) return last;
  if (!stoppedAtProbe) return undefined;
  return [...blocks].reverse().find((b) => b.role === "probe" && b.closed);
}

/** Executes a probe (or takes `executed`, its result already run; `retried`: a taken-back final SQL) and appends its feedback. */
async function answerProbe(
  trajectory: Trajectory,
  state: RolloutState,
  options: RolloutOptions,
  sql: string,
  path: string,
  executed?: ExecResult,
  retried?: boolean,
): Promise<StepOutcome> {
  const sink = guardSink(options.sink);
  const profile = options.profile;
  const maxInteractions = options.maxInteractions;
  if (state.interactions >= maxInteractions) {
    const probe: ProbeRecord = { step: state.interactions + 1, sql, result: null, feedback: LIMIT_FEEDBACK, repeated: false, overLimit: true };
    const injected = wrapFeedback(LIMIT_FEEDBACK, profile.feedback) + profile.answer.open;
    try {
      await trajectory.append(injected);
    } catch (error) {
      return fail(state, error, sink, path);
    }
    state.text += injected;
    state.probes.push(probe);
    state.forcedFinal = true;
    return { kind: "limit", probe };
  }

  const step = state.interactions + 1;
  const key = normalizeSql(sql);
  const earlier = state.probes.find((p) => p.result !== null && normalizeSql(p.sql) === key);
  sink?.({ type: "probe", path, step, sql, ...(retried ? { retried: true as const } : {}) });
  if (options.signal?.aborted) return end(state, "aborted");
  let result: ExecResult;
  let feedback: string;
  const repeatLimit = options.repeatLimit;
  if (earlier?.result && repeatLimit > 0 && state.probes.filter((p) => p.repeated).length + 1 >= repeatLimit) {
    sink?.({ type: "result", path, step, result: earlier.result, feedback: REPEAT_LIMIT_FEEDBACK });
    const injected = wrapFeedback(REPEAT_LIMIT_FEEDBACK, profile.feedback) + profile.answer.open;
    try {
      await trajectory.append(injected);
    } catch (error) {
      return fail(state, error, sink, path);
    }
    const probe: ProbeRecord = { step, sql, result: earlier.result, feedback: REPEAT_LIMIT_FEEDBACK, repeated: true, overLimit: false };
    state.text += injected;
    state.interactions = step;
    state.probes.push(probe);
    state.forcedFinal = true;
    return { kind: "limit", probe };
  }
  if (earlier?.result) {
    result = earlier.result;
    feedback = REPEATED_PROBE_FEEDBACK;
  } else {
    try {
      result = executed ?? (sql.length === 0 ? emptyQuery() : await execute(options, sql));
    } catch (error) {
      return fail(state, error, sink, path);
    }
    if (options.signal?.aborted) return end(state, "aborted");
    const schema = !options.schemaHints ? undefined : () => hintSchema(options.dbPath);
    feedback = formatFeedback(
      result,
      {
        mode: options.feedback,
        rows: options.feedbackRows,
        maxCellChars: options.maxCellChars,
        ...(schema ? { schema } : {}),
        style: profile.feedbackStyle,
        ...(profile.feedbackRowCap !== undefined ? { rowCap: profile.feedbackRowCap } : {}),
      },
      sql,
    );
  }
  sink?.({ type: "result", path, step, result, feedback });
  const injected = wrapFeedback(feedback, profile.feedback);
  try {
    await trajectory.append(injected);
  } catch (error) {
    return fail(state, error, sink, path);
  }
  state.text += injected;
  state.interactions = step;
  const probe: ProbeRecord = { step, sql, result, feedback, repeated: earlier !== undefined, overLimit: false };
  state.probes.push(probe);
  return { kind: "probe", probe };
}

/** Runs steps until the rollout ends, then reads its answer. Mutates `state` (clone it first to keep a copy). */
export async function continueRollout(trajectory: Trajectory, state: RolloutState, options: RolloutOptions): Promise<RolloutResult> {
  while (!state.done) await rolloutStep(trajectory, state, options);
  return finishRollout(trajectory, state, options);
}

/** Runs a whole rollout on a trajectory that has just been started from its prompt. */
export async function rollout(trajectory: Trajectory, options: RolloutOptions): Promise<RolloutResult> {
  return continueRollout(trajectory, createRolloutState(), options);
}

/**
 * Renders a built prompt through the policy, starts a trajectory, runs one rollout and releases the
 * trajectory: the one-call form for the CLI, evaluation and training.
 */
export async function runRollout(policy: Policy, prompt: BuiltPrompt, options: RolloutOptions): Promise<RolloutResult> {
  const spec = policy.renderChat(prompt.messages, { sharedPrefix: prompt.sharedPrefix });
  const trajectory = await policy.start(spec, options.signal ? { signal: options.signal } : {});
  try {
    return await rollout(trajectory, options);
  } finally {
    await trajectory.release();
  }
}

/**
 * The result of a finished (or abandoned) rollout. After a clean end any answer counts (an unclosed
 * `<final_sql>` too); after running out of tokens, an abort or an error, only a closed answer block.
 */
export function finishRollout(
  trajectory: Trajectory,
  state: RolloutState,
  options: Pick<RolloutOptions, "path" | "sink" | "emitFinal" | "profile" | "grammar">,
): RolloutResult {
  if (!state.done) throw new ReexError("INTERNAL", "finishRollout called on a rollout that has not ended");
  const profile = options.profile;
  const stopReason = state.stopReason ?? "end";
  const final = extractFinal(state.text, profile.syntax);
  const cleanEnd = stopReason === "final" || stopReason === "end";
  const fenced = !profile.answer.open.startsWith("<") && final.source === "loose" && CLOSED_FENCE.test(state.text);
  const closedAnswer = final.closed && (final.fromTag || fenced);
  const usable = cleanEnd || closedAnswer;
  const finalSql = usable ? final.sql : null;
  const answerable = usable ? final.answerable : true;
  const source = trajectory.record;
  const record: TokenRecord = { tokens: source.tokens.slice(), sampled: source.sampled.slice(), logprobs: source.logprobs.slice() };
  let sum = 0;
  let count = 0;
  record.sampled.forEach((s, i) => {
    if (s === 1) {
      sum += record.logprobs[i] ?? 0;
      count++;
    }
  });
  const path = options.path ?? trajectory.id;
  const result: RolloutResult = {
    path,
    finalSql,
    answerable,
    ...(usable && final.reason !== undefined ? { reason: final.reason } : {}),
    text: state.text,
    probes: state.probes.slice(),
    record,
    promptTokens: trajectory.promptTokens.slice(),
    usage: { ...trajectory.usage },
    interactions: state.interactions,
    truncated: stopReason === "maxTokens" && !closedAnswer,
    stopReason,
    meanLogprob: count ? sum / count : 0,
    ...rewriteFields(state.rewrites),
    ...(state.binding ? { binding: bindingOf(state.binding, finalSql, options.grammar?.binding) } : {}),
    ...(state.error ? { error: { ...state.error } } : {}),
  };
  if (options.emitFinal)
    guardSink(options.sink)?.({ type: "final", sql: finalSql, answerable, ...(result.reason !== undefined ? { reason: result.reason } : {}) });
  return result;
}

const BINDING_RANK = { decoder: 0, fallback: 1, unavailable: 2 } as const;

function mergeBinding(report: BindingReport | undefined, mode: BindingReport["mode"], redrawn: number, froms = 0): BindingReport {
  const prior = report?.mode ?? "decoder";
  const fromRedraws = (report?.fromRedraws ?? 0) + froms;
  return {
    mode: BINDING_RANK[mode] > BINDING_RANK[prior] ? mode : prior,
    redrawn: (report?.redrawn ?? 0) + redrawn,
    ...(fromRedraws > 0 ? { fromRedraws } : {}),
  };
}

/** The report with the final SQL checked after generation. */
function bindingOf(report: BindingReport, finalSql: string | null, binding: NameBinding | undefined): BindingReport {
  const unbound = finalSql && binding ? binding.check(finalSql) : undefined;
  return {
    mode: report.mode,
    redrawn: report.redrawn,
    ...(report.fromRedraws ? { fromRedraws: report.fromRedraws } : {}),
    ...(unbound !== undefined ? { unbound } : {}),
  };
}

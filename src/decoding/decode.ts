/**
 * The decoder: builds the prompt, runs the requested strategy under the request's limits
 * (sequences, token budget, deadline, cancellation), executes every candidate's final SQL, votes,
 * and answers. Every trajectory it starts is released before it returns or throws.
 */
import {
  familyFor,
  getProfile,
  type BuiltPrompt,
  isStarterModel,
  resolveProfile,
  resolveRolloutOptions,
  rewriteSwitches,
  type ModelProfile,
  type ProfileChoice,
  type SegmentGrammars,
} from "../agent/index.js";
import { AGENT_DEFAULTS, DECODING_DEFAULTS, STRATEGIES, type Config } from "../config/index.js";
import { ReexError } from "../errors/index.js";
import { guardSink, type EventSink } from "../events/index.js";
import type { Policy } from "../policy/index.js";
import type { Executor } from "../sql/index.js";
import { RequestControl } from "./control.js";
import { runLinear } from "./linear.js";
import { createGrammarBuilder, createPromptBuilder, type GrammarFor, type PromptBuilderOptions, type PromptFor } from "./prompt.js";
import { LeafCollector, leafCandidate, type Run, type StrategyOutcome } from "./run.js";
import { runTree } from "./tree.js";
import type { Answer, AnswerRequest, DecodeContext, PromptFamily, Strategy } from "./types.js";
import { VOTE_RULE, vote } from "./vote.js";
import { assessAnswer } from "./confidence.js";

/** The config schema's `decoding` and `agent` sections, resolved (`z.infer` of each). */
type DecodingSettings = Config["decoding"];
type AgentSettings = Config["agent"];

/**
 * Values used where a request leaves a field out: the config schema's `decoding` and `agent`
 * sections (each setting documented, with its default, there), plus the decoder's own four.
 */
export interface DecoderDefaults extends DecodingSettings, AgentSettings {
  /** Used when the profile supports it, else the profile's first family. */
  promptFamily: PromptFamily;
  /** Time limit of each probe, ms; the executor's when absent (`sql.timeoutMs` with a config). */
  probeTimeoutMs?: number;
  /** Time limit of each final-SQL execution for the vote, ms. */
  finalTimeoutMs: number;
  /** Rows fetched per final SQL; the executor's when absent. */
  finalMaxRows?: number;
}

/** The built-in defaults (the paper's settings): the config schema's `decoding` and `agent` defaults, plus the decoder's own. */
export const DEFAULT_DECODER_DEFAULTS: Readonly<DecoderDefaults> = {
  ...DECODING_DEFAULTS,
  ...AGENT_DEFAULTS,
  promptFamily: "execution-aware",
  finalTimeoutMs: 10_000,
};

/** Decoder defaults from the configuration's `decoding`, `agent` and `sql` sections. */
export function decoderDefaults(config: Config): DecoderDefaults {
  return { ...DEFAULT_DECODER_DEFAULTS, ...config.decoding, ...config.agent, probeTimeoutMs: config.sql.timeoutMs };
}

/** What the decoder runs on. */
export interface DecoderDeps {
  policy: Policy;
  executor: Executor;
  /** The prompt of a question; default {@link createPromptBuilder} with `promptOptions`. */
  promptFor?: PromptFor;
  /** Options of the default prompt builder (ignored with `promptFor`). Default {}. */
  promptOptions?: PromptBuilderOptions;
  /** Folder of value-index files for the default prompt builder (the server passes `<dataDir>/indexes`). Default ".reex/indexes". */
  indexDir?: string;
  /** The configuration whose `decoding`, `agent` and `sql` sections give the defaults (see {@link decoderDefaults}); default none. */
  config?: Config;
  /** Grammars for constrained requests; default `buildSegmentGrammars` over the database's schema. */
  grammarFor?: GrammarFor;
  /** Overrides of {@link DEFAULT_DECODER_DEFAULTS} (applied after `config`). Default {}. */
  defaults?: Partial<DecoderDefaults>;
  /** Live trajectories one decode may hold at most; default the policy's `maxSequences` − 1, so the prompt's cached prefix is not evicted. */
  maxLiveTrajectories?: number;
  /** Clock, ms. Default performance.now. */
  now?: () => number;
  /**
   * The model profile requests use when they name none: an id, or "auto" to detect it from the
   * policy's metadata. Default the config's `policy.profile`, else "auto".
   */
  profile?: string;
}

/** Answers one request; the signature the server, evaluation harness and CLI call. */
export type Decode = (request: AnswerRequest, ctx?: DecodeContext) => Promise<Answer>;

/**
 * The decode function, which also closes what it keeps open (the default prompt builder's value
 * indexes; not the policy or the executor), and says which profile requests get by default and why.
 */
export type Decoder = Decode & {
  close(): void;
  readonly profile: ProfileChoice;
  /** Whether requests that do not say are decoded constrained (the `constrained` default resolved against the model). */
  readonly constrained: boolean;
};

interface Resolved {
  strategy: Strategy;
  candidates: number;
  branching: number;
  temperature: number;
  topP: number;
  family: PromptFamily;
  profile: ModelProfile;
  /** The tree's greedy branch, or null for none. */
  greedy: { finalRetries: number } | null;
}

function positiveInt(value: number, name: string, max = Infinity): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new ReexError("BAD_REQUEST", `${name} must be an integer from 1 to ${max}, got ${value}`, {
      issues: [{ path: [name], message: `must be an integer from 1 to ${max}` }],
    });
  }
  return value;
}

function resolve(req: AnswerRequest, d: DecoderDefaults, choice: ProfileChoice): Resolved {
  const profile = req.profile !== undefined ? getProfile(req.profile) : choice.profile;
  const family = familyFor(profile, req.promptFamily ?? (profile.families.includes(d.promptFamily) ? d.promptFamily : undefined));
  const strategy = req.strategy ?? d.strategy;
  if (!STRATEGIES.includes(strategy)) throw new ReexError("BAD_REQUEST", `unknown strategy "${strategy}"`);
  const temperature = strategy === "greedy" ? 0 : (req.temperature ?? d.temperature);
  if (!(temperature >= 0)) throw new ReexError("BAD_REQUEST", `temperature must be ≥ 0, got ${temperature}`);
  const topP = strategy === "greedy" ? 1 : (req.topP ?? d.topP);
  if (!(topP > 0 && topP <= 1))
    throw new ReexError("BAD_REQUEST", `topP must be in (0, 1], got ${topP}`, { issues: [{ path: ["topP"], message: "must be in (0, 1]" }] });
  return {
    strategy,
    candidates: strategy === "greedy" ? 1 : positiveInt(req.candidates ?? d.candidates, "candidates", d.maxCandidates),
    branching: positiveInt(req.branching ?? d.branching, "branching"),
    temperature,
    topP,
    family,
    profile,
    greedy: d.greedyBranch ? { finalRetries: d.finalRetries } : null,
  };
}

/** Each strategy's runner: a new name in `STRATEGIES` does not compile until it has one here. */
const RUNNERS: Record<Strategy, (run: Run, o: Resolved) => Promise<StrategyOutcome>> = {
  greedy: (run, o) => runLinear(run, o.candidates),
  linear: (run, o) => runLinear(run, o.candidates),
  tree: (run, o) => runTree(run, { candidates: o.candidates, branching: o.branching, prune: false, greedy: o.greedy }),
  "tree-prune": (run, o) => runTree(run, { candidates: o.candidates, branching: o.branching, prune: true, greedy: o.greedy }),
};

/** What a decoder keeps across requests: its dependencies, defaults, prompt and grammar sources, and default profile. */
interface DecoderState {
  deps: DecoderDeps;
  defaults: DecoderDefaults;
  promptFor: PromptFor;
  grammarFor: GrammarFor;
  choice: ProfileChoice;
  constrainedByDefault: boolean;
}

/** One request being decoded: the request, its resolved options, its limits and where its events go. */
interface InFlight {
  req: AnswerRequest;
  o: Resolved;
  control: RequestControl;
  emit: EventSink;
}

/**
 * Creates the decode function over a policy and an executor: `decode(request, ctx)` runs greedy,
 * linear, tree or tree-prune decoding (docs/architecture.md "Decoder"), votes on the executed candidates and answers.
 */
export function createDecoder(deps: DecoderDeps): Decoder {
  const defaults: DecoderDefaults = { ...DEFAULT_DECODER_DEFAULTS, ...(deps.config ? decoderDefaults(deps.config) : {}), ...deps.defaults };
  const builder = deps.promptFor
    ? undefined
    : createPromptBuilder({
        ...(deps.indexDir !== undefined ? { indexDir: deps.indexDir } : {}),
        schemaTokenBudget: Math.max(256, Math.floor(deps.policy.info.contextSize / 4)),
        ...(deps.config ? { examplesTokenShare: deps.config.teach.examplesTokenShare, historyTokenShare: deps.config.teach.historyTokenShare } : {}),
        ...deps.promptOptions,
      });
  const state: DecoderState = {
    deps,
    defaults,
    promptFor: deps.promptFor ?? builder!.promptFor,
    grammarFor: deps.grammarFor ?? defaultGrammarFor(deps),
    choice: resolveProfile(deps.profile ?? deps.config?.policy.profile, deps.policy.info.metadata ?? {}),
    constrainedByDefault: defaults.constrained === "on" || (defaults.constrained === "auto" && isStarterModel(deps.policy.info.metadata ?? {})),
  };
  const decode: Decode = async (req, ctx = {}) => decodeRequest(state, req, ctx);
  return Object.assign(decode, { close: () => builder?.close(), profile: state.choice, constrained: state.constrainedByDefault });
}

/** The grammar builder used when the caller gives none, reading the same value indexes as the prompt builder. */
function defaultGrammarFor(deps: DecoderDeps): GrammarFor {
  const indexDir = deps.promptOptions?.indexDir ?? deps.indexDir;
  return createGrammarBuilder({
    ...(indexDir !== undefined ? { indexDir } : {}),
    // literals are linked to the values the prompt builder indexes; a caller's own prompts index none
    linkValues: deps.promptFor === undefined && deps.promptOptions?.matchValues !== false,
  });
}

/** Decodes one request under its limits; every trajectory it starts is released before it returns or throws. */
async function decodeRequest(s: DecoderState, req: AnswerRequest, ctx: DecodeContext): Promise<Answer> {
  const o = resolve(req, s.defaults, s.choice);
  const emit: EventSink = guardSink(ctx.sink) ?? (() => undefined);
  const control = requestControl(s.deps, req, ctx);
  const f: InFlight = { req, o, control, emit };
  try {
    const prompt = await s.promptFor(req.dbPath, req.question, req.evidence, o.family, o.profile, {
      ...(req.examples ? { examples: req.examples } : {}),
      ...(req.turns ? { turns: req.turns } : {}),
    });
    const grammar = await requestGrammar(s, req, o);
    if (control.isCancelled()) throw control.reason("cancelled");
    const spec = s.deps.policy.renderChat(prompt.messages, { sharedPrefix: prompt.sharedPrefix });
    const leaves = new LeafCollector(
      s.deps.executor,
      req.dbPath,
      { timeoutMs: s.defaults.finalTimeoutMs, ...(s.defaults.finalMaxRows !== undefined ? { maxRows: s.defaults.finalMaxRows } : {}) },
      control.execSignal,
      emit,
    );
    const run: Run = { policy: s.deps.policy, spec, control, emit, leaves, ...strategyRunOptions(s, f, prompt, grammar) };

    const outcome = await RUNNERS[o.strategy](run, o);
    if (control.isCancelled()) throw control.reason("cancelled");
    await control.releaseAll();
    const answer = answerFrom(f, leaves, outcome, prompt, s.defaults.confidenceThreshold);
    return prompt.shown ? { ...answer, shown: prompt.shown } : answer;
  } catch (err) {
    if (control.isCancelled()) throw control.reason("cancelled");
    throw err;
  } finally {
    control.dispose();
    await control.releaseAll();
  }
}

/** The request's limits: live trajectories, token budget, deadline and cancellation. */
function requestControl(deps: DecoderDeps, req: AnswerRequest, ctx: DecodeContext): RequestControl {
  return new RequestControl({
    maxLive: deps.maxLiveTrajectories ?? Math.max(1, deps.policy.info.maxSequences - 1),
    ...(req.maxTotalTokens !== undefined ? { maxTotalTokens: req.maxTotalTokens } : {}),
    ...(req.deadlineMs !== undefined ? { deadlineMs: req.deadlineMs } : {}),
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    ...(deps.now ? { now: deps.now } : {}),
  });
}

/** The grammars of a constrained request, with name binding as configured; undefined when the request is not constrained. */
async function requestGrammar(s: DecoderState, req: AnswerRequest, o: Resolved): Promise<SegmentGrammars | undefined> {
  const built: SegmentGrammars | undefined =
    (req.constrained ?? s.constrainedByDefault)
      ? await s.grammarFor(req.dbPath, o.family, o.profile, { question: req.question, ...(req.evidence ? { evidence: req.evidence } : {}) })
      : undefined;
  return built && withBinding(built, s.defaults.bindNames, s.defaults.redrawFrom);
}

/** The sampling settings and per-rollout options every trajectory of the request starts from. */
function strategyRunOptions(
  s: DecoderState,
  { req, o }: InFlight,
  prompt: BuiltPrompt,
  grammar: SegmentGrammars | undefined,
): Pick<Run, "temperature" | "topP" | "seed" | "base"> {
  const d = s.defaults;
  return {
    temperature: o.temperature,
    topP: o.topP,
    ...(req.seed !== undefined ? { seed: req.seed } : {}),
    base: resolveRolloutOptions({
      executor: s.deps.executor,
      dbPath: req.dbPath,
      profile: o.profile,
      family: o.family,
      maxInteractions: req.maxInteractions ?? d.maxInteractions,
      maxTokens: req.maxTokens ?? d.maxTokens,
      feedback: req.feedback ?? d.feedback,
      feedbackRows: d.feedbackRows,
      schemaHints: req.schemaHints ?? d.schemaHints,
      finalReserve: d.finalReserve,
      repeatLimit: d.repeatLimit,
      // tree-prune drops a branch whose SQL fails and samples another in its place
      finalRetries: o.strategy === "tree-prune" ? 0 : d.finalRetries,
      ...rewriteSwitches(d),
      ...(prompt.matches ? { namedValues: prompt.matches } : {}),
      question: req.question,
      // the vote breaks ties by mean log-probability; one candidate has no ties, so it skips their cost
      logprobs: o.candidates > 1,
      ...(d.probeTimeoutMs !== undefined ? { timeoutMs: d.probeTimeoutMs } : {}),
      ...(grammar ? { grammar } : {}),
    }),
  };
}

/** Votes on the finished candidates, reports the vote and the final SQL, and builds the request's answer. */
function answerFrom({ req, o, control, emit }: InFlight, leaves: LeafCollector, outcome: StrategyOutcome, prompt: BuiltPrompt, threshold: number): Answer {
  const ballots = leaves.leaves.map((l) => ({
    sql: l.rollout.finalSql,
    meanLogprob: l.rollout.meanLogprob,
    answerable: l.rollout.answerable,
    ...(l.exec ? { result: l.exec } : {}),
  }));
  const outcomeOfVote = vote(ballots);
  const candidates = leaves.leaves.map((l, index) => leafCandidate(l, index, outcomeOfVote));
  emit({
    type: "vote",
    winner: outcomeOfVote.winner,
    groups: outcomeOfVote.groups.map((g) => ({ group: g.group, votes: g.votes, members: g.members.slice(), ...(g.empty ? { empty: true } : {}) })),
    rule: VOTE_RULE,
    decidedBy: outcomeOfVote.decidedBy,
  });

  const winner = outcomeOfVote.winner === null ? undefined : candidates[outcomeOfVote.winner]!;
  const winnerLeaf = outcomeOfVote.winner === null ? undefined : leaves.leaves[outcomeOfVote.winner]!;
  const answerable = winner ? winner.answerable : true;
  const reason = winner && !winner.answerable ? winnerLeaf!.rollout.reason : undefined;
  const confidence = assessAnswer(
    { question: req.question, candidates, outcome: outcomeOfVote, probes: winnerLeaf?.rollout.probes ?? [], context: groundingText(prompt) },
    { threshold },
  );
  emit({ type: "final", sql: winner?.sql ?? null, answerable, ...(reason !== undefined ? { reason } : {}), confidence: confidence.value });

  const shortfall =
    candidates.length < o.candidates ? (outcome.shortfall ?? genericShortfall(control, candidates.length, o.candidates, req)) : outcome.shortfall;
  const firstTokenMs = control.firstTokenMs();
  return {
    sql: winner?.sql ?? null,
    answerable,
    ...(reason !== undefined ? { reason } : {}),
    ...(winner?.result ? { result: winner.result } : {}),
    candidates,
    winner: outcomeOfVote.winner,
    decidedBy: outcomeOfVote.decidedBy,
    confidence,
    ...(shortfall !== undefined ? { shortfall } : {}),
    usage: control.usage(),
    timings: { totalMs: control.elapsed(), ...(firstTokenMs !== undefined ? { firstTokenMs } : {}) },
  };
}

/** The words a question can be grounded in: the prompt's schema section and the values it matched. */
function groundingText(prompt: BuiltPrompt): string {
  return [prompt.sharedPrefix, ...(prompt.matches ?? []).map((m) => m.value)].join("\n");
}

function genericShortfall(control: RequestControl, got: number, wanted: number, req: AnswerRequest): string {
  const head = `${got} of ${wanted} candidates finished`;
  if (control.cause === "deadline") return `${head}: the deadline of ${req.deadlineMs} ms passed`;
  if (control.cause === "budget") return `${head}: the request's budget of ${req.maxTotalTokens} generated tokens was spent`;
  return `${head}: the other trajectories failed before a final answer`;
}

/**
 * The grammars a constrained request gets from a decoder at its defaults (`createGrammarBuilder` over the database's
 * schema and the question's literals, names bound to their FROM lists as `bindNames` and `redrawFrom` say), for code
 * that drives rollouts itself, such as the trainer's. Defaults: index folder ".reex/indexes", bindNames "from", redrawFrom true.
 */
export function createServedGrammarFor(options: { indexDir?: string; bindNames?: Config["decoding"]["bindNames"]; redrawFrom?: boolean } = {}): GrammarFor {
  const build = createGrammarBuilder(options.indexDir !== undefined ? { indexDir: options.indexDir } : {});
  const mode = options.bindNames ?? DEFAULT_DECODER_DEFAULTS.bindNames;
  const redraw = options.redrawFrom ?? DEFAULT_DECODER_DEFAULTS.redrawFrom;
  return async (...args) => withBinding(await build(...args), mode, redraw);
}

function withBinding({ binding, fromRest, ...grammars }: SegmentGrammars, mode: Config["decoding"]["bindNames"], redraw: boolean): SegmentGrammars {
  if (!binding || mode === "off") return grammars;
  return { ...grammars, binding: binding.withMode(mode), ...(redraw && fromRest ? { fromRest } : {}) };
}

/**
 * How sure an answer is: signals the decoder already has (the vote, the result's shape, the
 * repairs, probe errors, the final SQL's conditions, how much of the question the schema covers),
 * combined by a logistic model fitted on training-split questions (scripts/fit-confidence.ts).
 */
import { REWRITE_RULES, rewritesIn, suspectCondition, type RewriteSignal } from "../agent/index.js";
import { DECODING_DEFAULTS } from "../config/index.js";
import type { ExecResult } from "../sql/index.js";
import type { Candidate } from "./types.js";
import { saysNothingMatched, type VoteOutcome } from "./vote.js";
import { FITTED_MODEL } from "./confidence-model.js";
import { FITTED_VOTE_MODEL } from "./confidence-model-vote.js";
import { SIGNALS, type Confidence, type ConfidenceModel, type SignalName, type Signals } from "./signals.js";

export { SIGNALS, type Confidence, type ConfidenceModel, type SignalName, type Signals } from "./signals.js";

/** The shipped model for one decoded path (src/decoding/confidence-model.ts), fitted on greedy answers to training-split questions only. */
export const CONFIDENCE_MODEL: ConfidenceModel = FITTED_MODEL;

/** The shipped model for answers a vote chose among several candidates (confidence-model-vote.ts), fitted on tree-prune-4 answers to training-split questions only. */
export const VOTE_CONFIDENCE_MODEL: ConfidenceModel = FITTED_VOTE_MODEL;

/** The shipped model that fits an answer's signals: {@link CONFIDENCE_MODEL} for one path, {@link VOTE_CONFIDENCE_MODEL} after a vote. */
export function confidenceModelFor(signals: Signals): ConfidenceModel {
  return signals.single === 1 ? CONFIDENCE_MODEL : VOTE_CONFIDENCE_MODEL;
}

/** What {@link assessAnswer} reads of a finished decode. */
export interface AssessInput {
  question: string;
  candidates: readonly Candidate[];
  outcome: VoteOutcome;
  /** Probe results of the winning trajectory, in order. */
  probes: readonly { result: ExecResult | null }[];
  /** Schema text and values the prompt showed: the words a question can be grounded in. */
  context: string;
}

const DOUBTS: Partial<Record<SignalName, string>> = {
  emptyResult: "the result is empty or only zeros and NULLs",
  allNull: "the result holds only NULLs",
  ...(Object.fromEntries(REWRITE_RULES.map((r) => [r.signal, r.doubt])) as Record<RewriteSignal, string>),
  probeErrors: "probes failed on the way",
  fromRedraw: "its FROM list had to be drawn again",
  suspectCondition: "a condition compares a thing with itself, a constant, or two values at once",
  ungrounded: "words of the question match nothing in the schema",
  single: "one path was decoded, so no vote backs it",
};

const NEUTRAL: Partial<Record<SignalName, number>> = { voteShare: 1, single: 0 };

/** Each rewrite rule's signal for the winner: 1 when the rule changed its final SQL. */
function rewriteSignals(winner: Candidate | undefined): Record<RewriteSignal, number> {
  const applied = new Set(winner ? rewritesIn(winner, "field") : []);
  return Object.fromEntries(REWRITE_RULES.map((r) => [r.signal, applied.has(r.id) ? 1 : 0])) as Record<RewriteSignal, number>;
}

/** The signals of the winning candidate (every signal 0 but the vote's when there is none). */
export function answerSignals(input: AssessInput): Signals {
  const n = input.candidates.length;
  const winner = input.outcome.winner === null ? undefined : input.candidates[input.outcome.winner];
  const votes = input.outcome.groups.map((g) => g.votes).sort((a, b) => b - a);
  const top = winner && winner.group !== null ? (input.outcome.groups[winner.group]?.votes ?? 0) : 0;
  const second = votes.find((v, i) => i > 0 || v !== top) ?? 0;
  const rows = winner?.result?.ok ? winner.result.rows : undefined;
  const failedProbes = input.probes.filter((p) => p.result !== null && !p.result.ok).length;
  const binding = winner?.binding;
  return {
    voteShare: n === 0 ? 0 : top / n,
    voteMargin: n === 0 ? 0 : Math.max(0, top - (votes[0] === top ? (votes[1] ?? 0) : second)) / n,
    single: n <= 1 ? 1 : 0,
    emptyResult: rows && saysNothingMatched(rows) ? 1 : 0,
    allNull: rows && rows.length > 0 && rows.every((r) => r.every((v) => v === null)) ? 1 : 0,
    rows: rows ? Math.min(1, Math.log10(1 + rows.length) / 3) : 0,
    ...rewriteSignals(winner),
    probeErrors: Math.min(3, failedProbes) / 3,
    probes: Math.min(5, input.probes.length) / 5,
    fromRedraw: binding && ((binding.fromRedraws ?? 0) > 0 || binding.mode === "fallback" || binding.unbound !== undefined) ? 1 : 0,
    suspectCondition: winner?.sql && suspectCondition(winner.sql) !== null ? 1 : 0,
    ungrounded: ungroundedShare(input.question, input.context),
  };
}

/**
 * The confidence of a finished decode: 0 (with the reason) when the winner declared the question
 * unanswerable, failed or wrote no SQL, else the model's probability over {@link answerSignals}.
 */
export function assessAnswer(input: AssessInput, options: { model?: ConfidenceModel; threshold?: number } = {}): Confidence {
  const threshold = options.threshold ?? DECODING_DEFAULTS.confidenceThreshold;
  const winner = input.outcome.winner === null ? undefined : input.candidates[input.outcome.winner];
  if (!winner || winner.sql === null)
    return { value: 0, threshold, doubts: [winner && !winner.answerable ? "the model declared the question unanswerable" : "no SQL was written"] };
  if (!winner.result?.ok) return { value: 0, threshold, doubts: ["the final SQL failed"] };
  const signals = answerSignals(input);
  const model = options.model ?? confidenceModelFor(signals);
  return { value: probability(model, signals), threshold, doubts: doubtsOf(model, signals), signals };
}

/** `σ(bias + Σ weight·signal)`. */
export function probability(model: ConfidenceModel, signals: Signals): number {
  let z = model.bias;
  for (const name of SIGNALS) z += (model.weights[name] ?? 0) * signals[name];
  return 1 / (1 + Math.exp(-z));
}

function doubtsOf(model: ConfidenceModel, signals: Signals): string[] {
  return SIGNALS.map((name) => ({ name, cost: (model.weights[name] ?? 0) * (signals[name] - (NEUTRAL[name] ?? 0)) }))
    .filter((d) => d.cost < -0.25 && DOUBTS[d.name] !== undefined)
    .sort((a, b) => a.cost - b.cost)
    .map((d) => DOUBTS[d.name]!);
}

const STOP = new Set(
  (
    "the a an of in on at to for by with from and or is are was were be been do does did what which who whom whose how many much " +
    "list show give find tell me all each every their its his her there that this these those than then as any some have has had " +
    "not no number count total name names more most less least per between among also only both other same different into over under " +
    "when where why out about it they them one two three four five six seven eight nine ten first last top highest lowest largest smallest " +
    "greatest average avg mean sum maximum minimum max min order sorted ascending descending return get please can could would should will " +
    "common popular often frequently recent latest oldest youngest earliest newest biggest fewest"
  ).split(" "),
);

/** Share of the question's content words that match no word of the schema text or the values the prompt showed; 0 when it has none. */
export function ungroundedShare(question: string, context: string): number {
  const vocab = new Set<string>();
  for (const w of context
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/))
    if (w.length > 0) vocab.add(stem(w));
  const stems = [...vocab];
  const words = question
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 2 && !STOP.has(w) && !/^\d+$/.test(w));
  if (words.length === 0) return 0;
  const grounded = (w: string): boolean => {
    const s = stem(w);
    if (vocab.has(s)) return true;
    const head = s.slice(0, 5);
    return head.length >= 4 && stems.some((v) => v.startsWith(head) || (v.length >= 4 && s.startsWith(v)));
  };
  return words.filter((w) => !grounded(w)).length / words.length;
}

function stem(word: string): string {
  return word.replace(/(?:ies)$/, "y").replace(/(?:ing|ed|es|s)$/, "") || word;
}

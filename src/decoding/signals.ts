/**
 * The shapes the confidence of an answer is told in: the signals, the fitted model over them and
 * the confidence an answer carries. Types and the signals' names only, so the answer's types, the
 * shipped models and the assessment all import them without importing each other.
 */
import { REWRITE_RULES, type RewriteSignal } from "../agent/index.js";

/** Each rewrite rule's signal (`repairedTables`, …: 1 when the rule changed the winner's final SQL), in the rules' order. */
const REWRITE_SIGNALS: readonly RewriteSignal[] = REWRITE_RULES.map((r) => r.signal);

/** The signals the confidence model reads, each in [0, 1]. */
export const SIGNALS = [
  "voteShare",
  "voteMargin",
  "single",
  "emptyResult",
  "allNull",
  "rows",
  ...REWRITE_SIGNALS,
  "probeErrors",
  "probes",
  "fromRedraw",
  "suspectCondition",
  "ungrounded",
] as const;

/** One signal's name. */
export type SignalName = (typeof SIGNALS)[number];

/** The signals of one answer, by name. */
export type Signals = Record<SignalName, number>;

/** A fitted logistic model over {@link SIGNALS}: `p = σ(bias + Σ weight·signal)`. */
export interface ConfidenceModel {
  bias: number;
  weights: Partial<Record<SignalName, number>>;
  /** What it was fitted on, in words. */
  fittedOn: string;
}

/** How sure an answer is, and why not more. */
export interface Confidence {
  /** Estimated chance that the answer is right, in [0, 1]; 0 when there is no SQL that ran. */
  value: number;
  /** The threshold under which the answer is marked not answerable. */
  threshold: number;
  /** What lowered it, in words, most first; empty when nothing did. */
  doubts: string[];
  /** The signals it was computed from; absent when there was no SQL to judge. */
  signals?: Signals;
}

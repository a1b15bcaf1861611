/** A fitted confidence model; written by scripts/fit-confidence.ts, do not edit by hand. */
import type { ConfidenceModel } from "./signals.js";

/** Fitted on: 553 answers that ran (291 right) of 600 training-split questions (scripts/confidence-fit-set.py): 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); greedy, the shipped starter, defaults; L2 1. */
export const FITTED_MODEL: ConfidenceModel = {
  bias: 1.832,
  weights: {
    emptyResult: -3.73,
    allNull: -0.365,
    rows: -0.15,
    repairedTables: 0.424,
    repairedLiterals: -0.691,
    repairedCoverage: -0.385,
    probeErrors: -0.631,
    probes: -0.666,
    fromRedraw: -1.254,
    suspectCondition: -0.56,
    ungrounded: -2.077,
  },
  fittedOn:
    "553 answers that ran (291 right) of 600 training-split questions (scripts/confidence-fit-set.py): 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); greedy, the shipped starter, defaults; L2 1",
};

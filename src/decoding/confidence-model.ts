/** The fitted confidence model; written by scripts/fit-confidence.ts, do not edit by hand. */
import type { ConfidenceModel } from "./confidence.js";

/** Fitted on: 548 answers that ran (291 right) of 600 training-split questions: 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); greedy, the shipped starter, defaults; L2 1. */
export const FITTED_MODEL: ConfidenceModel = {
  bias: 1.99,
  weights: {
    emptyResult: -3.676,
    allNull: -0.397,
    rows: -0.448,
    repairedTables: 0.423,
    repairedLiterals: -0.659,
    repairedCoverage: -0.417,
    probeErrors: -0.708,
    probes: -0.923,
    fromRedraw: -1.212,
    suspectCondition: -0.917,
    ungrounded: -2.253,
  },
  fittedOn:
    "548 answers that ran (291 right) of 600 training-split questions: 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); greedy, the shipped starter, defaults; L2 1",
};

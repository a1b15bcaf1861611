/** A fitted confidence model; written by scripts/fit-confidence.ts, do not edit by hand. */
import type { ConfidenceModel } from "./signals.js";

/** Fitted on: 599 answers that ran (306 right) of 600 training-split questions (scripts/confidence-fit-set.py): 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); tree-prune, 4 candidates, the shipped starter, defaults; L2 1. */
export const FITTED_VOTE_MODEL: ConfidenceModel = {
  bias: -0.23,
  weights: {
    voteShare: 1.106,
    voteMargin: 1.26,
    emptyResult: -3.75,
    allNull: -0.526,
    rows: -0.216,
    repairedTables: -0.212,
    repairedLiterals: -0.173,
    repairedCoverage: 0.168,
    probeErrors: -0.016,
    probes: -0.377,
    fromRedraw: -1.352,
    suspectCondition: -0.728,
    ungrounded: -2.194,
  },
  fittedOn:
    "599 answers that ran (306 right) of 600 training-split questions (scripts/confidence-fit-set.py): 300 Spider train, 150 WikiSQL train, 150 Spider train questions asked of another Spider train database (unanswerable); tree-prune, 4 candidates, the shipped starter, defaults; L2 1",
};

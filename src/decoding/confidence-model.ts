/** The fitted confidence model; written by scripts/fit-confidence.ts, do not edit by hand. */
import type { ConfidenceModel } from "./confidence.js";

/** Fitted on: nothing yet (placeholder). */
export const FITTED_MODEL: ConfidenceModel = {
  bias: 0,
  weights: {},
  fittedOn: "nothing yet: placeholder",
};

/**
 * Builds the tiny GGUF test models once per run, at the fixed paths test/helpers/model.ts exports
 * (tests import those constants). Example databases are built by the tests that need them, through
 * src/examples' `buildExamples`.
 */
import { buildTestModels } from "./helpers/model.js";

export default async function setup(): Promise<void> {
  await buildTestModels();
}

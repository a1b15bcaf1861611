/**
 * Builds the fixtures every test file may use, once per run: the example databases and the tiny
 * GGUF test model. Paths are handed to tests through `inject` (see test/helpers.ts).
 */
import { buildTestModels } from "./helpers/model.js";

export default async function setup(): Promise<void> {
  // fixture builders register here as they land
  await buildTestModels(); // tiny GGUF models at fixed paths: see test/helpers/model.ts
}

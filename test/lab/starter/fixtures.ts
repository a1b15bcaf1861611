/**
 * Shared fixtures of the starter tests: a micro synthetic data set (2 databases, 3 questions each)
 * and a micro starter model (vocabulary ~800, 1 block, width 32) trained on its text.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { writeFileAtomic } from "../../../src/policy/tooling.js";
import { buildStarterModel, corpusTexts, type StarterVocabulary, trainTokenizer } from "../../../lab/starter/testing.js";
import { generateSynth } from "../../../lab/synth/index.js";

export const STARTER_OUT = fileURLToPath(new URL("../../.output/starter/", import.meta.url));

export interface MicroFixture {
  dir: string;
  sftPath: string;
  modelPath: string;
  vocab: StarterVocabulary;
}

let fixture: Promise<MicroFixture> | undefined;

/** Builds (once per test file) a micro data set and model under test/.output/starter/<name>. */
export function microFixture(name: string): Promise<MicroFixture> {
  fixture ??= (async () => {
    const dir = join(STARTER_OUT, name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const synthDir = join(dir, "synth");
    generateSynth(synthDir, { seed: 3, dbs: 2, questionsPerDb: [3, 3] });
    const sftPath = join(synthDir, "train_sft.jsonl");
    const vocab = trainTokenizer(corpusTexts(sftPath), { vocabSize: 800 });
    const modelPath = join(dir, "micro.gguf");
    await writeFileAtomic(
      modelPath,
      buildStarterModel(vocab, { layers: 1, embedding: 32, heads: 2, kvHeads: 2, feedForward: 64, contextLength: 1024 }, { seed: 5 }),
    );
    return { dir, sftPath, modelPath, vocab };
  })();
  return fixture;
}

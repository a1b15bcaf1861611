/** A run's checkpoints, `<runDir>/checkpoints/step-N.{gguf|lora.gguf,json,optim,master}`: listed, the latest found, one saved. */
import { existsSync, readdirSync } from "node:fs";
import { copyFile, link, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stepLabel } from "./experience.js";

/** A saved checkpoint of a run. */
export interface Checkpoint {
  step: number;
  /** The weights: a whole GGUF, or with `lora` the adapter (`step-N.lora.gguf`) for the run's base. */
  model: string;
  /** Whether `model` is a LoRA adapter. */
  lora: boolean;
  /** The learner's optimizer state at that step, when there was one. */
  optimizer?: string;
  /** The float32 master weights at that step, when the run keeps them. */
  master?: string;
}

/** The checkpoints in `<runDir>/checkpoints` whose GGUF (or adapter) is present, lowest step first. */
export function listCheckpoints(runDir: string): Checkpoint[] {
  const dir = join(runDir, "checkpoints");
  if (!existsSync(dir)) return [];
  const found: Checkpoint[] = [];
  for (const name of readdirSync(dir)) {
    const m = /^step-(\d+)\.json$/.exec(name);
    if (!m) continue;
    const step = Number(m[1]);
    const full = join(dir, `step-${stepLabel(step)}.gguf`);
    const adapter = join(dir, `step-${stepLabel(step)}.lora.gguf`);
    const model = existsSync(full) ? full : existsSync(adapter) ? adapter : null;
    if (!model) continue;
    const optimizer = join(dir, `step-${stepLabel(step)}.optim`);
    const master = join(dir, `step-${stepLabel(step)}.master`);
    found.push({ step, model, lora: model === adapter, ...(existsSync(optimizer) ? { optimizer } : {}), ...(existsSync(master) ? { master } : {}) });
  }
  return found.sort((a, b) => a.step - b.step);
}

/** The checkpoint with the highest step in `<runDir>/checkpoints` (its GGUF or adapter present), or null. */
export function latestCheckpoint(runDir: string): Checkpoint | null {
  return listCheckpoints(runDir).at(-1) ?? null;
}

/** Hard-links `from` to `to` (replacing it), or copies where a link cannot be made. */
async function linkOrCopy(from: string, to: string): Promise<void> {
  await rm(to, { force: true });
  try {
    await link(from, to);
  } catch {
    await copyFile(from, to);
  }
}

/**
 * Saves step `step`'s model (a `*.lora.gguf` adapter is kept as `step-N.lora.gguf`), optimizer state and
 * float32 master weights (when the learner wrote them) as a checkpoint of `runDir`.
 */
export async function saveCheckpoint(runDir: string, step: number, model: string, optimizerState: string, masterFile: string): Promise<void> {
  const base = join(runDir, "checkpoints", `step-${stepLabel(step)}`);
  const lora = model.endsWith(".lora.gguf");
  const saved = `${base}${lora ? ".lora.gguf" : ".gguf"}`;
  await rm(lora ? `${base}.gguf` : `${base}.lora.gguf`, { force: true });
  await linkOrCopy(model, saved);
  if (existsSync(masterFile)) await copyFile(masterFile, `${base}.master`);
  else await rm(`${base}.master`, { force: true });
  const hasOptimizer = existsSync(optimizerState);
  if (hasOptimizer) await copyFile(optimizerState, `${base}.optim`);
  else await rm(`${base}.optim`, { force: true });
  await writeFile(
    `${base}.json`,
    `${JSON.stringify({ step, model: saved, lora, optimizer: hasOptimizer ? `${base}.optim` : null, time: new Date().toISOString() }, null, 2)}\n`,
  );
}

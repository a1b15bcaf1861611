import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeStarterModel, REPORT_FILE, type StarterOptions, type StarterReport } from "../../src/starter/index.js";
import { STARTER_OUT } from "./fixtures.js";

const hasTorch = ((): boolean => {
  try {
    execFileSync("/usr/bin/python3", ["-c", "import torch"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

describe.skipIf(!hasTorch)("starter pipeline (makeStarterModel)", () => {
  const work = join(STARTER_OUT, "pipeline");
  const base: StarterOptions = {
    seed: 4,
    workDir: work,
    out: join(work, "shipped.gguf"),
    devEvery: 0,
    evalItems: 4,
    vocabSize: 600,
    shape: { layers: 1, embedding: 32, heads: 2, kvHeads: 2, feedForward: 64, contextLength: 1024 },
    sft: { steps: 2, minutes: 0, lr: 3e-3, warmup: 0, evalFrac: 0, evalEvery: 0, saveEvery: 0, threads: 1 },
    grpo: null,
    checkItems: 0,
  };

  it("continues a reused SFT model on a larger data set and keeps every stage and command in report.json", async () => {
    rmSync(work, { recursive: true, force: true });
    const first = await makeStarterModel({ ...base, dbs: 2, command: "first" });
    expect(first.sftDbs).toBe(2);
    expect(first.sftMore).toEqual([]);
    const afterFirst = sha(join(work, "sft.gguf"));

    const second = await makeStarterModel({ ...base, dbs: 3, reuseSft: true, sftMore: { minutes: 0, steps: 1, lr: 1e-3 }, command: "second" });
    expect(second.sft).toEqual(first.sft); // the first stage's record is carried, not rerun
    expect(second.sftDbs).toBe(2);
    expect(second.sftMore).toHaveLength(1);
    expect(second.sftMore[0]).toMatchObject({ dbs: 3, lr: 1e-3, steps: 1 });
    // the stage was given the records of all three databases (those over the context length are dropped)
    const given = second.sftMore[0]!.data;
    expect(given.records + given.droppedTooLong).toBe(second.synth.traces);
    expect(second.synth.traces).toBeGreaterThan(first.synth.traces);
    expect(sha(join(work, "sft.gguf"))).not.toBe(afterFirst);

    const third = await makeStarterModel({ ...base, dbs: 3, reuseSft: true, sftMore: { minutes: 0, steps: 1 }, command: "third" });
    expect(third.sftMore.map((m) => m.lr)).toEqual([1e-3, 8e-4]);
    const saved = JSON.parse(readFileSync(join(work, REPORT_FILE), "utf8")) as StarterReport;
    expect(saved.commands).toEqual(["first", "second", "third"]);
    expect(saved.sftMore).toHaveLength(2);
  }, 300_000);
});

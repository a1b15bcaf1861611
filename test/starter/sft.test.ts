import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy } from "../../src/policy/index.js";
import { pretokenize, runSft, sftArgs, type SftEvent } from "../../src/starter/index.js";
import { learnerDir } from "../../src/training/testing.js";
import { microFixture, type MicroFixture } from "./fixtures.js";

const PYTHON = "/usr/bin/python3";
const hasTorch = ((): boolean => {
  try {
    execFileSync(PYTHON, ["-c", "import torch"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

const hasCuda = hasTorch && ((): boolean => {
  try {
    return execFileSync(PYTHON, ["-c", "import torch; print(torch.cuda.is_available())"], { encoding: "utf8" }).trim() === "True";
  } catch {
    return false;
  }
})();

describe.skipIf(!hasTorch)("SFT trainer (reex_learner.sft_train)", () => {
  let fx: MicroFixture;
  let tokens: string;
  let records = 0;
  beforeAll(async () => {
    fx = await microFixture("sft");
    tokens = join(fx.dir, "tokens.jsonl");
    // the first two questions of the first database, three families each: 3 packed rows of 2 suffixes
    const stats = await pretokenize(fx.modelPath, fx.sftPath, tokens, { maxTokens: 8192, limit: 6 });
    records = stats.records;
    expect(records).toBe(6);
  });

  it("packs prefix-shared rows that compute exactly the unpacked model", () => {
    const code = [
      "import torch",
      "from reex_learner.model import load_model",
      "from reex_learner.sft_train import read_records, make_packs, packing_max_diff",
      `m, g = load_model(${JSON.stringify(fx.modelPath)})`,
      `recs = read_records(${JSON.stringify(tokens)})`,
      "packs = make_packs(recs, 100000, True)",
      "print(len(recs), len(packs), max(len(p.suffixes) for p in packs), packing_max_diff(m, recs))",
    ].join("\n");
    const out = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" }).trim().split(" ");
    const [n, packs, most, diff] = out.map(Number);
    expect(n).toBe(records);
    expect(packs).toBe(3); // one database × 3 families, one row each
    expect(most).toBe(2); // both questions share one prefix
    expect(diff).toBeLessThan(1e-4);
  });

  it("reads gzipped records exactly as the plain file", () => {
    const gz = `${tokens}.gz`;
    execFileSync("bash", ["-c", `gzip -c ${JSON.stringify(tokens)} > ${JSON.stringify(gz)}`]);
    const code = [
      "from reex_learner.sft_train import read_records",
      `a, b = read_records(${JSON.stringify(tokens)}), read_records(${JSON.stringify(gz)})`,
      "print(len(a), len(b), a == b)",
    ].join("\n");
    const [plain, zipped, same] = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" }).trim().split(" ");
    expect(Number(plain)).toBe(records);
    expect(Number(zipped)).toBe(records);
    expect(same).toBe("True");
  });

  it("repeats a database's records by its db weight, on top of the family weight", () => {
    const code = [
      "from reex_learner.sft_train import read_records, weighted",
      `recs = read_records(${JSON.stringify(tokens)})`,
      "db = recs[0].db",
      "print(db, len(weighted(recs, {}, [(db[:3], 3.0)])), len(weighted(recs, {}, [('zzz', 3.0)])), len(weighted(recs, {'direct': 0.0}, [('zzz', 5.0), (db, 2.0)])))",
    ].join("\n");
    const [db, tripled, untouched, mixed] = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" }).trim().split(" ");
    expect(db!.length).toBeGreaterThan(3);
    expect(Number(tripled)).toBe(3 * records);
    expect(Number(untouched)).toBe(records);
    expect(Number(mixed)).toBe(2 * (records - 2)); // the two direct records dropped, the rest twice
  });

  it("lowers the loss in 3 steps and writes a GGUF that llama.cpp loads", async () => {
    const out = join(fx.dir, "sft.gguf");
    const events: SftEvent[] = [];
    const summary = await runSft({
      model: fx.modelPath,
      data: tokens,
      out,
      steps: 3,
      lr: 3e-3,
      warmup: 0,
      schedule: "constant",
      batchTokens: 100_000, // one batch holds everything: every step sees the same data
      evalFrac: 0,
      logEvery: 1,
      threads: 1,
      onEvent: (e) => events.push(e),
    });
    const losses = events.filter((e) => e.event === "step").map((e) => Number(e.loss));
    expect(losses).toHaveLength(3);
    expect(losses[2]!).toBeLessThan(losses[0]!);
    expect(summary.steps).toBe(3);
    expect(existsSync(out)).toBe(true);
    const policy = await createLlamaPolicy({ model: out, gpu: "cpu", contextSize: 1024, sequences: 1, threads: 1 });
    try {
      expect(policy.tokenize("SELECT").length).toBeGreaterThan(0);
    } finally {
      await policy.close();
    }
  });

  it.skipIf(hasCuda)("refuses a CUDA device when PyTorch sees none, writing nothing", async () => {
    const out = join(fx.dir, "never.gguf");
    await expect(runSft({ model: fx.modelPath, data: tokens, out, steps: 1, threads: 1, device: "cuda" })).rejects.toThrow(/--device cuda: PyTorch sees no CUDA device/);
    expect(existsSync(out)).toBe(false);
  });

  it("builds the trainer's command line", () => {
    const a = sftArgs({ model: "m.gguf", data: "d.jsonl", out: "o.gguf", minutes: 5, sharePrefix: false, familyWeights: { direct: 0.2 }, dbWeights: { retail_like: 3 }, device: "auto" });
    expect(a.join(" ")).toContain("--db-weight retail_like=3");
    expect(a.join(" ")).toContain("--device auto");
    expect(a.slice(0, 2)).toEqual(["-m", "reex_learner.sft_train"]);
    expect(a).toContain("--no-share-prefix");
    expect(a.join(" ")).toContain("--family-weight direct=0.2");
    expect(a.join(" ")).toContain("--minutes 5");
    expect(readFileSync(join(learnerDir(), "reex_learner", "sft_train.py"), "utf8")).toContain("def packed_forward");
  });
});

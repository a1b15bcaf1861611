import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy } from "../../../src/policy/index.js";
import { pretokenize, runSft, type SftEvent, sftRequest } from "../../../lab/starter/testing.js";
import { learnerDir } from "../../../src/training/testing.js";
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

const hasCuda =
  hasTorch &&
  ((): boolean => {
    try {
      return execFileSync(PYTHON, ["-c", "import torch; print(torch.cuda.is_available())"], { encoding: "utf8" }).trim() === "True";
    } catch {
      return false;
    }
  })();

/** Three steps at a constant lr over one batch that holds every record: each step sees the same data. */
const THREE_STEPS = { steps: 3, lr: 3e-3, warmup: 0, schedule: "constant", batchTokens: 100_000, evalFrac: 0, logEvery: 1, threads: 1 } as const;

describe.skipIf(!hasTorch)("SFT runs (reex_learner step with a run request)", () => {
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
      "from reex_learner.grpo import make_packs",
      "from reex_learner.sft_run import read_records, packing_max_diff",
      `m, g = load_model(${JSON.stringify(fx.modelPath)})`,
      `recs = read_records(${JSON.stringify(tokens)})`,
      "packs = make_packs(recs, 100000, True)",
      "print(len(recs), len(packs), max(len(p.suffixes) for p in packs), packing_max_diff(m, recs))",
    ].join("\n");
    const out = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" })
      .trim()
      .split(" ");
    const [n, packs, most, diff] = out.map(Number);
    expect(n).toBe(records);
    expect(packs).toBe(3); // one database × 3 families, one row each
    expect(most).toBe(2); // both questions share one prefix
    expect(diff).toBeLessThan(1e-4);
  });

  it("reads gzipped and xz-compressed records exactly as the plain file", () => {
    const gz = `${tokens}.gz`;
    const xz = `${tokens}.xz`;
    execFileSync("bash", ["-c", `gzip -c ${JSON.stringify(tokens)} > ${JSON.stringify(gz)}`]);
    execFileSync(PYTHON, ["-c", `import lzma, shutil; shutil.copyfileobj(open(${JSON.stringify(tokens)}, "rb"), lzma.open(${JSON.stringify(xz)}, "wb"))`]);
    const code = [
      "from reex_learner.sft_run import read_records",
      `a, b, c = read_records(${JSON.stringify(tokens)}), read_records(${JSON.stringify(gz)}), read_records(${JSON.stringify(xz)})`,
      "print(len(a), len(b), len(c), a == b and a == c)",
    ].join("\n");
    const [plain, zipped, xzed, same] = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" })
      .trim()
      .split(" ");
    expect(Number(plain)).toBe(records);
    expect(Number(zipped)).toBe(records);
    expect(Number(xzed)).toBe(records);
    expect(same).toBe("True");
  });

  it("lowers the loss under bf16 autocast, keeping f32 weights, and takes the reference attention off CUDA", async () => {
    const events: SftEvent[] = [];
    await runSft({
      model: fx.modelPath,
      data: tokens,
      out: join(fx.dir, "amp.gguf"),
      ...THREE_STEPS,
      amp: "bf16",
      attention: "auto",
      onEvent: (e) => events.push(e),
    });
    const start = events.find((e) => e.event === "start")!;
    expect(start.dtype).toBe("bf16");
    expect((start.attention as { impl: string }).impl).toBe(hasCuda ? "sdpa" : "eager");
    const losses = events.filter((e) => e.event === "step").map((e) => Number(e.loss));
    expect(losses[2]!).toBeLessThan(losses[0]!);
  });

  it("trains from a zeroed copy of the model with run.reinit: fresh weights of the starter's scale, and the loss falls", async () => {
    const zeroed = join(fx.dir, "zeroed.gguf");
    const zero = [
      "from reex_learner.model import load_model, state_for_gguf",
      "from reex_learner.gguf_io import write_gguf",
      `m, g = load_model(${JSON.stringify(fx.modelPath)})`,
      "[p.data.zero_() for p in m.parameters()]",
      `write_gguf(${JSON.stringify(zeroed)}, g, state_for_gguf(m), out_type="f16")`,
    ].join("\n");
    execFileSync(PYTHON, ["-c", zero], { env: { ...process.env, PYTHONPATH: learnerDir() } });
    const out = join(fx.dir, "reinit.gguf");
    const events: SftEvent[] = [];
    await runSft({
      model: zeroed,
      data: tokens,
      out,
      ...THREE_STEPS,
      reinit: 0.02,
      outType: "f32",
      onEvent: (e) => events.push(e),
    });
    const losses = events.filter((e) => e.event === "step").map((e) => Number(e.loss));
    expect(losses[2]!).toBeLessThan(losses[0]!);
    const stats = [
      "from reex_learner.model import load_model",
      `m, g = load_model(${JSON.stringify(out)})`,
      "w = m.layers[0].attn_q.weight",
      "print(float(w.std()), float(m.output_norm.weight.mean()))",
    ].join("\n");
    const [std, norm] = execFileSync(PYTHON, ["-c", stats], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" })
      .trim()
      .split(" ")
      .map(Number);
    expect(std).toBeGreaterThan(0.015);
    expect(std).toBeLessThan(0.03);
    expect(norm).toBeGreaterThan(0.9);
  });

  it("repeats a database's records by its db weight, on top of the family weight", () => {
    const code = [
      "from reex_learner.sft_run import read_records, weighted",
      `recs = read_records(${JSON.stringify(tokens)})`,
      "db = recs[0].db",
      "print(db, len(weighted(recs, {}, {db[:3]: 3.0})), len(weighted(recs, {}, {'zzz': 3.0})), len(weighted(recs, {'direct': 0.0}, {'zzz': 5.0, db: 2.0})))",
    ].join("\n");
    const [db, tripled, untouched, mixed] = execFileSync(PYTHON, ["-c", code], { env: { ...process.env, PYTHONPATH: learnerDir() }, encoding: "utf8" })
      .trim()
      .split(" ");
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
      ...THREE_STEPS,
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
    await expect(runSft({ model: fx.modelPath, data: tokens, out, steps: 1, threads: 1, device: "cuda" })).rejects.toThrow(
      /runtime\.device cuda: PyTorch sees no CUDA device/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it("writes the run's request: every field typed by the request schema, the starter's defaults filled in", () => {
    const r = sftRequest({
      model: "m.gguf",
      data: "d.jsonl",
      out: "o.gguf",
      minutes: 5,
      sharePrefix: false,
      familyWeights: { direct: 0.2 },
      dbWeights: { retail_like: 3 },
      device: "auto",
    });
    expect(r.run).toMatchObject({ minutes: 5, steps: 0, familyWeights: { direct: 0.2 }, dbWeights: { retail_like: 3 } });
    expect(r.train).toMatchObject({ sharePrefix: false, lr: 1e-3, warmupSteps: 30, schedule: "cosine", adamBeta2: 0.95, decayNorms: false });
    expect(r.runtime.device).toBe("auto");
    expect(r.lora).toBeNull();
    expect(() => sftRequest({ model: "m.gguf", data: "d.jsonl", loraRank: 4 })).toThrow(/loraOut/);
  });
});

import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createLlamaPolicy } from "../../../src/policy/index.js";
import { makeLoraAdapter } from "../../../lab/starter/index.js";
import { hasTorch } from "../../helpers/python.js";
import { microFixture, type MicroFixture } from "./fixtures.js";

const torch = hasTorch();

const SETTINGS = { sources: ["library_"], records: 3, maxTokens: 8192, rank: 4, minutes: 0, lr: 5e-2, batchTokens: 100_000, threads: 1 } as const;

describe.skipIf(!torch)("a LoRA adapter from the starter pipeline's traces (makeLoraAdapter)", () => {
  let fx: MicroFixture;
  beforeAll(async () => {
    fx = await microFixture("adapter");
  });

  it("trains an adapter on the frozen base that the llama runtime loads beside it, and resumes from it", async () => {
    const work = join(fx.dir, "work");
    const out = join(fx.dir, "reex-lora.gguf");
    const first = await makeLoraAdapter({ model: fx.modelPath, traces: fx.sftPath, out, work, steps: 2, ...SETTINGS });
    expect(first.selection.kept).toBe(3);
    expect(first.tokens.records).toBe(3);
    expect(first.sft.steps).toBe(2);
    expect(first.resumedFrom).toBeNull();
    expect(JSON.parse(readFileSync(join(work, "report.json"), "utf8")).adapter.sha256).toBe(first.adapter.sha256);

    const policy = await createLlamaPolicy({ model: fx.modelPath, lora: [out], gpu: "cpu", contextSize: 1024, sequences: 1, threads: 1 });
    try {
      expect(policy.info.lora).toEqual([out]);
      const t = await policy.start({ prefix: "", suffix: "SELECT" });
      const r = await t.generate({ maxTokens: 4, stop: [], temperature: 0 });
      expect(r.tokens.length).toBeGreaterThan(0);
      await t.release();
    } finally {
      await policy.close();
    }

    const second = await makeLoraAdapter({ model: fx.modelPath, traces: fx.sftPath, out, work, steps: 1, resume: true, ...SETTINGS });
    expect(second.resumedFrom).not.toBeNull();
    expect(existsSync(second.resumedFrom!)).toBe(true);
    expect(second.adapter.sha256).not.toBe(first.adapter.sha256);
  }, 300_000);
});

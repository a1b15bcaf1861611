import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadTrainConfig, parseTrainConfig } from "../../src/training/index.js";
import { parseTraces } from "../../src/training/testing.js";

const examples = fileURLToPath(new URL("../../examples/training/", import.meta.url));

describe("training config", () => {
  it("fills the paper's defaults and resolves relative paths against the config's folder", () => {
    const c = parseTrainConfig({ model: "m.gguf", runDir: "run", data: { dataset: "q.json", dbRoot: "dbs" } }, "grpo", "/base");
    expect(c.model).toBe("/base/m.gguf");
    expect(c.runDir).toBe("/base/run");
    expect(c.data).toMatchObject({ dataset: "/base/q.json", dbRoot: "/base/dbs", offset: 0, layout: "auto" });
    expect(c).toMatchObject({
      steps: 50,
      groupSize: 8,
      temperature: 1,
      maxInteractions: 10,
      learningRate: 2e-6,
      clip: 0.2,
      klBeta: 0.001,
      advantage: "group",
      checkpointEvery: 10,
    });
    expect(c.reward).toMatchObject({ preset: "maxtune", exploration: true, exRule: "bird" });
  });

  it("trains every weight unless learner.lora is set, whose defaults are filled and whose adapter path resolves against the config's folder", () => {
    const base = { model: "m.gguf", runDir: "run", data: { dataset: "q.json", dbRoot: "dbs" } };
    expect(parseTrainConfig(base, "grpo", "/base").learner.lora).toBeUndefined();
    expect(parseTrainConfig({ ...base, learner: { lora: {} } }, "grpo", "/base").learner.lora).toEqual({
      rank: 16,
      targets: "attn_q,attn_k,attn_v,attn_output",
      outType: "f32",
    });
    expect(parseTrainConfig({ ...base, learner: { lora: { rank: 4, in: "a.lora.gguf" } } }, "grpo", "/base").learner.lora).toMatchObject({
      rank: 4,
      in: "/base/a.lora.gguf",
    });
    expect(() => parseTrainConfig({ ...base, learner: { lora: { rank: 0 } } }, "grpo")).toThrow(
      expect.objectContaining({ issues: [expect.objectContaining({ path: ["learner", "lora", "rank"] })] }),
    );
    expect(() => parseTrainConfig({ ...base, learner: { lora: { ranks: 4 } } }, "grpo")).toThrow(expect.objectContaining({ code: "CONFIG_INVALID" }));
  });

  it("rejects unknown keys, bad presets and a missing section for the mode, with issue paths", () => {
    const base = { model: "m.gguf", runDir: "run", data: { dataset: "q.json", dbRoot: "dbs" } };
    expect(() => parseTrainConfig({ ...base, stpes: 3 }, "grpo")).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID", issues: [expect.objectContaining({ path: [] })] }),
    );
    expect(() => parseTrainConfig({ ...base, reward: { preset: "best" } }, "grpo")).toThrow(
      expect.objectContaining({ issues: [expect.objectContaining({ path: ["reward", "preset"] })] }),
    );
    expect(() => parseTrainConfig({ ...base, reward: { weights: { speed: 1 } } }, "grpo")).toThrow(expect.objectContaining({ code: "CONFIG_INVALID" }));
    expect(() => parseTrainConfig({ ...base, temperature: 0 }, "grpo")).toThrow(
      expect.objectContaining({ issues: [expect.objectContaining({ path: ["temperature"] })] }),
    );
    expect(() => parseTrainConfig(base, "sft")).toThrow(/sft\.traces/);
    expect(() => parseTrainConfig({ model: "m", runDir: "r" }, "grpo")).toThrow(/needs `data`/);
  });

  it("parses every documented example config under examples/training", () => {
    const files = readdirSync(examples).filter((f) => f.endsWith(".json") && f !== "sft-traces.json");
    expect(files.length).toBeGreaterThanOrEqual(3);
    for (const f of files) {
      const mode = f.startsWith("sft") ? "sft" : "grpo";
      const c = loadTrainConfig(join(examples, f), mode);
      expect(c.model.endsWith(".gguf")).toBe(true);
      if (c.sft) expect(parseTraces(readFileSync(c.sft.traces, "utf8")).length).toBeGreaterThan(0);
    }
  });
});

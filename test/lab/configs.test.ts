/**
 * The experiments' training configs moved to lab/ with their records; they stay valid `reex train`
 * configs (examples/training's, the ones a user starts from, are checked in test/training/config.test.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadTrainConfig } from "../../src/training/index.js";

const LAB = fileURLToPath(new URL("../../lab/", import.meta.url));

/** Every JSON file under lab/ (run logs aside) that has a model and a run folder: a training config. */
function trainingConfigs(): string[] {
  return ["grpo-heldout", "starter"].flatMap((dir) =>
    readdirSync(join(LAB, dir))
      .filter((f) => f.endsWith(".json"))
      .map((f) => join(LAB, dir, f))
      .filter((f) => {
        const json = JSON.parse(readFileSync(f, "utf8")) as Record<string, unknown>;
        return typeof json.model === "string" && typeof json.runDir === "string";
      }),
  );
}

describe("lab/'s training configs", () => {
  it("parses every one, each with a description", () => {
    const files = trainingConfigs();
    expect(files.length).toBeGreaterThanOrEqual(17);
    for (const f of files) {
      const c = loadTrainConfig(f, "grpo");
      expect(c.model.endsWith(".gguf"), f).toBe(true);
      expect(c.description, f).toBeTruthy();
    }
  });

  it("leaves examples/training the configs a user starts from: six at most, each with a description", () => {
    const examples = fileURLToPath(new URL("../../examples/training/", import.meta.url));
    const configs = readdirSync(examples).filter((f) => f.endsWith(".json") && f !== "sft-traces.json");
    expect(configs.length).toBeLessThanOrEqual(6);
    for (const f of configs) expect((JSON.parse(readFileSync(join(examples, f), "utf8")) as { description?: string }).description, f).toBeTruthy();
  });
});

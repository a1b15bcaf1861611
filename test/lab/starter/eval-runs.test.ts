import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readRunSpecs } from "../../../src/cli/eval.js";

const RUNS = join(import.meta.dirname, "../../../lab/starter/eval-runs.json");

describe("the model card's eval runs (lab/starter/eval-runs.json)", () => {
  it("is a valid --runs file with the issue's rows: three SFT families, GRPO greedy and voting, the ablations", () => {
    const runs = readRunSpecs(RUNS);
    const row = (family: string, strategy: string, model: RegExp) =>
      runs.some((r) => r.promptFamily === family && r.strategy === strategy && model.test(r.model ?? ""));
    expect(row("direct", "greedy", /sft\.gguf$/)).toBe(true);
    expect(row("standard", "greedy", /sft\.gguf$/)).toBe(true);
    expect(row("execution-aware", "greedy", /sft\.gguf$/)).toBe(true);
    expect(row("execution-aware", "greedy", /models\/reex-starter\.gguf$/)).toBe(true);
    expect(runs.some((r) => r.strategy === "tree-prune" && r.candidates === 16 && /reex-starter\.gguf$/.test(r.model ?? ""))).toBe(true);
    expect(row("execution-aware", "greedy", /grpo-no-exploration\.gguf$/)).toBe(true);
    expect(runs.some((r) => r.schemaHints === false && r.strategy === "greedy" && /models\/reex-starter\.gguf$/.test(r.model ?? ""))).toBe(true);
  });
});

import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { pickStep } from "../../../lab/starter/index.js";
import { EVAL_FILES, starterGrpoConfig } from "../../../lab/starter/testing.js";

describe("starter GRPO settings", () => {
  it("point the shipped trainer settings at the work folder, the SFT model and the train split", () => {
    const c = starterGrpoConfig({ workDir: "/w", model: "/w/sft.gguf" });
    expect(c.model).toBe("/w/sft.gguf");
    expect(c.runDir).toBe(join("/w", "grpo"));
    expect(c.data!.dataset).toBe(join("/w", "synth", "train.json"));
    expect(c.data!.dbRoot).toBe(join("/w", "synth", "databases"));
    expect(c.reward.preset).toBe("maxtune");
    expect(c.reward.exploration).toBe(true);
    expect(c.learner.sharePrefix).toBe(true);
    expect(c.policy.contextSize).toBe(1024); // the starter model's trained context
  });

  it("evaluate greedy EX on the work folder's validation file, before training and every few steps", () => {
    const c = starterGrpoConfig({ workDir: "/w", model: "/w/sft.gguf" });
    expect(c.eval!.dataset).toBe(join("/w", EVAL_FILES.val));
    expect(c.eval!.dbRoot).toBe(join("/w", "synth", "databases"));
    expect(c.eval!.atStart).toBe(true);
    expect(c.eval!.strategy).toBe("greedy");
    expect(c.eval!.every).toBeLessThanOrEqual(c.steps);
    // the ablation beside it starts from the same model, so it need not score it again
    expect(starterGrpoConfig({ workDir: "/w", model: "/w/sft.gguf", exploration: false, evalAtStart: false }).eval!.atStart).toBe(false);
  });

  it("run the ablation in its own folder with the exploration reward off, and pass thread and step limits on", () => {
    const c = starterGrpoConfig({ workDir: "/w", model: "/w/sft.gguf", exploration: false, threads: 1, steps: 3 });
    expect(c.runDir).toBe(join("/w", "grpo-no-exploration"));
    expect(c.reward.exploration).toBe(false);
    expect(c.steps).toBe(3);
    expect(c.policy.threads).toBe(1);
    expect(c.learner.threads).toBe(1);
    expect(c.description).toMatch(/exploration reward off/);
  });
});

describe("which GRPO checkpoint the starter ships", () => {
  const curve = [
    { step: 0, ex: 0.4 },
    { step: 10, ex: 0.3 },
    { step: 20, ex: 0.35 },
    { step: 30, ex: 0.35 },
    { step: 40, ex: 0.32 },
  ];

  it("takes the checkpointed step with the highest held-out EX, the later one on a tie, never the untrained step 0", () => {
    expect(pickStep(curve, [10, 20, 30, 40], "best-heldout")).toEqual({ step: 30, ex: 0.35 });
  });

  it("ignores evaluated steps that have no checkpoint to ship", () => {
    expect(pickStep(curve, [10, 40], "best-heldout")).toEqual({ step: 40, ex: 0.32 });
  });

  it("keeps the start model (step 0) under best-or-start when no GRPO step beats it, else the best step", () => {
    expect(pickStep(curve, [10, 20, 30, 40], "best-or-start")).toEqual({ step: 0, ex: 0.4 });
    const better = [...curve, { step: 50, ex: 0.45 }];
    expect(pickStep(better, [10, 20, 30, 40, 50], "best-or-start")).toEqual({ step: 50, ex: 0.45 });
    expect(
      pickStep(
        [
          { step: 0, ex: 0.3 },
          { step: 10, ex: 0.3 },
        ],
        [10],
        "best-or-start",
      ),
    ).toEqual({ step: 0, ex: 0.3 });
  });

  it("falls back to the last step when nothing was evaluated, or when asked for the last step", () => {
    expect(pickStep([], [10, 20], "best-heldout")).toBeNull();
    expect(pickStep(curve, [10, 20, 30, 40], "last")).toBeNull();
  });
});

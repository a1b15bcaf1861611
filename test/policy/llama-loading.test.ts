import { copyFile, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { createLlamaPolicy, type Policy, type PromptSpec } from "../../src/policy/index.js";
import { ensureTestModel, TEST_LORA, TEST_MODEL, TEST_MODEL_ALT, testPolicyOptions } from "../helpers/model.js";

let dir: string;

async function greedy(policy: Policy, prompt: PromptSpec, n = 12): Promise<number[]> {
  const t = await policy.start(prompt);
  try {
    return (await t.generate({ stop: [], maxTokens: n })).tokens;
  } finally {
    await t.release();
  }
}

const prompt = (policy: Policy): PromptSpec =>
  policy.renderChat([
    { role: "system", content: "You are an experienced database expert." },
    { role: "user", content: "List the orders." },
  ]);

beforeAll(async () => {
  await ensureTestModel();
  dir = await mkdtemp(join(tmpdir(), "reex-models-"));
});

describe("llama policy: flash attention on CPU", () => {
  it("is off by default and as asked when set, and the policy says which", async () => {
    const starter = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
    const cases: [string, boolean | undefined, boolean][] = [
      [starter, undefined, false],
      [TEST_MODEL, undefined, false],
      [starter, true, true],
    ];
    for (const [model, flashAttention, expected] of cases) {
      const policy = await createLlamaPolicy({
        model,
        gpu: "cpu",
        contextSize: 512,
        sequences: 1,
        threads: 1,
        ...(flashAttention !== undefined ? { flashAttention } : {}),
      });
      try {
        expect(policy.info.flashAttention).toBe(expected);
      } finally {
        await policy.close();
      }
    }
  });

  it("still describes itself after close (a bench prints it last), end of turn included", async () => {
    const starter = fileURLToPath(new URL("../../models/reex-starter.gguf", import.meta.url));
    const policy = await createLlamaPolicy({ model: starter, gpu: "cpu", contextSize: 512, sequences: 1, threads: 1 });
    const open = policy.info;
    await policy.close();
    expect(policy.info).toEqual(open);
    expect(open.endOfTurn).toBeTruthy();
  });
});

describe("llama policy: loading", () => {
  it("fails with MODEL_NOT_FOUND for a missing file, a missing LoRA and an uncached URI when downloads are off", async () => {
    await expect(createLlamaPolicy(testPolicyOptions({ model: join(dir, "nope.gguf") }))).rejects.toSatisfy((e) => isReexError(e, "MODEL_NOT_FOUND"));
    await expect(createLlamaPolicy(testPolicyOptions({ lora: [join(dir, "nope-lora.gguf")] }))).rejects.toSatisfy((e) => isReexError(e, "MODEL_NOT_FOUND"));
    await expect(createLlamaPolicy(testPolicyOptions({ model: "hf:owner/repo/missing.gguf", modelsDir: dir, download: false }))).rejects.toSatisfy((e) =>
      isReexError(e, "MODEL_NOT_FOUND"),
    );
  });

  it("fails with MODEL_LOAD_FAILED for a file llama.cpp cannot load", async () => {
    const bad = join(dir, "corrupt.gguf");
    await writeFile(bad, Buffer.from("GGUF this is not a model"));
    await expect(createLlamaPolicy(testPolicyOptions({ model: bad }))).rejects.toSatisfy((e) => isReexError(e, "MODEL_LOAD_FAILED"));
    const truncated = join(dir, "truncated.gguf");
    await writeFile(truncated, (await readFile(TEST_MODEL)).subarray(0, 200_000));
    await expect(createLlamaPolicy(testPolicyOptions({ model: truncated }))).rejects.toSatisfy((e) => isReexError(e, "MODEL_LOAD_FAILED"));
  });

  it("resolves a model URI already present in the models folder without downloading, and a bare name from it", async () => {
    await copyFile(TEST_MODEL, join(dir, "hf_owner_repo_tiny.gguf"));
    const byUri = await createLlamaPolicy(testPolicyOptions({ model: "hf:owner/repo/tiny.gguf", modelsDir: dir, download: false, sequences: 2 }));
    const byName = await createLlamaPolicy(testPolicyOptions({ model: "hf_owner_repo_tiny.gguf", modelsDir: dir, sequences: 2 }));
    try {
      expect(byUri.info).toMatchObject({ backend: "llama", model: "hf:owner/repo/tiny.gguf", device: "cpu", maxSequences: 2 });
      expect(await greedy(byUri, prompt(byUri))).toEqual(await greedy(byName, prompt(byName)));
    } finally {
      await byUri.close();
      await byName.close();
    }
  });
});

describe("llama policy: LoRA and reload", () => {
  let policy: Policy;
  let base: number[];

  beforeAll(async () => {
    policy = await createLlamaPolicy(testPolicyOptions({ sequences: 4 }));
    base = await greedy(policy, prompt(policy));
  });

  afterAll(async () => {
    await policy?.close();
  });

  it("applies a LoRA adapter on load, changing the greedy output", async () => {
    const adapted = await createLlamaPolicy(testPolicyOptions({ sequences: 2, lora: [TEST_LORA] }));
    try {
      expect(adapted.info.lora).toEqual([TEST_LORA]);
      expect(adapted.info.metadata?.adapters).toEqual([basename(TEST_LORA)]);
      expect(await greedy(adapted, prompt(adapted))).not.toEqual(base);
    } finally {
      await adapted.close();
    }
  });

  it("swaps adapters and weights on reload, and back again", async () => {
    await policy.reload!({ lora: [TEST_LORA] });
    expect(policy.info.lora).toEqual([TEST_LORA]);
    const withLora = await greedy(policy, prompt(policy));
    expect(withLora).not.toEqual(base);

    await policy.reload!({ lora: [] });
    expect(policy.info.metadata?.adapters).toBeUndefined();
    expect(await greedy(policy, prompt(policy))).toEqual(base);

    await policy.reload!({ model: TEST_MODEL_ALT });
    expect(policy.info.model).toBe(TEST_MODEL_ALT);
    expect(await greedy(policy, prompt(policy))).not.toEqual(base);

    await policy.reload!({ model: TEST_MODEL });
    expect(await greedy(policy, prompt(policy))).toEqual(base);
  });

  it("makes live trajectories unusable after a reload and lets starts wait for it", async () => {
    const t = await policy.start(prompt(policy));
    const reloading = policy.reload!({ lora: [] });
    const started = policy.start(prompt(policy));
    await reloading;
    await expect(t.generate({ stop: [], maxTokens: 2 })).rejects.toSatisfy((e) => isReexError(e, "POLICY_ERROR"));
    await t.release();
    const fresh = await started;
    expect((await fresh.generate({ stop: [], maxTokens: 12 })).tokens).toEqual(base);
    await fresh.release();
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("keeps the old model when a reload names a missing file", async () => {
    await expect(policy.reload!({ model: join(dir, "missing.gguf") })).rejects.toSatisfy((e) => isReexError(e, "MODEL_NOT_FOUND"));
    expect(await greedy(policy, prompt(policy))).toEqual(base);
  });
});

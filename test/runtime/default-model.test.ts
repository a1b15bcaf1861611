import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
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

describe("the model npm start loads when none is configured", () => {
  it("is the starter policy when models/ holds it", async () => {
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir } }));
    expect(m).toEqual({ path: join(dir, STARTER_MODEL), origin: "starter" });
    expect(existsSync(join(dir, PLACEHOLDER_MODEL))).toBe(false);
  });

  it("is a random-weight placeholder, written and announced, when there is no starter policy", async () => {
    const dir = modelsDir();
    const said: string[] = [];
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir } }), (line) => said.push(line));
    expect(m).toEqual({ path: join(dir, PLACEHOLDER_MODEL), origin: "placeholder" });
    expect(existsSync(m.path)).toBe(true);
    expect(said.join("\n")).toMatch(/random-weight placeholder/);
  });

  it("is the configured model whenever one is given", async () => {
    const dir = modelsDir();
    copyFileSync(await ensureTestModel(), join(dir, STARTER_MODEL));
    const m = await resolveModel(parseConfig({ policy: { modelsDir: dir, model: "/elsewhere/x.gguf" } }));
    expect(m).toEqual({ path: "/elsewhere/x.gguf", origin: "configured" });
  });
});

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    pool: "forks",
    // the starter is the test model: a runtime built from defaults serves it even where the default
    // model (policy.defaultModel, Qwen2.5-Coder-0.5B) is pulled; tests of Qwen name its file
    env: { REEX_POLICY_DEFAULT_MODEL: "starter" },
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});

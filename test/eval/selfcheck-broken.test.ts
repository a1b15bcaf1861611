import { describe, expect, it, vi } from "vitest";
import { loadDataset, selfCheck } from "../../src/eval/index.js";
import { makeFixture } from "./fixtures.js";

vi.mock("../../src/sql/index.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/sql/index.js")>();
  return { ...real, exBird: () => true };
});

describe("the self-check against a broken comparison", () => {
  it("fails when a rule calls everything equal, so no figures are produced", async () => {
    const { ExecutorPool } = await import("../../src/sql/index.js");
    const fx = makeFixture();
    const { items } = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot });
    const pool = new ExecutorPool({ workers: 1 });
    try {
      const check = await selfCheck(items, { executor: pool });
      expect(check.ok).toBe(false);
      expect(check.failures.some((f) => f.index === null && f.rule === "bird")).toBe(true);
      expect(check.failures.some((f) => f.index === 0 && f.rule === "bird" && f.reason.includes("foreign row"))).toBe(true);
      expect(check.failures.every((f) => f.rule === "bird")).toBe(true);
    } finally {
      await pool.close();
    }
  });
});

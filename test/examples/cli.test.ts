import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { run, summary } from "../../src/cli/examples.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("reex examples", () => {
  it("builds into --out and lists each database", async () => {
    const dir = await mkdtemp(join(tmpdir(), "reex-examples-cli-"));
    dirs.push(dir);
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await run(["--out", dir])).toBe(0);
      const printed = log.mock.calls.map((c) => String(c[0])).join("\n");
      for (const db of ["retail", "clinic", "music"]) {
        expect(existsSync(join(dir, "databases", db, `${db}.sqlite`))).toBe(true);
        expect(printed).toContain(db);
      }
      expect(existsSync(join(dir, "questions.json"))).toBe(true);
    } finally {
      log.mockRestore();
    }
    expect(summary.length).toBeGreaterThan(0);
  });

  it("rejects unknown options with exit code 2", async () => {
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await run(["--nope"])).toBe(2);
    } finally {
      err.mockRestore();
    }
  });
});

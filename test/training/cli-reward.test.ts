import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run, summary } from "../../src/cli/reward.js";
import { GOLD, makeTrainingFixture, response, type TrainingFixture } from "./fixtures.js";

let fx: TrainingFixture;
let out: string[];
let err: string[];

beforeAll(() => {
  fx = makeTrainingFixture();
});
afterAll(() => rmSync(fx.dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

function capture(): void {
  out = [];
  err = [];
  vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => void out.push(a.join(" ")));
  vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void err.push(a.join(" ")));
}

describe("reex reward", () => {
  it("prints every component, weight and the total of the default MaxTune preset", async () => {
    capture();
    const text = response(["SELECT DISTINCT country FROM singer"], GOLD);
    expect(await run(["--db", fx.dbPath, "--gold", GOLD, "--response", text]), err.join("\n")).toBe(0);
    const printed = out.join("\n");
    expect(printed).toContain("preset maxtune: total 12");
    for (const name of ["format", "em", "exec", "entity", "exploration"]) expect(printed).toMatch(new RegExp(`^${name}\\s`, "m"));
    expect(printed).toMatch(/^exec\s+2\s+3\s+6$/m);
    expect(summary).toMatch(/reward/);
  });

  it("reads the response from @FILE and prints JSON for another preset", async () => {
    const file = join(fx.dir, "response.txt");
    writeFileSync(file, response(["SELECT name FROM singer"], "SELECT name, age FROM singer WHERE country = 'France'"));
    capture();
    expect(await run(["--db", fx.dbPath, "--gold", GOLD, "--response", `@${file}`, "--preset", "think2sql", "--json"])).toBe(0);
    const json = JSON.parse(out.join("\n"));
    expect(json.preset).toBe("think2sql");
    expect(json.details.cell_precision).toBe(0.5);
    expect(json.components.qatch).toBeCloseTo(2.5 / 3, 9);
    expect(json.total).toBeCloseTo(0.95 * (2.5 / 3) + 0.05, 9);
    expect(json.correct).toBe(false);
    expect(json.interactions).toBe(1);
  });

  it("scores every preset with --preset all", async () => {
    capture();
    expect(await run(["--db", fx.dbPath, "--gold", GOLD, "--response", response([], GOLD), "--preset", "all", "--json", "--tokens", "100"])).toBe(0);
    const json = JSON.parse(out.join("\n"));
    const totals = Object.fromEntries(json.rewards.map((r: { preset: string; total: number }) => [r.preset, r.total]));
    expect(totals).toMatchObject({ maxtune: 12, uniform: 6, arctic: 1, paverl: 10, cognisql: 3.5 });
    expect(totals["sql-r1"]).toBeCloseTo(6 + 0.5 * (100 / 512), 9);
  });

  it("exits 2 on bad usage and 1 when the gold SQL does not run", async () => {
    capture();
    expect(await run(["--db", fx.dbPath, "--gold", GOLD])).toBe(2);
    expect(await run(["--db", fx.dbPath, "--gold", GOLD, "--response", "x", "--preset", "best"])).toBe(2);
    expect(err.join("\n")).toContain("unknown reward preset");
    expect(await run(["--db", fx.dbPath, "--gold", "SELECT nope FROM singer", "--response", response([], GOLD)])).toBe(1);
    expect(err.join("\n")).toContain("gold SQL does not run");
  });
});

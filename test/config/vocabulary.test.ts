/** docs/architecture.md's "Fixed lists and defaults" tables against the one source of each. */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { PROFILES } from "../../src/agent/index.js";
import { AGENT_DEFAULTS, DECIDED_BY, DECODING_DEFAULTS, FEEDBACK_MODES, PROFILE_IDS, PROMPT_FAMILIES, STRATEGIES, loadConfig } from "../../src/config/index.js";
import { SPECULATIVE_MODES } from "../../src/config/testing.js";
import { DEFAULT_DECODER_DEFAULTS } from "../../src/decoding/index.js";

const DOC = readFileSync(resolve(import.meta.dirname, "../../docs/architecture.md"), "utf8");

/** Rows of every table in the "Fixed lists and defaults" section, as [first cell, second cell]. */
function sectionRows(): [string, string][] {
  const start = DOC.indexOf("## Fixed lists and defaults");
  const end = DOC.indexOf("\n## ", start + 1);
  expect(start).toBeGreaterThan(0);
  return DOC.slice(start, end)
    .split("\n")
    .filter((l) => l.startsWith("|") && !l.startsWith("|---"))
    .map(
      (l) =>
        l
          .slice(1, -1)
          .split("|")
          .map((c) => c.trim()) as [string, string],
    );
}

const cellValue = (cell: string): unknown => {
  const bare = cell.replace(/`/g, "");
  if (bare === "true" || bare === "false") return bare === "true";
  return /^-?\d+(\.\d+)?$/.test(bare) ? Number(bare) : bare;
};

describe("fixed lists and defaults (docs/architecture.md)", () => {
  const rows = new Map(sectionRows());

  it("the doc lists each fixed list as the source defines it, in order", () => {
    const list = (name: string) =>
      rows
        .get(name)
        ?.split(",")
        .map((v) => v.trim().replace(/`/g, ""));
    expect(list("strategies")).toEqual([...STRATEGIES]);
    expect(list("feedback modes")).toEqual([...FEEDBACK_MODES]);
    expect(list("prompt families")).toEqual([...PROMPT_FAMILIES]);
    expect(list("profile ids")).toEqual([...PROFILE_IDS]);
    expect(list("vote decisions (`decidedBy`)")).toEqual([...DECIDED_BY]);
    expect(list("speculative modes")).toEqual([...SPECULATIVE_MODES]);
  });

  it("the doc's defaults are the config schema's, and the decoder starts from them", () => {
    const defaults = loadConfig({ env: {} });
    const documented = [...rows].filter(([k]) => /^`(agent|decoding)\./.test(k));
    const sources = { agent: AGENT_DEFAULTS, decoding: DECODING_DEFAULTS } as Record<string, Record<string, unknown>>;
    const keys = Object.entries(sources).flatMap(([section, d]) => Object.keys(d).map((k) => `\`${section}.${k}\``));
    expect(documented.map(([k]) => k).sort()).toEqual(keys.sort());
    for (const [key, cell] of documented) {
      const [section, field] = key.replace(/`/g, "").split(".") as [string, string];
      expect(cellValue(cell), key).toEqual(sources[section]![field]);
      expect((defaults as unknown as Record<string, Record<string, unknown>>)[section]![field], key).toEqual(sources[section]![field]);
      expect((DEFAULT_DECODER_DEFAULTS as unknown as Record<string, unknown>)[field], key).toEqual(sources[section]![field]);
    }
  });

  it("every profile id has its profile, in the same order", () => {
    expect(PROFILES.map((p) => p.id)).toEqual([...PROFILE_IDS]);
  });
});

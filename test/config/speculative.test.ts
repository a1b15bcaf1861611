import { describe, expect, it } from "vitest";
import { configHelp, loadConfig } from "../../src/config/index.js";
import { ReexError } from "../../src/errors/index.js";

describe("speculative decoding settings", () => {
  it("default to no drafting, at most 8 drafted tokens a step, sized by the step costs, and 32768 tokens of earlier answers kept", () => {
    const config = loadConfig({});
    expect(config.decoding.speculative).toBe("off");
    expect(config.decoding.draftMax).toBe(8);
    expect(config.decoding.draftShape).toBe("sized");
    expect(config.decoding.draftHistory).toBe(32768);
  });

  it("are read from flags and the environment, and listed in --help", () => {
    expect(loadConfig({ flags: { "decoding.speculative": "ngram", "decoding.draftMax": "4" } }).decoding).toMatchObject({ speculative: "ngram", draftMax: 4 });
    expect(loadConfig({ env: { REEX_DECODING_SPECULATIVE: "ngram" } }).decoding.speculative).toBe("ngram");
    expect(configHelp()).toContain("--decoding.speculative");
    expect(configHelp()).toContain("--decoding.draftMax");
    expect(loadConfig({ flags: { "decoding.draftHistory": "0" } }).decoding.draftHistory).toBe(0);
    expect(configHelp()).toContain("--decoding.draftHistory");
    expect(loadConfig({ flags: { "decoding.draftShape": "fixed" } }).decoding.draftShape).toBe("fixed");
    expect(configHelp()).toContain("--decoding.draftShape");
  });

  it("refuse an unknown drafting source and a draft length out of bounds", () => {
    const cases: Record<string, string>[] = [
      { "decoding.speculative": "eagle" },
      { "decoding.draftMax": "0" },
      { "decoding.draftMax": "65" },
      { "decoding.draftHistory": "-1" },
      { "decoding.draftHistory": "1.5" },
      { "decoding.draftShape": "padded" },
    ];
    for (const flags of cases) {
      let caught: unknown;
      try {
        loadConfig({ flags });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ReexError);
      expect((caught as ReexError).code).toBe("CONFIG_INVALID");
    }
  });
});

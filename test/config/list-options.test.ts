import { describe, expect, it } from "vitest";
import { configHelp, loadConfig } from "../../src/config/index.js";
import { ReexError } from "../../src/errors/index.js";

describe("list options from flags and the environment", () => {
  it("reads a JSON array as its items, not as one item", () => {
    const config = loadConfig({ flags: { "server.apiKeys": '["key-one-123","key-two-456"]' } });
    expect(config.server.apiKeys).toEqual(["key-one-123", "key-two-456"]);
  });

  it("reads comma-separated items, trimmed", () => {
    const config = loadConfig({ env: { REEX_SERVER_API_KEYS: "key-one-123, key-two-456" } });
    expect(config.server.apiKeys).toEqual(["key-one-123", "key-two-456"]);
  });

  it("reads an empty value as an empty list", () => {
    expect(loadConfig({ flags: { "server.allowedRoots": "" } }).server.allowedRoots).toEqual([]);
  });

  it("refuses a value that starts like a JSON array but is not one", () => {
    let caught: unknown;
    try {
      loadConfig({ flags: { "server.apiKeys": '["key-one-123",' } });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ReexError);
    expect((caught as ReexError).code).toBe("CONFIG_INVALID");
    expect((caught as ReexError).message).toMatch(/server\.apiKeys.*JSON array/);
  });

  it("says in --help which options are lists and how to write them", () => {
    const line = configHelp()
      .split("\n")
      .find((l) => l.includes("--server.apiKeys"));
    expect(line).toMatch(/a list: a,b,c or a JSON array/);
    const scalar = configHelp()
      .split("\n")
      .find((l) => l.includes("--server.port"));
    expect(scalar).not.toMatch(/a list/);
  });
});

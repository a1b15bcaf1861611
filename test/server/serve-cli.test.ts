import { describe, expect, it, vi } from "vitest";
import { parseServeArgs, run } from "../../src/cli/serve.js";

describe("reex serve", () => {
  it("parses --config, --section.key value, --section.key=value and bare boolean flags", () => {
    expect(
      parseServeArgs(["--config", "reex.json", "--server.port", "9000", "--server.host=0.0.0.0", "--server.logSql", "--server.allowPathRegistration", "false"]),
    ).toEqual({
      help: false,
      file: "reex.json",
      flags: { "server.port": "9000", "server.host": "0.0.0.0", "server.logSql": "true", "server.allowPathRegistration": "false" },
    });
    expect(parseServeArgs(["-h"]).help).toBe(true);
    expect(() => parseServeArgs(["positional"])).toThrow(/unexpected argument/);
  });

  it("--help prints every config key with its flag, environment variable and default", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => undefined);
    try {
      expect(await run(["--help"])).toBe(0);
      const text = log.mock.calls.map((c) => String(c[0])).join("\n");
      expect(text).toContain("--server.port");
      expect(text).toContain("REEX_SERVER_RATE_LIMIT_PER_MINUTE");
      expect(text).toContain("--config FILE");
    } finally {
      log.mockRestore();
    }
  });

  it("refuses unknown or invalid options with CONFIG_INVALID before building the runtime", async () => {
    await expect(run(["--server.nope", "1"])).rejects.toMatchObject({ code: "CONFIG_INVALID" });
    await expect(run(["--server.port", "not-a-number"])).rejects.toMatchObject({ code: "CONFIG_INVALID" });
  });
});

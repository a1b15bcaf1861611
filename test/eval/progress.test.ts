import { describe, expect, it } from "vitest";
import { createProgressBar } from "../../src/eval/index.js";
import { renderProgressLine } from "../../src/eval/testing.js";

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  return { chunks, stream: { isTTY, write: (c: string) => chunks.push(c) } };
}

describe("the progress bar", () => {
  it("prints about one line per 5% when not on a terminal", () => {
    const { chunks, stream } = sink(false);
    const bar = createProgressBar({ total: 200, stream, label: "greedy" });
    for (let i = 1; i <= 200; i++) bar.update(i, "EX 50.0%");
    bar.finish();
    expect(chunks.every((c) => c.endsWith("\n") && !c.includes("\r"))).toBe(true);
    expect(chunks.length).toBeGreaterThanOrEqual(20);
    expect(chunks.length).toBeLessThanOrEqual(22);
    expect(chunks.at(-1)).toContain("200/200 100%");
  });

  it("redraws in place on a terminal and ends with a newline", () => {
    const { chunks, stream } = sink(true);
    const bar = createProgressBar({ total: 3, stream });
    bar.update(1);
    bar.update(2);
    bar.finish("done");
    expect(chunks.slice(0, 2).every((c) => c.startsWith("\r") && !c.includes("\n"))).toBe(true);
    expect(chunks.at(-1)).toMatch(/\r.*2\/3.*done\n$/);
  });

  it("renders the bar, the count, the share and an ETA", () => {
    expect(renderProgressLine("eval", 5, 10, 10_000, "EX 40%", 10)).toBe("eval [#####-----] 5/10  50% 10s eta 10s  EX 40%");
  });
});

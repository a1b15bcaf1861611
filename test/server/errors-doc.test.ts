import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ERROR_CATALOG } from "../../src/errors/index.js";

const DOC = fileURLToPath(new URL("../../docs/errors.md", import.meta.url));

/** Rows of the form `| \`CODE\` | 400 | meaning |` in docs/errors.md. */
function documented(): Map<string, number> {
  const rows = new Map<string, number>();
  for (const line of readFileSync(DOC, "utf8").split("\n")) {
    const m = /^\|\s*`([A-Z_]+)`\s*\|\s*(\d{3})\s*\|\s*(.+?)\s*\|\s*$/.exec(line);
    if (!m) continue;
    expect(rows.has(m[1]!), `${m[1]} is listed twice`).toBe(false);
    expect(m[3]!.length, `${m[1]} has a meaning`).toBeGreaterThan(10);
    rows.set(m[1]!, Number(m[2]));
  }
  return rows;
}

describe("docs/errors.md", () => {
  it("lists every code of ERROR_CATALOG with its status", () => {
    const doc = documented();
    for (const [code, { status }] of Object.entries(ERROR_CATALOG)) {
      expect(doc.has(code), `${code} is missing from docs/errors.md`).toBe(true);
      expect(doc.get(code), `${code} status`).toBe(status);
    }
  });

  it("lists no code that ERROR_CATALOG lacks", () => {
    for (const code of documented().keys()) expect(Object.keys(ERROR_CATALOG), `${code} is not in ERROR_CATALOG`).toContain(code);
  });
});

/** The MCP trace line of a `repair` event says what the server changed: tables rebound, literals fitted, parts of the question put in. */
import { describe, expect, it } from "vitest";
import { traceLine } from "../../src/mcp/format.js";

describe("MCP trace: repair events", () => {
  it("names the tables rebound and the comparisons rewritten, each only when there are some", () => {
    const literals = [{ column: "patients.city", from: "city = 'LEEDS'", to: "LOWER(TRIM(city)) = 'leeds'", rule: "variants" as const }];
    const base = { type: "repair" as const, path: "0", sql: "SELECT 1", repaired: "SELECT 2" };
    expect(traceLine({ ...base, swaps: [{ from: "rooms", to: "reservations" }] })).toBe(
      "[0] final SQL failed; tables rebound (rooms -> reservations): SELECT 2",
    );
    expect(traceLine({ ...base, swaps: [], literals })).toBe(
      "[0] literals fitted to the column's values (city = 'LEEDS' -> LOWER(TRIM(city)) = 'leeds'): SELECT 2",
    );
    expect(traceLine({ ...base, swaps: [{ from: "rooms", to: "reservations" }], literals })).toContain(
      "tables rebound (rooms -> reservations); literals fitted to the column's values (city = 'LEEDS'",
    );
  });

  it("names each part of the question put in: an added condition with +, a changed limit as before -> after", () => {
    const base = { type: "repair" as const, path: "0", sql: "SELECT 1", repaired: "SELECT 2", swaps: [] };
    const coverage = [
      { rule: "condition" as const, from: "", to: "country = 'AU'" },
      { rule: "limit" as const, from: "LIMIT 1", to: "LIMIT 5" },
    ];
    expect(traceLine({ ...base, coverage })).toBe("[0] what the question names put in (+ country = 'AU', LIMIT 1 -> LIMIT 5): SELECT 2");
  });
});

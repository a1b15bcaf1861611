/** The MCP trace line of a `repair` event says what the server changed: tables rebound, literals fitted, or both. */
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
});

import { describe, expect, it } from "vitest";
import { buildPrompt } from "../../src/agent/index.js";
import { FAMILY_INSTRUCTIONS, ROLE_TEXT, UNANSWERABLE_MARKER, systemPrompt } from "../../src/agent/testing.js";

const schema = "singer.singer_id (integer)\nsinger.name (text | values : Ann, Bob)\nsinger.country (text)";

describe("buildPrompt", () => {
  it("puts the role, the family's instructions and the unanswerable convention in the system message", () => {
    for (const family of ["execution-aware", "standard", "direct"] as const) {
      const { messages } = buildPrompt({ family, schema, question: "q" });
      expect(messages.map((m) => m.role)).toEqual(["system", "user"]);
      const system = messages[0]!.content;
      expect(system).toBe(systemPrompt(family));
      expect(system.startsWith(ROLE_TEXT)).toBe(true);
      expect(system).toContain("SQLite");
      expect(system).toContain(FAMILY_INSTRUCTIONS[family]);
      expect(system).toContain(`<final_sql>${UNANSWERABLE_MARKER}: reason</final_sql>`);
      expect(system).toContain("T1, T2");
    }
  });

  it("offers probes only in the execution-aware family, and thinking only in the reasoning families", () => {
    const exec = systemPrompt("execution-aware");
    expect(exec).toContain("<intermediate_sql>");
    expect(exec).toContain("<result>");
    expect(exec).toMatch(/Do not repeat probes or probe endlessly/);
    expect(exec).toMatch(/Check each result against the question's conditions/);
    expect(systemPrompt("standard")).not.toContain("<intermediate_sql>");
    expect(systemPrompt("standard")).toContain("<think>");
    expect(systemPrompt("direct")).not.toMatch(/<think>|<intermediate_sql>/);
  });

  it("starts the user message with the schema (the shared prefix), then matched values, question and hint", () => {
    const built = buildPrompt({
      family: "execution-aware",
      schema,
      matchedValues: "singer.country: France",
      question: "How many singers are from France?",
      evidence: "France refers to country = 'France'",
    });
    const user = built.messages[1]!.content;
    expect(user.startsWith(built.sharedPrefix)).toBe(true);
    expect(built.sharedPrefix).toContain(schema);
    expect(built.sharedPrefix).not.toContain("France");
    const order = ["Database schema:", "Matched values:", "Question: How many", "Hint: France refers"].map((s) => user.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("leaves out empty sections and shares the prefix between questions on one database", () => {
    const a = buildPrompt({ family: "direct", schema, question: "first?", matchedValues: "  ", evidence: "" });
    const b = buildPrompt({ family: "direct", schema, question: "second?" });
    expect(a.messages[1]!.content).not.toMatch(/Matched values|Hint/);
    expect(a.sharedPrefix).toBe(b.sharedPrefix);
    expect(a.messages[0]).toEqual(b.messages[0]);
  });

  it("stays short for small models", () => {
    for (const family of ["execution-aware", "standard", "direct"] as const) expect(systemPrompt(family).length).toBeLessThan(700);
  });
});

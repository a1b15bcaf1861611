/**
 * The learner's request file: the JSON Schema committed beside the Python learner is the one the zod schema emits
 * (Python validates every request against it, and its own test checks StepConfig field by field against it), and
 * the request the bridge writes for a resolved config passes the schema.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { learnerRequestJsonSchema, learnerRequestSchema } from "../../src/training/testing.js";

const FILE = join(resolve(import.meta.dirname, "../.."), "src", "training", "learner", "learner-request.schema.json");

describe("the learner request schema", () => {
  it("is committed as emitted (REEX_WRITE_LEARNER_SCHEMA=1 rewrites it)", () => {
    const text = `${JSON.stringify(learnerRequestJsonSchema(), null, 2)}\n`;
    if (process.env.REEX_WRITE_LEARNER_SCHEMA === "1") writeFileSync(FILE, text);
    expect(readFileSync(FILE, "utf8")).toBe(text);
  });

  it("requires every field: the learner has no defaults of its own", () => {
    const schema = learnerRequestJsonSchema() as { properties: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    for (const [name, part] of Object.entries(schema.properties)) {
      if (part.properties) expect([name, [...(part.required ?? [])].sort()]).toEqual([name, Object.keys(part.properties).sort()]);
    }
    expect(learnerRequestSchema.safeParse({ version: 1 }).success).toBe(false);
  });
});

/**
 * The server's rewrite rules (`REWRITE_RULES`, src/agent/rewrites.ts) against what is read off the
 * list and what cannot be: docs/architecture.md's "Server rewrites" table, each rule's `agent.*`
 * switch in the config schema and the defaults table, its field in `/openapi.json`, its `/metrics`
 * counter, its confidence signal, and what the playground and the CLI say.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { REWRITE_RULES, describeRewrites } from "../../src/agent/index.js";
import { AGENT_DEFAULTS, parseConfig } from "../../src/config/index.js";
import { decoderDefaults } from "../../src/decoding/decode.js";
import { SIGNALS } from "../../src/decoding/index.js";
import { createServerMetrics } from "../../src/server/metrics.js";
import { PLAYGROUND_HTML } from "../../src/server/public/playground.js";
import { makeApp, type TestApp } from "../server/helpers.js";
import { markdownTableAfter } from "../helpers/docs.js";

const DOC = readFileSync(resolve(import.meta.dirname, "../../docs/architecture.md"), "utf8");

const tableAfter = (heading: string): string[][] => markdownTableAfter(DOC, heading);

/** A rule's row as the "Server rewrites" table writes it. */
function docsRow(rule: (typeof REWRITE_RULES)[number]): string[] {
  const on = "fails" in rule ? `a SQL that failed (\`${rule.fails}\`)` : "a SQL that runs or was mended";
  const code = (s: string): string => `\`${s}\``;
  return [code(rule.id), on, code(`agent.${rule.flag}`), code(rule.field), code(rule.eventField), code(rule.metric.name), code(rule.signal), rule.docs];
}

let app: TestApp | undefined;
afterEach(async () => {
  await app?.cleanup();
  app = undefined;
});

describe("rewrite rules (REWRITE_RULES)", () => {
  it("each rule has its row in docs/architecture.md's Server rewrites table, in the list's order, and the table has no other", () => {
    expect(tableAfter("## Server rewrites")).toEqual(REWRITE_RULES.map(docsRow));
  });

  it("each rule's switch is a boolean agent.* key of the config schema, on by default, with its row in the defaults table, and reaches the decoder", () => {
    for (const rule of REWRITE_RULES) {
      expect(AGENT_DEFAULTS[rule.flag], rule.flag).toBe(true);
      expect(DOC, rule.flag).toContain(`| \`agent.${rule.flag}\` | true |`);
      const off = parseConfig({ agent: { [rule.flag]: false } });
      expect(off.agent[rule.flag], rule.flag).toBe(false);
      expect(decoderDefaults(off)[rule.flag], rule.flag).toBe(false);
    }
  });

  it("each rule's field is in /openapi.json's candidate schema, with its fixes' fields and its description", async () => {
    app = await makeApp();
    const doc = (await app.app.inject({ method: "GET", url: "/openapi.json" })).json();
    const candidate = doc.components.schemas.SqlResponse.properties.candidates.items;
    for (const rule of REWRITE_RULES) {
      const field = candidate.properties[rule.field];
      expect(field, `${rule.field} is missing from /openapi.json`).toBeDefined();
      expect(candidate.required ?? []).not.toContain(rule.field);
      expect(field.description).toBe(rule.api.description);
      expect(field.type).toBe("array");
      expect(Object.keys(field.items.properties)).toEqual(Object.keys(rule.api.shape));
      for (const [key, values] of Object.entries(rule.api.shape))
        expect(field.items.properties[key], `${rule.field}.${key}`).toEqual(values === "string" ? { type: "string" } : { type: "string", enum: [...values] });
    }
  });

  it("names each rule once: ids, switches, fields, event fields, metrics and signals are distinct", () => {
    for (const key of ["id", "flag", "field", "eventField", "signal", "says"] as const)
      expect(new Set(REWRITE_RULES.map((r) => r[key])).size, key).toBe(REWRITE_RULES.length);
    expect(new Set(REWRITE_RULES.map((r) => r.metric.name)).size).toBe(REWRITE_RULES.length);
  });

  it("each rule has its /metrics counter, its confidence signal in the list's order, and its sentence on the playground page", () => {
    const text = createServerMetrics({ queueDepth: () => 0, liveSequences: () => 0 }).registry.render();
    const signals: readonly string[] = SIGNALS;
    for (const rule of REWRITE_RULES) {
      expect(text).toContain(`# HELP ${rule.metric.name} ${rule.metric.help}`);
      expect(text).toContain(`# TYPE ${rule.metric.name} counter`);
      expect(PLAYGROUND_HTML).toContain(JSON.stringify({ field: rule.eventField, says: rule.says }));
    }
    const at = REWRITE_RULES.map((r) => signals.indexOf(r.signal));
    expect(at.every((i, k) => i >= 0 && (k === 0 || i === at[k - 1]! + 1))).toBe(true);
  });

  it("says what a repair event changed rule by rule, in the list's order, and nothing for a rule that changed nothing", () => {
    const event = {
      swaps: [],
      coverage: [{ rule: "condition" as const, from: "", to: "country = 'AU'" }],
      literals: [{ column: "t.c", from: "c = 'X'", to: "c = 'x'", rule: "case" as const }],
    };
    expect(describeRewrites(event)).toBe("literals fitted to the column's values (c = 'X' -> c = 'x'); what the question names put in (+ country = 'AU')");
  });
});

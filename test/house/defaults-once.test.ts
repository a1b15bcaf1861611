/**
 * Every option's default is stated once: the decoder's and the rollout's agent and decoding
 * settings are typed from the config schema and take its defaults; the rollout reads resolved
 * options and has no fallback of its own (#88 "Defaults once").
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { resolveRolloutOptions, REWRITE_RULES } from "../../src/agent/index.js";
import { AGENT_DEFAULTS, DECODING_DEFAULTS } from "../../src/config/index.js";
import { configSchema } from "../../src/config/testing.js";
import { DEFAULT_DECODER_DEFAULTS } from "../../src/decoding/index.js";
import { decoderDefaults } from "../../src/decoding/testing.js";
import type { Executor } from "../../src/sql/index.js";
import { parseTrainConfig } from "../../src/training/index.js";
import { learnerRequestFile } from "../../src/training/testing.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}${path}`, "utf8");

describe("defaults are stated once, in the config schema", () => {
  it("the rollout has no `??` fallback on an option (only `path`, which defaults to the trajectory's id)", () => {
    const fallbacks = [...read("src/agent/rollout.ts").matchAll(/options\??\.(\w+)\s*\?\?/g)].map((m) => m[1]);
    expect(fallbacks.filter((f) => f !== "path")).toEqual([]);
  });

  it("the rollout never reads AGENT_DEFAULTS or a profile of its own", () => {
    const text = read("src/agent/rollout.ts");
    expect(text).not.toMatch(/AGENT_DEFAULTS|reexProfile/);
  });

  it("the decoder's defaults restate no schema default in comments or fields", () => {
    const text = read("src/decoding/decode.ts");
    const block = text.slice(text.indexOf("export interface DecoderDefaults"), text.indexOf("/** What the decoder runs on. */"));
    expect(block).not.toMatch(/Default /);
    expect(block).not.toMatch(/config\.(agent|decoding)\.\w+/);
  });

  it("a rollout resolved from nothing takes the schema's agent defaults", () => {
    const resolved = resolveRolloutOptions({ executor: {} as Executor, dbPath: "x.sqlite" });
    for (const [key, value] of Object.entries(AGENT_DEFAULTS)) expect((resolved as unknown as Record<string, unknown>)[key], key).toEqual(value);
    for (const rule of REWRITE_RULES) expect(resolved[rule.flag], rule.flag).toBe(AGENT_DEFAULTS[rule.flag]);
    expect(resolved.family).toBe(resolved.profile.families[0]);
  });

  it("a rollout keeps what the caller sets and ignores what it leaves undefined", () => {
    const resolved = resolveRolloutOptions({ executor: {} as Executor, dbPath: "x.sqlite", finalRetries: 0, maxTokens: undefined });
    expect(resolved.finalRetries).toBe(0);
    expect(resolved.maxTokens).toBe(AGENT_DEFAULTS.maxTokens);
  });

  it("the learner's request takes its optimizer and lr-schedule settings from the resolved training config, not literals", () => {
    const keys = ["adamBeta2", "decayNorms", "schedule", "minLrRatio"] as const;
    const request = (learner: Record<string, unknown>) => {
      const config = parseTrainConfig({ model: "m.gguf", runDir: "run", data: { dataset: "d.jsonl", dbRoot: "db" }, learner }, "grpo");
      const req = { mode: "grpo" as const, step: 1, model: "m.gguf", experience: "e.jsonl", out: "o.gguf", metricsFile: "m.json", logFile: "l" };
      return { config, train: learnerRequestFile({ ...req, optimizerState: "o.pt", config }).train };
    };
    const { config, train } = request({});
    for (const key of keys) expect(train[key], key).toBe(config.learner[key]);
    const set = { adamBeta2: 0.95, decayNorms: false, schedule: "cosine", minLrRatio: 0.1 };
    expect(request(set).train).toMatchObject(set);
    const block = read("src/training/learner.ts");
    for (const key of keys) expect(block, key).toMatch(new RegExp(`${key}: l\\.${key},`));
  });

  it("the decoder's defaults from a default config are the built-in ones, which are the schema's", () => {
    const fromConfig = decoderDefaults(configSchema.parse({}));
    const { probeTimeoutMs, ...rest } = fromConfig;
    expect(rest).toEqual(DEFAULT_DECODER_DEFAULTS);
    expect(probeTimeoutMs).toBe(configSchema.parse({}).sql.timeoutMs);
    for (const [key, value] of Object.entries({ ...DECODING_DEFAULTS, ...AGENT_DEFAULTS })) {
      expect((DEFAULT_DECODER_DEFAULTS as unknown as Record<string, unknown>)[key], key).toEqual(value);
    }
  });
});

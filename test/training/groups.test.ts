import { rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPromptBuilder, type PromptBuilder } from "../../src/decoding/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { type ScriptContext } from "../../src/policy/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { runGroup, type TrainingQuestion } from "../../src/training/index.js";
import { assignAdvantages, collectStep, toExperienceRecord } from "../../src/training/testing.js";
import { GOLD, makeTrainingFixture, type TrainingFixture } from "./fixtures.js";

let fx: TrainingFixture;
let pool: ExecutorPool;
let prompts: PromptBuilder;

beforeAll(() => {
  fx = makeTrainingFixture();
  pool = new ExecutorPool({ workers: 2, timeoutMs: 5000 });
  prompts = createPromptBuilder({ indexDir: join(fx.dir, "indexes") });
});

afterAll(async () => {
  prompts.close();
  await pool.close();
  rmSync(fx.dir, { recursive: true, force: true });
});

const PROBE = "SELECT DISTINCT country FROM singer";
/** What each rollout of a group writes, by the order its trajectory first generates: turn i is written after i results. */
const VARIANTS: string[][] = [
  [`<think>check the countries</think>\n<intermediate_sql>${PROBE}</intermediate_sql>`, `<think>France it is</think>\n<final_sql>${GOLD}</final_sql>`],
  [
    `<think>check</think>\n<intermediate_sql>${PROBE}</intermediate_sql>`,
    `<think>Spain?</think>\n<final_sql>SELECT name FROM singer WHERE country = 'Spain'</final_sql>`,
  ],
  [
    `<think>a</think>\n<intermediate_sql>${PROBE}</intermediate_sql>`,
    `<think>again</think>\n<intermediate_sql>${PROBE.toLowerCase()};</intermediate_sql>`,
    `<think>ok</think>\n<final_sql>${GOLD}</final_sql>`,
  ],
  [`<think>no need to look</think>\n<final_sql>SELECT name FROM singer WHERE</final_sql>`],
];

function scripted(): ScriptedPolicy {
  const order = new Map<string, number>();
  return new ScriptedPolicy((ctx: ScriptContext) => {
    if (!order.has(ctx.trajectoryId)) order.set(ctx.trajectoryId, order.size % VARIANTS.length);
    const turns = VARIANTS[order.get(ctx.trajectoryId)!]!;
    return turns[(ctx.text.match(/<\/result>/g) ?? []).length] ?? "";
  });
}

/** The expected loss mask of a response (one token per character): 0 inside injected `<result>…</result>\n` blocks. */
function expectedMask(text: string): (0 | 1)[] {
  const mask: (0 | 1)[] = [...text].map(() => 1);
  for (const m of text.matchAll(/<result>\n[\s\S]*?\n<\/result>\n/g)) {
    const start = [...text.slice(0, m.index)].length;
    for (let i = 0; i < [...m[0]].length; i++) mask[start + i] = 0;
  }
  return mask;
}

const question: TrainingQuestion = {
  questionId: 1,
  dbPath: "",
  question: "Names of the singers from France?",
  evidence: "France refers to country = 'France'",
  goldSql: GOLD,
};

describe("rollout groups", () => {
  it("samples G rollouts through the agent, masks injected <result> tokens, and scores each", async () => {
    const policy = scripted();
    const group = await runGroup(
      { ...question, dbPath: fx.dbPath },
      { policy, executor: pool, promptFor: prompts.promptFor, groupSize: 4, maxInteractions: 5, maxTokens: 600 },
    );
    expect(group.rollouts).toHaveLength(4);
    const byFinal = group.rollouts.map((r) => r.rollout.finalSql);
    expect(byFinal).toEqual([GOLD, "SELECT name FROM singer WHERE country = 'Spain'", GOLD, "SELECT name FROM singer WHERE"]);

    for (const r of group.rollouts) {
      expect(r.mask).toEqual(expectedMask(r.rollout.text));
      expect(r.rollout.record.logprobs.filter((_, i) => r.mask[i] === 0).every((lp) => lp === 0)).toBe(true);
    }
    expect(group.rollouts[0]!.mask.filter((m) => m === 0).length).toBeGreaterThan(10);
    expect(group.rollouts[3]!.mask.every((m) => m === 1)).toBe(true);

    const [right, wrong, repeated, broken] = group.rollouts.map((r) => r.reward);
    expect(right!.components).toEqual({ format: 1, em: 1, exec: 2, entity: 1, exploration: 1 });
    expect(right!.total).toBe(12);
    expect(wrong!.components.exec).toBe(1);
    expect(wrong!.components.exploration).toBeCloseTo(1 / (1 + Math.exp(-1)), 12);
    expect(repeated!.components.exploration).toBe(0);
    expect(group.rollouts[2]!.rollout.interactions).toBe(2);
    expect(broken!.components.exec).toBe(0);
    expect(broken!.components.exploration).toBe(0.5);

    for (const call of policy.calls) {
      expect(call.options.temperature).toBe(1);
      expect(call.options.topP).toBe(1);
    }
  });

  it("assigns group-scaled advantages and writes learner records with mask, log-probs and prompt tokens", async () => {
    const policy = scripted();
    const batch = await collectStep([{ ...question, dbPath: fx.dbPath }], {
      policy,
      executor: pool,
      promptFor: prompts.promptFor,
      groupSize: 4,
      maxTokens: 600,
      scaling: "group",
    });
    expect(batch.zeroVarianceGroups).toBe(0);
    const rollouts = batch.groups[0]!.rollouts;
    const rewards = rollouts.map((r) => r.reward.total);
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length);
    rollouts.forEach((r, i) => expect(r.advantage).toBeCloseTo((rewards[i]! - mean) / (std + 1e-6), 9));
    expect(rollouts[0]!.advantage).toBeGreaterThan(0);
    expect(rollouts[3]!.advantage).toBeLessThan(0);

    const rec = toExperienceRecord(rollouts[0]!);
    expect(rec.prompt_tokens.length).toBeGreaterThan(100);
    expect(String.fromCodePoint(...rec.prompt_tokens)).toContain("Names of the singers from France?");
    expect(rec.tokens).toEqual(rollouts[0]!.rollout.record.tokens);
    expect(rec.mask).toEqual(expectedMask(rollouts[0]!.rollout.text));
    rec.mask.forEach((m, i) => expect(rec.old_logprobs![i]).toBeCloseTo(m === 1 ? Math.log(0.9) : 0, 12));
    expect(rec.reward).toBe(12);
    expect(rec.interactions).toBe(1);
    expect(rec.question_id).toBe(1);
    expect(rec.truncated).toBe(false);
  });

  it("counts a group whose rollouts all earn the same reward as zero-variance, with zero advantages", async () => {
    const policy = new ScriptedPolicy(() => `<think>t</think>\n<final_sql>${GOLD}</final_sql>`);
    const group = await runGroup({ ...question, dbPath: fx.dbPath }, { policy, executor: pool, promptFor: prompts.promptFor, groupSize: 3 });
    const { zeroVarianceGroups } = assignAdvantages([group], "group");
    expect(zeroVarianceGroups).toBe(1);
    expect(group.rollouts.map((r) => r.advantage)).toEqual([0, 0, 0]);
  });

  it("flags a rollout cut off by the token limit as truncated", async () => {
    const policy = new ScriptedPolicy(() => `<think>${"very long thought ".repeat(20)}</think><final_sql>${GOLD}</final_sql>`);
    const group = await runGroup({ ...question, dbPath: fx.dbPath }, { policy, executor: pool, promptFor: prompts.promptFor, groupSize: 2, maxTokens: 40 });
    expect(group.rollouts.every((r) => r.rollout.truncated)).toBe(true);
    expect(toExperienceRecord(group.rollouts[0]!).truncated).toBe(true);
    expect(group.rollouts[0]!.reward.components.exec).toBe(0);
  });
});

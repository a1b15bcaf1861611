/**
 * The ReEx rollout through real node-llama-cpp with the tiny random model. Exact-text grammars make
 * the noise model write a fixed probe and final answer, so the test can check what the loop does
 * with them: the probe runs on a real SQLite file, its <result> block is injected as unsampled
 * tokens, and generation continues after it in the same KV state.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildPrompt,
  continueRollout,
  createRolloutState,
  forkRollout,
  formatCheck,
  resultBlock,
  rolloutStep,
  runRollout,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../src/agent/index.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { ExecutorPool, loadSchema } from "../../src/sql/index.js";
import { renderSchema } from "../../src/sql/testing.js";
import { ensureTestModel, testPolicyOptions } from "../helpers/model.js";

const PROBE = "<think>Check the cities.</think>\n<intermediate_sql>SELECT DISTINCT city FROM customers</intermediate_sql>";
const FINAL = "<think>Lyon is stored as LYON.</think>\n<final_sql>SELECT count(*) FROM customers WHERE city = 'LYON'</final_sql>";

let dir: string;
let dbPath: string;
let policy: Policy;
let executor: ExecutorPool;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-rollout-llama-"));
  dbPath = join(dir, "shop.sqlite");
  const db = new Database(dbPath);
  db.exec(
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT); CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER, total INTEGER)",
  );
  const insert = db.prepare("INSERT INTO customers (name, city) VALUES (?, ?)");
  for (const [n, c] of [
    ["Ann", "LYON"],
    ["Bob", "PARIS"],
    ["Cy", "LYON"],
  ])
    insert.run(n, c);
  db.close();
  await ensureTestModel();
  policy = await createLlamaPolicy(testPolicyOptions({ sequences: 6, contextSize: 2048 }));
  executor = new ExecutorPool({ workers: 1 });
});

afterAll(async () => {
  await policy?.close();
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function prompt() {
  return buildPrompt({ family: "execution-aware", schema: renderSchema(loadSchema(dbPath)), question: "How many customers live in Lyon?" });
}

const grammar = { first: exactTextGrammar(PROBE), segment: exactTextGrammar(FINAL), finalBody: exactTextGrammar("SELECT 1</final_sql>") };

describe("rollout through llama.cpp", () => {
  it("executes the probe, injects its result as unsampled tokens and continues after it to the final SQL", async () => {
    const r = await runRollout(policy, prompt(), resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, grammar, maxTokens: 300, seed: 1 }));
    expect(r.probes).toHaveLength(1);
    expect(r.probes[0]!.result?.ok).toBe(true);
    expect(r.finalSql).toBe("SELECT count(*) FROM customers WHERE city = 'LYON'");
    expect(r.stopReason).toBe("final");
    expect(formatCheck(r.text, "execution-aware").ok).toBe(true);

    const injected = policy.tokenize(resultBlock(r.probes[0]!.feedback));
    const zeros = r.record.sampled.filter((s) => s === 0).length;
    expect(zeros).toBe(injected.length);
    const firstZero = r.record.sampled.indexOf(0);
    expect(r.record.tokens.slice(firstZero, firstZero + injected.length)).toEqual(injected);
    expect(r.record.sampled.slice(firstZero + injected.length).some((s) => s === 1)).toBe(true);
    expect(r.record.logprobs.filter((_, i) => r.record.sampled[i] === 0).every((l) => l === 0)).toBe(true);
    expect(policy.detokenize(r.record.tokens)).toBe(r.text);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("a fork after the probe's result continues to the same answer without evaluating the prefix again", async () => {
    const built = prompt();
    const trajectory = await policy.start(policy.renderChat(built.messages, { sharedPrefix: built.sharedPrefix }));
    const state = createRolloutState();
    const options = { executor, dbPath, grammar, maxTokens: 300, seed: 2 };
    const step = await rolloutStep(trajectory, state, resolveRolloutOptions({ ...OWN_ANSWERS, ...options }));
    expect(step.kind).toBe("probe");
    const child = await forkRollout(trajectory, state);
    const [a, b] = await Promise.all([
      continueRollout(trajectory, state, resolveRolloutOptions({ ...OWN_ANSWERS, ...options })),
      continueRollout(child.trajectory, child.state, resolveRolloutOptions({ ...OWN_ANSWERS, ...options })),
    ]);
    expect(b.finalSql).toBe(a.finalSql);
    expect(b.text).toBe(a.text);
    const childUsage = child.trajectory.usage;
    expect(childUsage.generatedTokens).toBeGreaterThan(0);
    expect(childUsage.evaluatedTokens).toBeLessThanOrEqual(childUsage.generatedTokens + 1);
    const injected = policy.tokenize(resultBlock(state.probes[0]!.feedback)).length;
    expect(trajectory.usage.evaluatedTokens).toBeGreaterThanOrEqual(childUsage.evaluatedTokens + injected);
    await Promise.all([trajectory.release(), child.trajectory.release()]);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("stops at the interaction limit: a probe past N is not executed and the server opens <final_sql>", async () => {
    const r = await runRollout(
      policy,
      prompt(),
      resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, grammar, maxInteractions: 0, maxTokens: 300, seed: 3 }),
    );
    expect(r.probes).toHaveLength(1);
    expect(r.probes[0]!.overLimit).toBe(true);
    expect(r.probes[0]!.result).toBeNull();
    expect(r.finalSql).toBe("SELECT 1");
  });

  it("takes back a final SQL that fails to run: the KV state is rewound, the segment written back as a probe, and the model answers after its error", async () => {
    const wrong = "<think>Count them.</think>\n<final_sql>SELECT count(*) FROM clients</final_sql>";
    const retry = { first: exactTextGrammar(wrong), segment: exactTextGrammar(FINAL) };
    const r = await runRollout(
      policy,
      prompt(),
      resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, grammar: retry, maxTokens: 300, seed: 5, finalRetries: 1 }),
    );
    expect(r.probes).toHaveLength(1);
    expect(r.probes[0]!.sql).toBe("SELECT count(*) FROM clients");
    expect(r.probes[0]!.result?.ok).toBe(false);
    expect(r.finalSql).toBe("SELECT count(*) FROM customers WHERE city = 'LYON'");
    const rewritten = "<think>Count them.</think>\n<intermediate_sql>SELECT count(*) FROM clients</intermediate_sql>";
    expect(r.text.startsWith(rewritten + resultBlock(r.probes[0]!.feedback))).toBe(true);
    expect(policy.detokenize(r.record.tokens)).toBe(r.text);
    // the rewound segment and the result are injected; only the answer after them was sampled
    const injected = policy.tokenize(rewritten + resultBlock(r.probes[0]!.feedback)).length;
    expect(r.record.sampled.slice(0, injected).every((s) => s === 0)).toBe(true);
    expect(r.record.sampled.slice(injected).every((s) => s === 1)).toBe(true);
    expect(formatCheck(r.text, "execution-aware").ok).toBe(true);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("rebinds a final SQL's table to the one holding its columns: the KV state is rewound and the answer written back with the repaired SQL", async () => {
    const wrong = "<think>Count the big orders.</think>\n<final_sql>SELECT count(*) FROM customers WHERE total > 10</final_sql>";
    const r = await runRollout(
      policy,
      prompt(),
      resolveRolloutOptions({
        ...OWN_ANSWERS,
        executor,
        dbPath,
        grammar: { first: exactTextGrammar(wrong) },
        maxTokens: 300,
        seed: 6,
        repairTables: true,
        finalRetries: 1,
      }),
    );
    expect(r.finalSql).toBe("SELECT count(*) FROM orders WHERE total > 10");
    expect(r.probes).toEqual([]);
    expect(r.text).toBe(wrong.replace("FROM customers", "FROM orders"));
    expect(policy.detokenize(r.record.tokens)).toBe(r.text);
    expect(r.record.tokens).toEqual(policy.tokenize(r.text));
    expect(r.record.sampled.every((s) => s === 0)).toBe(true);
    expect(r.usage.generatedTokens).toBeGreaterThan(0);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("respects the token budget and reports truncation", async () => {
    const r = await runRollout(policy, prompt(), resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, grammar, maxTokens: 5, seed: 4 }));
    expect(r.usage.generatedTokens).toBeLessThanOrEqual(5);
    expect(r.truncated).toBe(true);
    expect(r.finalSql).toBeNull();
  });
});

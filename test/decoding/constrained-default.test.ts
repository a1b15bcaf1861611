/**
 * Whether a request that does not say `constrained` is decoded under the schema grammar: on for the
 * project's starter models (GGUF `general.name` `reex-starter…`), off for any other model, and
 * `decoding.constrained` or the request overriding that. Real node-llama-cpp with tiny random
 * models that differ only in their name; a fixed-choice grammar stands in for the schema's, so a
 * constrained answer is always one of its final statements.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/index.js";
import { createDecoder, type AnswerRequest } from "../../src/decoding/index.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { buildTinyModel } from "../../src/policy/tiny-model.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { testPolicyOptions } from "../helpers/model.js";
import { choiceGrammars, makeShopDb, SHOP_FINALS, SHOP_PROBES } from "./helpers.js";

let dir: string;
let starter: Policy;
let other: Policy;
let executor: ExecutorPool;
let base: AnswerRequest;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-constrained-default-"));
  const starterPath = join(dir, "starter.gguf");
  const otherPath = join(dir, "other.gguf");
  writeFileSync(starterPath, buildTinyModel({ seed: 1, name: "reex-starter-seed1" }));
  writeFileSync(otherPath, buildTinyModel({ seed: 1, name: "SQLCoder 7B" }));
  starter = await createLlamaPolicy(testPolicyOptions({ model: starterPath, sequences: 2 }));
  other = await createLlamaPolicy(testPolicyOptions({ model: otherPath, sequences: 2 }));
  executor = new ExecutorPool({ workers: 1 });
  base = { dbPath: makeShopDb(join(dir, "shop.sqlite")), question: "How many customers live in Lyon?", strategy: "greedy", maxInteractions: 3, maxTokens: 400 };
});

afterAll(async () => {
  await starter?.close();
  await other?.close();
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A decoder over `policy` that counts the grammars it builds. */
function decoderFor(policy: Policy, constrained?: "auto" | "on" | "off") {
  const built: string[] = [];
  const decode = createDecoder({
    policy,
    executor,
    profile: "reex",
    promptOptions: { indexDir: join(dir, "indexes") },
    ...(constrained ? { config: parseConfig({ decoding: { constrained } }) } : {}),
    grammarFor: (dbPath) => {
      built.push(dbPath);
      return choiceGrammars(SHOP_PROBES, SHOP_FINALS);
    },
  });
  return { decode, built };
}

describe("constrained decoding by default", () => {
  it("is on for a starter model: a request that does not say gets the grammar and answers inside it", async () => {
    const { decode, built } = decoderFor(starter);
    expect(decode.constrained).toBe(true);
    const answer = await decode(base);
    decode.close();
    expect(built).toHaveLength(1);
    expect(SHOP_FINALS).toContain(answer.sql);
  });

  it("is off for any other model unless the request asks", async () => {
    const { decode, built } = decoderFor(other);
    expect(decode.constrained).toBe(false);
    await decode(base);
    expect(built).toHaveLength(0);
    const asked = await decode({ ...base, constrained: true });
    decode.close();
    expect(built).toHaveLength(1);
    expect(SHOP_FINALS).toContain(asked.sql);
  });

  it("yields to a request's constrained: false on a starter model", async () => {
    const { decode, built } = decoderFor(starter);
    await decode({ ...base, constrained: false });
    decode.close();
    expect(built).toHaveLength(0);
  });

  it("follows decoding.constrained on or off whatever the model", async () => {
    const on = decoderFor(other, "on");
    const off = decoderFor(starter, "off");
    expect([on.decode.constrained, off.decode.constrained]).toEqual([true, false]);
    await on.decode(base);
    await off.decode(base);
    on.decode.close();
    off.decode.close();
    expect([on.built.length, off.built.length]).toEqual([1, 0]);
  });
});

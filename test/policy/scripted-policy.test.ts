import { describe, expect, it } from "vitest";
import { isReexError } from "../../src/errors/index.js";
import { ScriptedPolicy } from "../../src/policy/tooling.js";
import { SCRIPTED_EOS } from "../../src/policy/testing.js";

const spec = { prefix: "SYSTEM+SCHEMA|", suffix: "question|" };

describe("ScriptedPolicy", () => {
  it("plays a list of outputs one per generate call, stopping right after a stop string", async () => {
    const policy = new ScriptedPolicy(["<think>x</think><intermediate_sql>SELECT 1</intermediate_sql>tail", "<final_sql>SELECT 2</final_sql>"]);
    const t = await policy.start(spec);
    const first = await t.generate({ stop: ["</intermediate_sql>"], maxTokens: 100 });
    expect(first).toMatchObject({ text: "<think>x</think><intermediate_sql>SELECT 1</intermediate_sql>", stopReason: "stop", stop: "</intermediate_sql>" });
    expect(first.tokens).toEqual(policy.tokenize(first.text));
    await t.append("<result>1</result>");
    const second = await t.generate({ stop: ["</intermediate_sql>"], maxTokens: 100 });
    expect(second.text).toBe("<final_sql>SELECT 2</final_sql>");
    expect(second.stopReason).toBe("eos");
    expect(second.tokens.at(-1)).toBe(SCRIPTED_EOS);
    expect(policy.detokenize(second.tokens)).toBe(second.text);
    const third = await t.generate({ stop: [], maxTokens: 10 });
    expect(third).toMatchObject({ text: "", stopReason: "eos" });
    expect(policy.calls.map((c) => c.text)).toEqual(["", first.text + "<result>1</result>", first.text + "<result>1</result>" + second.text]);
    await t.release();
  });

  it("asks a script function with the prompt and the text so far, and honours maxTokens on characters", async () => {
    const policy = new ScriptedPolicy(({ prompt, text }) => (text.includes("<result>") ? "done" : `echo:${prompt.length}`));
    const t = await policy.start(spec);
    const r = await t.generate({ stop: [], maxTokens: 4 });
    expect(r).toMatchObject({ text: "echo", stopReason: "maxTokens" });
    await t.append("<result>");
    expect((await t.generate({ stop: [], maxTokens: 10 })).text).toBe("done");
    expect(t.record.sampled).toEqual([1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]);
    expect(t.record.logprobs.every((lp, i) => (t.record.sampled[i] ? lp < 0 : lp === 0))).toBe(true);
    await t.release();
  });

  it("counts usage like the llama backend: cached prefixes are not evaluated again, forks start at zero", async () => {
    const policy = new ScriptedPolicy(() => "abc");
    const a = await policy.start(spec);
    expect(a.usage).toEqual({ promptTokens: 23, evaluatedTokens: 23, generatedTokens: 0 });
    const b = await policy.start({ ...spec, suffix: "other|" });
    expect(b.usage.evaluatedTokens).toBe(6);
    await a.generate({ stop: [], maxTokens: 10 });
    const c = await a.fork();
    expect(c.record).toEqual(a.record);
    expect(c.usage).toEqual({ promptTokens: 23, evaluatedTokens: 0, generatedTokens: 0 });
    expect(policy.calls).toHaveLength(1);
    await Promise.all([a.release(), b.release(), c.release()]);
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("streams with a token delay and aborts within one token", async () => {
    const policy = new ScriptedPolicy(() => "x".repeat(100), { tokenDelayMs: 2 });
    const t = await policy.start(spec);
    const controller = new AbortController();
    const pieces: string[] = [];
    const r = await t.generate({
      stop: [],
      maxTokens: 100,
      signal: controller.signal,
      onText: (p) => {
        pieces.push(p);
        if (pieces.length === 5) controller.abort();
      },
    });
    expect(r.stopReason).toBe("aborted");
    expect(r.tokens).toHaveLength(5);
    await t.release();
  });

  it("limits live trajectories: fork fails, start waits until a release", async () => {
    const policy = new ScriptedPolicy(() => "", { maxSequences: 1 });
    const a = await policy.start(spec);
    await expect(a.fork()).rejects.toSatisfy((e) => isReexError(e, "CONTEXT_EXHAUSTED"));
    const waiting = policy.start(spec);
    await a.release();
    await (await waiting).release();
  });

  it("renders ChatML with parts and splits like the llama backend", () => {
    const policy = new ScriptedPolicy([]);
    const p = policy.renderChat(
      [
        { role: "system", content: "S" },
        { role: "user", content: "shared|Q" },
      ],
      { sharedPrefix: "shared|" },
    );
    expect(p.prefix).toBe("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nshared|");
    expect(p.suffix).toBe("Q<|im_end|>\n<|im_start|>assistant\n");
    expect(p.parts!.suffix).toEqual([
      { text: "Q", special: false },
      { text: "<|im_end|>\n<|im_start|>assistant\n", special: true },
    ]);
  });

  it("invalidates trajectories on reload and records the reload", async () => {
    const policy = new ScriptedPolicy(() => "a");
    const t = await policy.start(spec);
    await policy.reload({ lora: ["x.gguf"] });
    expect(policy.info.lora).toEqual(["x.gguf"]);
    expect(policy.reloads).toEqual([{ lora: ["x.gguf"] }]);
    await expect(t.generate({ stop: [], maxTokens: 1 })).rejects.toSatisfy((e) => isReexError(e, "POLICY_ERROR"));
  });
});

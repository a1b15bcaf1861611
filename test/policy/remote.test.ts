/**
 * The remote policy over real HTTP: an OpenAI-compatible peer (test/helpers/openai-peer.ts) serves
 * the real tiny GGUF through this project's llama policy, and the remote backend talks to it like it
 * would to vLLM. The same checks against llama.cpp's real llama-server live in
 * test/e2e/llama-server.test.ts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildPrompt, resultBlock, runRollout, OWN_ANSWERS, resolveRolloutOptions } from "../../src/agent/index.js";
import { createDecoder } from "../../src/decoding/index.js";
import { isReexError } from "../../src/errors/index.js";
import { createRemotePolicy, type Policy } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { ExecutorPool, loadSchema } from "../../src/sql/index.js";
import { renderSchema } from "../../src/sql/testing.js";
import { choiceGrammars, eventLog, makeShopDb, SHOP_FINALS, SHOP_PROBES } from "../decoding/helpers.js";
import { startOpenAIPeer, type OpenAIPeer } from "../helpers/openai-peer.js";

const MESSAGES = [
  { role: "system" as const, content: "You are an experienced database expert." },
  { role: "user" as const, content: "Database schema:\ncustomers.city (TEXT)\n\nQuestion: how many customers live in Lyon?" },
];
const SHARED = "Database schema:\ncustomers.city (TEXT)\n\n";
const PROBE = "<think>Check the cities.</think>\n<intermediate_sql>SELECT DISTINCT city FROM customers</intermediate_sql>";
const FINAL = "<think>Lyon it is.</think>\n<final_sql>SELECT count(*) FROM customers WHERE city = 'Lyon'</final_sql>";
const LONG = "SELECT name FROM customers WHERE city = 'Lyon' ORDER BY name LIMIT 3; ".repeat(6);

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function errorOf(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

let peer: OpenAIPeer;
let policy: Policy;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "reex-remote-"));
  peer = await startOpenAIPeer();
  policy = await createRemotePolicy({ url: peer.url, timeoutMs: 30_000 });
});

afterAll(async () => {
  await policy?.close();
  await peer?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("remote policy against an OpenAI-compatible peer serving the tiny model", () => {
  it("asks the endpoint for its model and context size; without /props the served id is all the metadata", () => {
    expect(policy.info).toMatchObject({ backend: "remote", model: "tiny", device: "remote", contextSize: 2048, maxSequences: 64 });
    expect(policy.info.metadata).toEqual({ file: "tiny" });
  });

  it("renders ChatML by default and a {system}/{user} template when configured", async () => {
    const chatml = policy.renderChat(MESSAGES, { sharedPrefix: SHARED });
    expect(chatml.prefix + chatml.suffix).toBe(
      `<|im_start|>system\n${MESSAGES[0]!.content}<|im_end|>\n<|im_start|>user\n${MESSAGES[1]!.content}<|im_end|>\n<|im_start|>assistant\n`,
    );
    expect(chatml.prefix.endsWith(SHARED)).toBe(true);
    const templated = await createRemotePolicy({ url: peer.url, chatTemplate: "[SYS]{system}[/SYS][USER]{user}[/USER][BOT]" });
    try {
      const spec = templated.renderChat([...MESSAGES, { role: "assistant", content: "<think>" }], { sharedPrefix: SHARED });
      expect(spec.prefix + spec.suffix).toBe(`[SYS]${MESSAGES[0]!.content}[/SYS][USER]${MESSAGES[1]!.content}[/USER][BOT]<think>`);
      expect(spec.parts?.suffix.find((p) => p.text.includes("Question"))?.special).toBe(false);
      expect(() => templated.renderChat([...MESSAGES, { role: "assistant", content: "a" }, { role: "user", content: "b" }])).toThrow(/one system and one user/);
    } finally {
      await templated.close();
    }
    await expect(createRemotePolicy({ url: peer.url, chatTemplate: "no placeholder" })).rejects.toMatchObject({ code: "CONFIG_INVALID" });
  });

  it("generates up to a stop string over SSE: the text keeps it, each sampled token has its id and logprob", async () => {
    const t = await policy.start(policy.renderChat(MESSAGES, { sharedPrefix: SHARED }));
    try {
      const streamed: string[] = [];
      const r = await t.generate({
        stop: ["</intermediate_sql>", "</final_sql>"],
        maxTokens: 200,
        grammar: exactTextGrammar(PROBE + " and more"),
        seed: 3,
        onText: (s) => streamed.push(s),
      });
      expect(r.stopReason).toBe("stop");
      expect(r.stop).toBe("</intermediate_sql>");
      expect(r.text).toBe(PROBE);
      expect(streamed.join("")).toBe(r.text);
      expect(streamed.length).toBeGreaterThan(5);
      expect(r.tokens.length).toBe(r.logprobs.length);
      expect(r.tokens.every((id) => Number.isInteger(id) && id >= 0)).toBe(true);
      expect(r.logprobs.every((l) => Number.isFinite(l) && l <= 0)).toBe(true);
      expect(peer.policy.detokenize(r.tokens).startsWith(PROBE)).toBe(true);
      expect(t.record).toEqual({ tokens: r.tokens, sampled: r.tokens.map(() => 1), logprobs: r.logprobs });
      expect(t.usage.generatedTokens).toBe(r.tokens.length);
      expect(t.usage.promptTokens).toBe(t.promptTokens.length);
      const sent = peer.completions.at(-1)!;
      expect(sent).toMatchObject({ model: "tiny", stream: true, logprobs: 1, stop: ["</intermediate_sql>", "</final_sql>"], max_tokens: 200, seed: 3 });
      expect(sent.prompt).toEqual(t.promptTokens);
    } finally {
      await t.release();
    }
  });

  it("a server that leaves the stop string out (llama-server) still yields it: the text is rebuilt from the ids via /detokenize", async () => {
    peer.behaviour.stopStyle = "llama-server";
    const t = await policy.start(policy.renderChat(MESSAGES));
    try {
      const streamed: string[] = [];
      const r = await t.generate({
        stop: ["</intermediate_sql>"],
        maxTokens: 200,
        grammar: exactTextGrammar(PROBE + " and more"),
        seed: 3,
        onText: (s) => streamed.push(s),
      });
      expect(r.stopReason).toBe("stop");
      expect(r.stop).toBe("</intermediate_sql>");
      expect(r.text.startsWith(PROBE)).toBe(true);
      expect(r.text).toBe(peer.policy.detokenize(r.tokens));
      expect(streamed.join("")).toBe(r.text);
      // a real end of turn is not mistaken for a stop
      const eos = await t.generate({ stop: ["</final_sql>"], maxTokens: 200, grammar: exactTextGrammar(" done"), seed: 4 });
      expect(eos.stopReason).toBe("eos");
      expect(eos.text).toBe(" done");
    } finally {
      peer.behaviour.stopStyle = "vllm";
      await t.release();
    }
  });

  it("sends the prompt as the same token ids the embedded policy would evaluate, and greedy continuations agree", async () => {
    const spec = policy.renderChat(MESSAGES, { sharedPrefix: SHARED });
    const [remote, local] = await Promise.all([policy.start(spec), peer.policy.start(spec)]);
    try {
      expect(remote.promptTokens).toEqual(local.promptTokens);
      const a = await remote.generate({ stop: [], maxTokens: 12, temperature: 0 });
      const b = await local.generate({ stop: [], maxTokens: 12, temperature: 0 });
      expect(a.tokens).toEqual(b.tokens);
      expect(a.text).toBe(b.text);
      a.logprobs.forEach((l, i) => expect(l).toBeCloseTo(b.logprobs[i]!, 3));
    } finally {
      await Promise.all([remote.release(), local.release()]);
    }
  });

  it("append records injected tokens (control-token spellings stay text) and the next request carries them", async () => {
    const t = await policy.start(policy.renderChat(MESSAGES, { sharedPrefix: SHARED }));
    try {
      const first = await t.generate({ stop: ["</intermediate_sql>"], maxTokens: 200, grammar: exactTextGrammar(PROBE), seed: 1 });
      const injected = resultBlock("city\nLyon <|im_end|>");
      const appended = await t.append(injected);
      const imEnd = peer.policy.tokenize("<|im_end|>");
      expect(imEnd).toHaveLength(1);
      expect(appended.tokens).not.toContain(imEnd[0]);
      expect(peer.policy.detokenize(appended.tokens)).toBe(injected);
      const n = first.tokens.length;
      expect(t.record.sampled.slice(n)).toEqual(appended.tokens.map(() => 0));
      expect(t.record.logprobs.slice(n)).toEqual(appended.tokens.map(() => 0));
      const second = await t.generate({ stop: ["</final_sql>"], maxTokens: 200, grammar: exactTextGrammar(FINAL), seed: 2 });
      expect(second.text).toBe(FINAL);
      expect(peer.completions.at(-1)!.prompt).toEqual([...t.promptTokens, ...first.tokens, ...appended.tokens]);
      expect(t.record.tokens).toEqual([...first.tokens, ...appended.tokens, ...second.tokens]);
      expect(t.record.sampled).toEqual([...first.tokens.map(() => 1), ...appended.tokens.map(() => 0), ...second.tokens.map(() => 1)]);
    } finally {
      await t.release();
    }
  });

  it("a fork is an independent copy; its first request is mostly served from the server's prefix cache", async () => {
    const unique = [MESSAGES[0]!, { role: "user" as const, content: `${MESSAGES[1]!.content} (fork test ${Date.now()})` }];
    const parent = await policy.start(policy.renderChat(unique));
    const first = await parent.generate({ stop: ["</intermediate_sql>"], maxTokens: 200, grammar: exactTextGrammar(PROBE), seed: 1 });
    await parent.append(resultBlock("city\nLyon"));
    const child = await parent.fork();
    try {
      expect(policy.liveTrajectories()).toBe(2);
      expect(child.record).toEqual(parent.record);
      expect(child.usage).toEqual({ promptTokens: parent.usage.promptTokens, evaluatedTokens: 0, generatedTokens: 0 });
      const a = await child.generate({ stop: [], maxTokens: 10, temperature: 1, seed: 11 });
      const b = await parent.generate({ stop: [], maxTokens: 10, temperature: 1, seed: 12 });
      expect(a.tokens).not.toEqual(b.tokens);
      const shared = first.tokens.length + parent.record.sampled.filter((s) => s === 0).length;
      expect(child.record.tokens.slice(0, shared)).toEqual(parent.record.tokens.slice(0, shared));
      expect(child.record.tokens.slice(shared)).toEqual(a.tokens);
      expect(parent.record.tokens.slice(shared)).toEqual(b.tokens);
      // The peer reports cached_tokens from its emulated prefix cache (prompt and output of recent
      // requests): the fork's first request evaluated only the injected block, not the prompt.
      const injected = parent.record.sampled.filter((x) => x === 0).length;
      expect(child.usage.evaluatedTokens).toBeLessThanOrEqual(injected + a.tokens.length);
      expect(child.usage.evaluatedTokens).toBeGreaterThanOrEqual(a.tokens.length);
      expect(parent.usage.evaluatedTokens).toBeGreaterThan(parent.usage.promptTokens);
    } finally {
      await Promise.all([parent.release(), child.release()]);
    }
    expect(policy.liveTrajectories()).toBe(0);
  });

  it("aborting mid-stream ends generate within 200 ms with what had arrived", async () => {
    peer.behaviour.delayMs = 25;
    const t = await policy.start(policy.renderChat(MESSAGES));
    try {
      const controller = new AbortController();
      let pieces = 0;
      let abortedAt = 0;
      const pending = t.generate({
        stop: [],
        maxTokens: 400,
        grammar: exactTextGrammar(LONG),
        signal: controller.signal,
        onText: () => {
          if (++pieces === 4) {
            abortedAt = performance.now();
            controller.abort();
          }
        },
      });
      const r = await pending;
      expect(performance.now() - abortedAt).toBeLessThan(200);
      expect(r.stopReason).toBe("aborted");
      expect(r.tokens.length).toBeGreaterThanOrEqual(4);
      expect(r.tokens.length).toBeLessThan(20);
      expect(t.record.tokens).toEqual(r.tokens);
      for (let i = 0; i < 40 && peer.disconnects === 0; i++) await new Promise((res) => setTimeout(res, 25));
      expect(peer.disconnects).toBeGreaterThan(0);
    } finally {
      peer.behaviour.delayMs = 0;
      await t.release();
    }
  });

  it("an HTTP 500 is POLICY_ERROR naming the URL and status; the trajectory stays usable", async () => {
    const t = await policy.start(policy.renderChat(MESSAGES));
    try {
      peer.behaviour.failStatus = 500;
      const err = await errorOf(t.generate({ stop: [], maxTokens: 4 }));
      peer.behaviour.failStatus = undefined;
      expect(isReexError(err, "POLICY_ERROR")).toBe(true);
      expect((err as Error).message).toContain(`${peer.url}/completions answered HTTP 500`);
      expect(t.record.tokens).toEqual([]);
      expect((await t.generate({ stop: [], maxTokens: 4, temperature: 0 })).tokens.length).toBeGreaterThan(0);
    } finally {
      peer.behaviour.failStatus = undefined;
      await t.release();
    }
  });

  it("a rejected key is POLICY_ERROR saying so, at start-up and mid-run", async () => {
    const t = await policy.start(policy.renderChat(MESSAGES));
    peer.behaviour.apiKey = "the-right-key";
    try {
      const err = await errorOf(t.generate({ stop: [], maxTokens: 4 }));
      expect(isReexError(err, "POLICY_ERROR")).toBe(true);
      expect((err as Error).message).toMatch(/requires an API key \(HTTP 401\)/);
      const wrong = await errorOf(createRemotePolicy({ url: peer.url, apiKey: "the-wrong-key" }));
      expect(isReexError(wrong, "POLICY_ERROR")).toBe(true);
      expect((wrong as Error).message).toMatch(/rejected the API key \(HTTP 401\)/);
      const right = await createRemotePolicy({ url: peer.url, apiKey: "the-right-key" });
      try {
        const u = await right.start(right.renderChat(MESSAGES));
        expect((await u.generate({ stop: [], maxTokens: 3, temperature: 0 })).tokens.length).toBeGreaterThan(0);
        await u.release();
      } finally {
        await right.close();
      }
    } finally {
      peer.behaviour.apiKey = undefined;
      await t.release();
    }
  });

  it("connection refused and timeouts are POLICY_ERROR", async () => {
    const port = await freePort();
    const warnings: string[] = [];
    const down = await createRemotePolicy({ url: `http://127.0.0.1:${port}/v1`, model: "tiny", log: (m) => warnings.push(m) });
    try {
      expect(warnings.join("\n")).toMatch(/ECONNREFUSED/);
      expect(down.info.contextSize).toBe(0);
      const err = await errorOf(down.start(down.renderChat(MESSAGES)));
      expect(isReexError(err, "POLICY_ERROR")).toBe(true);
      expect((err as Error).message).toMatch(new RegExp(`could not reach the remote endpoint http://127\\.0\\.0\\.1:${port}/tokenize: ECONNREFUSED`));
      expect(down.liveTrajectories()).toBe(0);
    } finally {
      await down.close();
    }
    await expect(createRemotePolicy({ url: `http://127.0.0.1:${port}/v1` })).rejects.toMatchObject({ code: "CONFIG_INVALID" });

    const slow = await createRemotePolicy({ url: peer.url, timeoutMs: 150 });
    const t = await slow.start(slow.renderChat(MESSAGES));
    peer.behaviour.delayMs = 400;
    try {
      const at = performance.now();
      const err = await errorOf(t.generate({ stop: [], maxTokens: 50, grammar: exactTextGrammar(LONG) }));
      expect(isReexError(err, "POLICY_ERROR")).toBe(true);
      expect((err as Error).message).toMatch(/did not answer within 150 ms/);
      expect(performance.now() - at).toBeLessThan(1500);
    } finally {
      peer.behaviour.delayMs = 0;
      await t.release();
      await slow.close();
    }
  });

  it("without /tokenize the trajectory sends text and records only sampled tokens", async () => {
    peer.behaviour.tokenize = "none";
    const warnings: string[] = [];
    const plain = await createRemotePolicy({ url: peer.url, log: (m) => warnings.push(m) });
    try {
      const t = await plain.start(plain.renderChat(MESSAGES));
      expect(t.promptTokens).toEqual([]);
      expect(warnings.join("\n")).toMatch(/tokenize answered HTTP 404/);
      const first = await t.generate({ stop: ["</intermediate_sql>"], maxTokens: 200, grammar: exactTextGrammar(PROBE), seed: 1 });
      expect(first.text).toBe(PROBE);
      expect(t.usage.promptTokens).toBeGreaterThan(10);
      expect(await t.append(resultBlock("x"))).toEqual({ tokens: [] });
      await t.generate({ stop: [], maxTokens: 3, temperature: 0 });
      const sent = peer.completions.at(-1)!.prompt;
      expect(typeof sent).toBe("string");
      expect(sent).toBe(plain.renderChat(MESSAGES).prefix + plain.renderChat(MESSAGES).suffix + PROBE + resultBlock("x"));
      expect(t.record.sampled.every((s) => s === 1)).toBe(true);
      await t.release();
    } finally {
      peer.behaviour.tokenize = "llama";
      await plain.close();
    }
  });

  it("detects a vLLM-style /tokenize", async () => {
    peer.behaviour.tokenize = "vllm";
    const v = await createRemotePolicy({ url: peer.url });
    try {
      const t = await v.start(v.renderChat(MESSAGES));
      expect(t.promptTokens.length).toBeGreaterThan(10);
      expect(peer.policy.detokenize(t.promptTokens)).toBe(v.renderChat(MESSAGES).prefix + v.renderChat(MESSAGES).suffix);
      await t.release();
    } finally {
      peer.behaviour.tokenize = "llama";
      await v.close();
    }
  });

  it("start waits while maxSequences trajectories live; fork fails with CONTEXT_EXHAUSTED", async () => {
    const two = await createRemotePolicy({ url: peer.url, maxSequences: 2 });
    try {
      const spec = two.renderChat(MESSAGES);
      const a = await two.start(spec);
      const b = await two.start(spec);
      expect(await errorOf(a.fork())).toMatchObject({ code: "CONTEXT_EXHAUSTED" });
      let started = false;
      const c = two.start(spec).then((t) => {
        started = true;
        return t;
      });
      await new Promise((r) => setTimeout(r, 50));
      expect(started).toBe(false);
      await a.release();
      const ct = await c;
      expect(two.liveTrajectories()).toBe(2);
      const controller = new AbortController();
      const d = errorOf(two.start(spec, { signal: controller.signal }));
      controller.abort();
      expect(await d).toMatchObject({ code: "CANCELLED" });
      await Promise.all([b.release(), ct.release()]);
      expect(two.liveTrajectories()).toBe(0);
    } finally {
      await two.close();
    }
  });

  it("tokenize/detokenize are synchronous: from the cache, or one blocking round trip to a peer in another process", async () => {
    // "<|im_end|>\n<|im_start|>user\n" was tokenised (control tokens recognised, no BOS) by every start: a cache hit.
    // (A miss here would block this thread, which also serves the in-process peer, until the timeout.)
    const header = policy.renderChat(MESSAGES).parts!.prefix[2]!;
    expect(header.special).toBe(true);
    expect(policy.tokenize(header.text)).toEqual(peer.policy.tokenize(header.text));
    const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("../helpers/openai-peer.ts", import.meta.url))], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        const rl = createInterface({ input: child.stdout! });
        rl.once("line", resolve);
        child.once("exit", (code) => reject(new Error(`peer exited with ${code}`)));
      });
      const { url } = JSON.parse(line) as { url: string };
      const remote = await createRemotePolicy({ url });
      try {
        const text = "SELECT name FROM customers WHERE city = 'Lyon'<|im_end|>";
        const ids = remote.tokenize(text);
        expect(ids).toEqual(peer.policy.tokenize(text));
        expect(remote.detokenize(ids)).toBe(text);
      } finally {
        await remote.close();
      }
    } finally {
      child.kill("SIGTERM");
    }
  });

  it("runs a whole ReEx rollout through the remote policy: probe executed on SQLite, result injected, final SQL", async () => {
    const dbPath = makeShopDb(join(dir, "shop-rollout.sqlite"));
    const executor = new ExecutorPool({ workers: 1 });
    try {
      const built = buildPrompt({ family: "execution-aware", schema: renderSchema(loadSchema(dbPath)), question: "How many customers live in Lyon?" });
      const probe = "<think>Check the cities.</think>\n<intermediate_sql>SELECT DISTINCT city FROM customers</intermediate_sql>";
      const final = "<think>Lyon is there.</think>\n<final_sql>SELECT count(*) FROM customers WHERE city = 'Lyon'</final_sql>";
      const grammar = { first: exactTextGrammar(probe), segment: exactTextGrammar(final), finalBody: exactTextGrammar("SELECT 1</final_sql>") };
      const r = await runRollout(policy, built, resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, grammar, maxTokens: 300, seed: 1 }));
      expect(r.stopReason).toBe("final");
      expect(r.probes).toHaveLength(1);
      expect(r.probes[0]!.result?.ok).toBe(true);
      expect(r.finalSql).toBe("SELECT count(*) FROM customers WHERE city = 'Lyon'");
      const zeros = r.record.sampled.filter((s) => s === 0).length;
      expect(zeros).toBeGreaterThan(0);
      expect(r.record.tokens.every((id) => id >= 0)).toBe(true);
      expect(peer.policy.detokenize(r.record.tokens)).toBe(r.text);
      expect(r.promptTokens.length).toBeGreaterThan(50);
      expect(r.usage.generatedTokens).toBe(r.record.sampled.filter((s) => s === 1).length);
      expect(policy.liveTrajectories()).toBe(0);
    } finally {
      await executor.close();
    }
  });

  it("a linear-3 decode through createDecoder: three candidates executed and voted", async () => {
    const dbPath = makeShopDb(join(dir, "shop-decode.sqlite"));
    const executor = new ExecutorPool({ workers: 2 });
    const decode = createDecoder({
      policy,
      executor,
      promptOptions: { indexDir: join(dir, "indexes") },
      grammarFor: () => choiceGrammars(SHOP_PROBES, SHOP_FINALS),
    });
    try {
      const log = eventLog();
      const answer = await decode(
        {
          dbPath,
          question: "How many customers live in Lyon?",
          constrained: true,
          maxInteractions: 3,
          maxTokens: 400,
          seed: 5,
          strategy: "linear",
          candidates: 3,
        },
        { sink: log.sink },
      );
      expect(answer.candidates.length).toBe(3);
      for (const c of answer.candidates) {
        expect(SHOP_FINALS).toContain(c.sql);
        expect(c.result).toBeDefined();
      }
      expect(answer.sql).toBe(answer.candidates[answer.winner!]!.sql);
      expect(answer.usage.generatedTokens).toBeGreaterThan(0);
      expect(log.of("final")).toHaveLength(1);
      expect(log.of("token").length).toBeGreaterThan(0);
      expect(policy.liveTrajectories()).toBe(0);
    } finally {
      decode.close();
      await executor.close();
    }
  });
});

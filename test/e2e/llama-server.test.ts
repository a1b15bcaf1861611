/**
 * reex with `policy.backend=remote` against a real serving engine: llama.cpp's llama-server, built
 * from the source node-llama-cpp ships (test/helpers/llama-tools.ts builds it on first use, several
 * minutes, and the build is cached outside the clone), serving small random-weight GGUFs with real
 * architectures and real tokenizers and chat templates (test/helpers/real-models.ts). The runtime is
 * built from a parsed config behind the real fastify server on a real port.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { detectProfile } from "../../src/agent/testing.js";
import { parseConfig } from "../../src/config/index.js";
import { createRemotePolicy, type Policy, type Trajectory } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { createRuntime, type Runtime } from "../../src/runtime/index.js";
import { startServer, type RunningServer } from "../../src/server/index.js";
import { ensureLlamaTools, startLlamaServer, type LlamaServer, type LlamaTools } from "../helpers/llama-tools.js";
import { buildRealModel, readGgufMetadata } from "../helpers/real-models.js";

/** The first build took 11 minutes on a shared 2-core machine; later runs reuse it. */
const BUILD_TIMEOUT_MS = 25 * 60_000;

let tools: LlamaTools;

beforeAll(async () => {
  tools = await ensureLlamaTools();
}, BUILD_TIMEOUT_MS);

/** llama-server's own count of prompt tokens it evaluated (cache hits excluded), from `/metrics`. */
async function promptTokensProcessed(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = /^llamacpp:prompt_tokens_total (\S+)$/m.exec(text);
  if (!m) throw new Error(`no llamacpp:prompt_tokens_total in ${url}/metrics:\n${text.slice(0, 500)}`);
  return Number(m[1]);
}

/** reex's runtime on the remote backend against `llamaUrl`, behind the real server on a free port; `close` undoes it all. */
async function serveRemote(llamaUrl: string, agent: Record<string, number> = {}): Promise<{ runtime: Runtime; server: RunningServer; close(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), "reex-llama-server-"));
  const config = parseConfig({
    server: { port: 0, logLevel: "silent" },
    sql: { dataDir },
    policy: { backend: "remote", remoteUrl: `${llamaUrl}/v1`, remoteTimeoutMs: 60_000 },
    agent,
  });
  const runtime = await createRuntime(config);
  const server = await startServer(config, runtime);
  return {
    runtime,
    server,
    async close() {
      await server.close();
      await runtime.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

interface SqlBody {
  sql: string | null;
  candidates: { sql: string | null; path: string; error?: string }[];
  usage: { promptTokens: number; evaluatedTokens: number; generatedTokens: number };
  trace?: { type: string }[];
}

describe("reex on the remote backend, served by llama-server (qwen2 architecture, Qwen2 tokenizer, ChatML)", () => {
  let llama: LlamaServer;
  let runtime: Runtime;
  let server: RunningServer;
  let served: Awaited<ReturnType<typeof serveRemote>> | undefined;
  let model: string;

  beforeAll(async () => {
    model = await buildRealModel("qwen2");
    // 4 slots of 4096 tokens; one thread, as the machine's other tests need the second core.
    llama = await startLlamaServer(tools.server, model, ["-c", "16384", "-np", "4", "-t", "1", "-tb", "1", "--metrics"]);
    served = await serveRemote(llama.url, { maxTokens: 400, finalReserve: 200, maxInteractions: 2 });
    ({ runtime, server } = served);
  }, 120_000);

  afterAll(async () => {
    await served?.close();
    await llama?.close();
  });

  const ask = async (body: Record<string, unknown>): Promise<{ status: number; body: SqlBody }> => {
    const res = await fetch(`${server.url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "retail", question: "How many customers are there?", seed: 7, ...body }),
    });
    return { status: res.status, body: (await res.json()) as SqlBody };
  };

  it("reads the served model off llama-server: its file, its context window and its chat template", async () => {
    const info = runtime.policy.info;
    expect(info.backend).toBe("remote");
    expect(info.model).toBe(model);
    expect(info.contextSize).toBe(4096);
    const gguf = await readGgufMetadata(model);
    expect(info.metadata?.file).toBe(basename(model));
    expect(info.metadata?.chatTemplate).toBe(gguf.get("tokenizer.chat_template")?.value);
    const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { status: string; policy: { backend: string } };
    expect(ready).toMatchObject({ status: "ready", policy: { backend: "remote" } });
  });

  it("answers a greedy request over HTTP: one candidate, tokens generated, every sequence freed", async () => {
    const { status, body } = await ask({ strategy: "greedy", maxTokens: 48, includeTrace: true });
    expect(status).toBe(200);
    expect(body.candidates).toHaveLength(1);
    expect(body.usage.promptTokens).toBeGreaterThan(100);
    expect(body.usage.generatedTokens).toBeGreaterThan(0);
    expect(body.trace?.at(-1)?.type).toBe("final");
    expect(runtime.policy.liveTrajectories()).toBe(0);
  });

  it("answers a tree-prune request: forked branches share the prompt, so far fewer tokens are evaluated than sent", async () => {
    const { status, body } = await ask({ strategy: "tree-prune", candidates: 4, branching: 2, temperature: 1, maxTokens: 48, includeTrace: true });
    expect(status).toBe(200);
    expect(body.candidates.length).toBeGreaterThan(1);
    expect(new Set(body.candidates.map((c) => c.path)).size).toBe(body.candidates.length);
    // Every trajectory of the tree sent the whole prompt. Siblings that run at once land on different
    // slots, so some re-evaluate it (measured: 2 of 5 on a fresh server, 1 of 5 once warm); most do not.
    const trajectories = (body.trace ?? []).filter((e) => e.type === "branch").length;
    expect(trajectories).toBeGreaterThan(2);
    expect(body.usage.evaluatedTokens - body.usage.generatedTokens).toBeLessThan(0.5 * trajectories * body.usage.promptTokens);
    expect(runtime.policy.liveTrajectories()).toBe(0);
  });

  it("answers a constrained request: llama-server applies the grammar, so every probe and the final SQL are SELECT statements", async () => {
    // Random weights never choose to answer: the grammar closes each segment, and the reserve forces <final_sql>.
    const { status, body } = await ask({ strategy: "greedy", constrained: true, maxTokens: 400, includeTrace: true });
    expect(status).toBe(200);
    const probes = (body.trace ?? []).filter((e) => e.type === "probe") as unknown as { sql: string }[];
    expect(probes.length).toBeGreaterThan(0);
    for (const p of probes) expect(p.sql).toMatch(/^\s*(SELECT|WITH)\b/i);
    expect(body.candidates).toHaveLength(1);
    expect(body.candidates[0]!.sql ?? "").toMatch(/^\s*(SELECT|WITH)\b/i);
    // 400 tokens behind a grammar over a 152k vocabulary: over 60 s on a slow shared machine
  }, 240_000);

  it("prefix reuse shows in llama-server's own counters: a trajectory's second request and a fork's first evaluate few of the tokens they send", async () => {
    const policy = runtime.policy;
    const spec = policy.renderChat([
      { role: "system", content: `You write SQLite queries.\n${"Table customers(id INTEGER, name TEXT, city TEXT, joined DATE). ".repeat(20)}` },
      { role: "user", content: "How many customers are there?" },
    ]);
    const t = await policy.start(spec);
    const forks: Trajectory[] = [];
    try {
      let before = await promptTokensProcessed(llama.url);
      const first = await t.generate({ stop: [], maxTokens: 8, temperature: 0 });
      // The server had not seen this prompt: it evaluated all of it, and the trajectory counts what the server reported.
      const firstProcessed = (await promptTokensProcessed(llama.url)) - before;
      expect(firstProcessed).toBeGreaterThan(t.promptTokens.length * 0.9);
      expect(t.usage.evaluatedTokens).toBe(firstProcessed + first.tokens.length);

      await t.append("<result>\ncount\n42\n</result>\n");
      const sent = t.promptTokens.length + t.record.tokens.length;
      expect(sent).toBeGreaterThan(300);
      const afterFirst = t.usage.evaluatedTokens;
      before = await promptTokensProcessed(llama.url);
      const second = await t.generate({ stop: [], maxTokens: 8, temperature: 0 });
      const secondProcessed = (await promptTokensProcessed(llama.url)) - before;
      expect(secondProcessed).toBeLessThan(sent * 0.1);
      expect(t.usage.evaluatedTokens - afterFirst).toBe(secondProcessed + second.tokens.length);

      const fork = await t.fork();
      forks.push(fork);
      before = await promptTokensProcessed(llama.url);
      const branch = await fork.generate({ stop: [], maxTokens: 8, temperature: 1, seed: 3 });
      const forkProcessed = (await promptTokensProcessed(llama.url)) - before;
      expect(forkProcessed).toBeLessThan(sent * 0.1);
      expect(fork.usage.evaluatedTokens).toBe(forkProcessed + branch.tokens.length);
    } finally {
      for (const f of forks) await f.release();
      await t.release();
    }
  });

  it("generates to a stop string that llama-server leaves out of its text, with ids and logprobs; append and continue", async () => {
    const policy = runtime.policy;
    const probe = "SELECT COUNT(*) FROM customers";
    const t = await policy.start(
      policy.renderChat([
        { role: "system", content: "Answer in SQL." },
        { role: "user", content: "Count the customers." },
      ]),
    );
    try {
      const streamed: string[] = [];
      const r = await t.generate({
        stop: ["</sql>"],
        maxTokens: 64,
        grammar: exactTextGrammar(`${probe}</sql> tail`),
        seed: 1,
        onText: (s) => streamed.push(s),
      });
      expect(r.stopReason).toBe("stop");
      expect(r.stop).toBe("</sql>");
      expect(r.text).toBe(`${probe}</sql>`);
      expect(streamed.join("")).toBe(r.text);
      expect(r.tokens.length).toBe(r.logprobs.length);
      expect(r.tokens.every((id) => id >= 0)).toBe(true);
      expect(r.logprobs.every((l) => Number.isFinite(l) && l <= 0)).toBe(true);
      expect(policy.detokenize(r.tokens)).toBe(r.text);
      const appended = await t.append("<result>\ncount\n3\n</result>");
      expect(appended.tokens.length).toBeGreaterThan(3);
      const next = await t.generate({ stop: [], maxTokens: 6, temperature: 0 });
      expect(next.tokens.length).toBeGreaterThan(0);
      expect(t.usage.generatedTokens).toBe(r.tokens.length + next.tokens.length);
    } finally {
      await t.release();
    }
  });
});

describe("the remote backend takes its profile and chat template from what llama-server reports (llama3 tokenizer and template)", () => {
  let llama: LlamaServer;
  let remote: Policy;
  let model: string;

  beforeAll(async () => {
    model = await buildRealModel("llama3");
    llama = await startLlamaServer(tools.server, model, ["-c", "2048", "-np", "1", "-t", "1", "-tb", "1", "--alias", "OmniSQL-7B"]);
    remote = await createRemotePolicy({ url: `${llama.url}/v1`, timeoutMs: 30_000 });
  }, 120_000);

  afterAll(async () => {
    await remote?.close();
    await llama?.close();
  });

  it("detects the profile from the served model id (an alias of the file), with the file and template alongside", async () => {
    expect(remote.info.model).toBe("OmniSQL-7B");
    expect(remote.info.metadata).toMatchObject({ name: "OmniSQL-7B", file: basename(model) });
    expect(remote.info.metadata?.chatTemplate).toBe((await readGgufMetadata(model)).get("tokenizer.chat_template")?.value);
    const choice = detectProfile(remote.info.metadata ?? {});
    expect(choice.profile.id).toBe("omnisql");
    expect(choice.reason).toContain("OmniSQL-7B");
  });

  it("renders prompts with the model's own template as llama-server applies it, BOS left to the tokenizer", async () => {
    const messages = [
      { role: "system" as const, content: "You write SQL." },
      { role: "user" as const, content: "How many customers? <|eot_id|>" },
    ];
    const spec = remote.renderChat(messages);
    const applied = (await (await fetch(`${llama.url}/apply-template`, { method: "POST", body: JSON.stringify({ messages }) })).json()) as { prompt: string };
    expect(applied.prompt.endsWith(spec.prefix + spec.suffix)).toBe(true);
    expect(spec.prefix + spec.suffix).toContain("<|start_header_id|>user<|end_header_id|>");
    expect(spec.prefix + spec.suffix).not.toContain("<|begin_of_text|>");
    // The user's text stays plain: its <|eot_id|> spelling cannot end the turn.
    const t = await remote.start(spec);
    try {
      const eot = remote.tokenize("<|eot_id|>");
      expect(eot).toHaveLength(1);
      const ids = t.promptTokens;
      const spelled = (spec.prefix + spec.suffix).split("<|eot_id|>").length - 1;
      expect(ids.filter((id) => id === eot[0]).length).toBe(spelled - 1); // the template's own, not the user's
      expect(ids[0]).toBe(remote.tokenize("<|begin_of_text|>")[0]); // BOS once, added by the tokenizer
      expect(ids.filter((id) => id === ids[0]).length).toBe(1);
    } finally {
      await t.release();
    }
  });

  it("a configured chat template overrides the server's", async () => {
    const custom = await createRemotePolicy({ url: `${llama.url}/v1`, timeoutMs: 30_000, chatTemplate: "S: {system}\nU: {user}\nA: " });
    try {
      const spec = custom.renderChat([
        { role: "system", content: "You write SQL." },
        { role: "user", content: "How many customers?" },
      ]);
      expect(spec.prefix + spec.suffix).toBe("S: You write SQL.\nU: How many customers?\nA: ");
    } finally {
      await custom.close();
    }
  });
});

describe("the shipped Q8_0 starter served by llama-server: the portable build computes on a quantised model", () => {
  const STARTER = new URL("../../models/reex-starter.gguf", import.meta.url).pathname;
  let llama: LlamaServer;
  let server: RunningServer;
  let served: Awaited<ReturnType<typeof serveRemote>> | undefined;

  beforeAll(async () => {
    llama = await startLlamaServer(tools.server, STARTER, ["-c", "8192", "-np", "2", "-t", "1", "-tb", "1"]);
    served = await serveRemote(llama.url);
    server = served.server;
  }, 120_000);

  afterAll(async () => {
    await served?.close();
    await llama?.close();
  });

  it("loads the Q8_0 tensors and answers the README's clinic question over reex's REST API with probes and a final SQL", async () => {
    // llama.cpp's file type 7 is MOSTLY_Q8_0
    expect((await readGgufMetadata(STARTER)).get("general.file_type")?.value).toBe(7);
    const res = await fetch(`${server.url}/v1/sql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ database: "clinic", question: "How many doctors specialise in dermatology?", strategy: "greedy", includeTrace: true }),
    });
    const body = (await res.json()) as SqlBody & { result: { rows: unknown[][] } | null };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.usage.generatedTokens).toBeGreaterThan(10);
    expect(body.sql).toMatch(/^SELECT /i);
    expect(body.trace?.some((e) => e.type === "probe")).toBe(true);
    expect(llama.output()).not.toMatch(/general protection|illegal instruction|segmentation fault/i);
  }, 180_000);
});

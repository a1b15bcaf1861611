/**
 * Every profile on the real tokenizers and chat templates of Qwen2/2.5 (the base of SkyRL-SQL,
 * OmniSQL, XiYan and Arctic-R1), Qwen3, Llama 3 and Gemma, through the real node-llama-cpp runtime
 * with small random-weight GGUFs of the real architectures (test/helpers/real-models.ts).
 *
 * The text is never left to luck: the tag tests use "longest-token" weights (each token scores its
 * own length at every position) under an exact-text grammar, so greedy decoding writes the profile's
 * text in the longest tokens the vocabulary allows, a fixed token stream in which tags are split and
 * merged with their neighbours; the constrained test samples the random weights under the profile's
 * schema grammar.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { Template } from "@huggingface/jinja";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  PROFILES,
  buildSegmentGrammars,
  runRollout,
  type ModelProfile,
  type ProfileId,
  type SegmentGrammars,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../src/agent/index.js";
import { wrapFeedback } from "../../src/agent/testing.js";
import { createLlamaPolicy, type Policy } from "../../src/policy/index.js";
import { exactTextGrammar } from "../../src/policy/testing.js";
import { ExecutorPool } from "../../src/sql/index.js";
import { REAL_MODEL_NAMES, REAL_MODELS, buildRealModel, readGgufMetadata, type RealModelName } from "../helpers/real-models.js";

const SCHEMA = "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER);";
const QUESTION = "How many singers are from France?";
const PROBE_SQL = "SELECT name, age FROM singer WHERE country = 'France'";
const FINAL_SQL = "SELECT COUNT(*) FROM singer WHERE country = 'France'";

/**
 * Which profiles each tokenizer samples under its schema grammar: every profile on at least two
 * tokenizers (a grammar-constrained step scans the whole 128k–262k vocabulary, about 0.1 s a token
 * on a 2-core CPU, so all twenty pairs would take minutes).
 */
const CONSTRAINED: Readonly<Record<RealModelName, readonly ProfileId[]>> = {
  qwen2: ["skyrl-sql", "omnisql", "generic"],
  qwen3: ["think-answer", "reex", "omnisql"],
  llama3: ["generic", "skyrl-sql", "think-answer"],
  gemma: ["reex", "skyrl-sql"],
};

let dir: string;
let dbPath: string;
let executor: ExecutorPool;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "reex-real-tokenizers-"));
  dbPath = join(dir, "concerts.sqlite");
  const db = new Database(dbPath);
  db.exec(`${SCHEMA} INSERT INTO singer VALUES (1, 'Ann', 'France', 31), (2, 'Bob', 'France', 42), (3, 'Cid', 'Spain', 19);`);
  db.close();
  executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
});

afterAll(async () => {
  await executor?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function promptOf(profile: ModelProfile) {
  return profile.buildPrompt({ family: profile.families[0]!, schema: SCHEMA, question: QUESTION, evidence: "French means country = 'France'" });
}

/** What the profile's model writes to probe: a think when the protocol has one, then the probe. */
function probeText(p: ModelProfile): string {
  return `${p.think ? `${p.think.open}Which singers are French?${p.think.close}\n` : ""}${p.probe!.open}${PROBE_SQL}${p.probe!.close}\n`;
}

/** What the profile's model writes to answer. */
function finalText(p: ModelProfile): string {
  const think = p.think ? `${p.think.open}Two of them.${p.think.close}\n` : "Two of them.\n";
  return `${think}${p.answer.open}${FINAL_SQL}${p.answer.open.endsWith("\n") ? "\n" : ""}${p.answer.close}`;
}

/** Character spans of each token of a record, by decoding token prefixes. */
function tokenSpans(policy: Policy, tokens: readonly number[]): { start: number; end: number; text: string }[] {
  const spans: { start: number; end: number; text: string }[] = [];
  let before = "";
  for (let i = 0; i < tokens.length; i++) {
    const upTo = policy.detokenize(tokens.slice(0, i + 1));
    spans.push({ start: before.length, end: upTo.length, text: upTo.slice(before.length) });
    before = upTo;
  }
  return spans;
}

/** Tags (by their text span) that no single token holds whole, and tokens that hold part of a tag and text outside it. */
function tagTokenisation(text: string, spans: { start: number; end: number; text: string }[], tags: string[]) {
  const split: string[] = [];
  const merged: string[] = [];
  for (const tag of new Set(tags)) {
    for (let at = text.indexOf(tag); at >= 0; at = text.indexOf(tag, at + 1)) {
      const end = at + tag.length;
      const covering = spans.filter((s) => s.end > at && s.start < end);
      if (covering.length > 1) split.push(tag);
      for (const s of covering) if (s.start < at || s.end > end) merged.push(JSON.stringify(s.text));
    }
  }
  return { split, merged };
}

describe.each(REAL_MODEL_NAMES)("profiles on the real %s tokenizer", (name: RealModelName) => {
  let policy: Policy;
  let longest: Policy;
  let template: Template;
  let bos: { id: number; text: string };

  beforeAll(async () => {
    const [randomPath, longestPath] = await Promise.all([buildRealModel(name), buildRealModel(name, { weights: "longest-token" })]);
    const meta = await readGgufMetadata(randomPath);
    template = new Template(String(meta.get("tokenizer.chat_template")!.value));
    const id = Number(meta.get("tokenizer.ggml.bos_token_id")!.value);
    bos = { id, text: (meta.get("tokenizer.ggml.tokens")!.value as string[])[id]! };
    const options = { gpu: "cpu" as const, contextSize: 4096, sequences: 4, threads: 1 };
    policy = await createLlamaPolicy({ ...options, model: randomPath });
    longest = await createLlamaPolicy({ ...options, model: longestPath });
    // the first run builds two models per vocabulary (gemma's has 262k tokens): past the 120 s hook default on a busy 2-core machine
  }, 300_000);

  afterAll(async () => {
    await policy?.close();
    await longest?.close();
  });

  it(`renders each profile's prompt as ${REAL_MODELS[name].template === "vocab" ? "its GGUF's" : "its"} chat template does: the same turn markers, BOS once, the template once`, async () => {
    for (const profile of PROFILES) {
      const built = promptOf(profile);
      const spec = policy.renderChat(built.messages, { sharedPrefix: built.sharedPrefix });
      const expected = template.render({ messages: built.messages, add_generation_prompt: true, bos_token: bos.text, eos_token: "" });
      expect(spec.prefix + spec.suffix, profile.id).toBe(expected);
      expect(spec.prefix.endsWith(built.sharedPrefix), profile.id).toBe(true);
      const trajectory = await policy.start(spec);
      try {
        expect(trajectory.promptTokens, profile.id).toEqual(policy.tokenize(expected));
        const bosCount = trajectory.promptTokens.filter((t) => t === bos.id).length;
        expect(bosCount, profile.id).toBe(expected.startsWith(bos.text) ? 1 : 0);
        if (bosCount === 1) expect(trajectory.promptTokens[0]).toBe(bos.id);
      } finally {
        await trajectory.release();
      }
    }
  });

  it("finds probe and final tags that the vocabulary splits and merges with neighbouring text, and masks exactly the injected feedback tokens", async () => {
    const seen = { split: 0, merged: new Set<string>() };
    for (const profile of PROFILES) {
      const family = profile.families[0]!;
      const probing = family === "execution-aware" && profile.probe !== undefined;
      const grammar: SegmentGrammars = {
        first: exactTextGrammar(probing ? probeText(profile) : finalText(profile)),
        segment: exactTextGrammar(finalText(profile)),
        finalBody: exactTextGrammar(`${FINAL_SQL}${profile.answer.close}`),
      };
      const r = await runRollout(
        longest,
        promptOf(profile),
        resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath, profile, family, grammar, maxTokens: 200 }),
      );
      // a tag answer stops at its closing tag; a fenced one (OmniSQL) at the end of the turn
      expect(r.stopReason, profile.id).toBe(profile.answer.open.startsWith("<") ? "final" : "end");
      expect(r.finalSql, profile.id).toBe(FINAL_SQL);
      // a turn that ended on end-of-turn holds that control token last; the text decodes it to ""
      expect(longest.detokenize(r.stopReason === "end" ? r.record.tokens.slice(0, -1) : r.record.tokens), profile.id).toBe(r.text);
      expect(profile.formatCheck(r.text, family), profile.id).toEqual({ ok: true, problems: [] });

      const tags = [profile.answer.open, profile.answer.close, ...(profile.think ? [profile.think.open, profile.think.close] : [])];
      if (probing) {
        expect(
          r.probes.map((p) => p.sql),
          profile.id,
        ).toEqual([PROBE_SQL]);
        expect(r.probes[0]!.result?.ok, profile.id).toBe(true);
        tags.push(profile.probe!.open, profile.probe!.close);
        const injected = longest.tokenize(wrapFeedback(r.probes[0]!.feedback, profile.feedback));
        const first = r.record.sampled.indexOf(0);
        const zeros = r.record.sampled.filter((s) => s === 0).length;
        expect(zeros, profile.id).toBe(injected.length);
        expect(r.record.tokens.slice(first, first + injected.length), profile.id).toEqual(injected);
        expect(
          r.record.logprobs.slice(first, first + injected.length).every((l) => l === 0),
          profile.id,
        ).toBe(true);
        expect(
          r.record.sampled.slice(first + injected.length).every((s) => s === 1),
          profile.id,
        ).toBe(true);
      } else {
        expect(
          r.record.sampled.every((s) => s === 1),
          profile.id,
        ).toBe(true);
      }
      const { split, merged } = tagTokenisation(
        r.text,
        tokenSpans(longest, r.record.tokens),
        tags.filter((t) => t.trim().length > 1),
      );
      seen.split += split.length;
      for (const m of merged) seen.merged.add(m);
    }
    // the premise: the vocabulary really did split tags across tokens and merge them with neighbours
    expect(seen.split).toBeGreaterThan(0);
    expect([...seen.merged].length).toBeGreaterThan(0);
  });

  it("a KV fork continues token for token as its parent and as a sequence that evaluated everything itself", async () => {
    const built = promptOf(PROFILES.find((p) => p.id === "skyrl-sql")!);
    const spec = policy.renderChat(built.messages, { sharedPrefix: built.sharedPrefix });
    const feedback = wrapFeedback("   name  age\n0   Ann   31\n1   Bob   42", { open: "<observation>", close: "</observation>" });
    const greedy = { stop: [], maxTokens: 12, ignoreEos: true, temperature: 0 };
    const parent = await policy.start(spec);
    const fresh = await policy.start(spec);
    try {
      await parent.append(feedback);
      const head = await parent.generate({ ...greedy, maxTokens: 4 });
      const child = await parent.fork();
      try {
        const [a, b] = [await parent.generate(greedy), await child.generate(greedy)];
        expect(b.tokens).toEqual(a.tokens);
        expect(b.text).toBe(a.text);
        expect(child.usage.evaluatedTokens).toBeLessThanOrEqual(greedy.maxTokens + 1);
        await fresh.append(feedback);
        const c = await fresh.generate({ ...greedy, maxTokens: 4 + greedy.maxTokens });
        expect(c.tokens).toEqual([...head.tokens, ...a.tokens]);
      } finally {
        await child.release();
      }
    } finally {
      await parent.release();
      await fresh.release();
    }
  });

  it(`constrained decoding writes ${CONSTRAINED[name].join(" and ")} syntax, well-formed, with the real vocabulary`, { timeout: 240_000 }, async () => {
    const names = { tables: [{ name: "singer", columns: ["singer_id", "name", "country", "age"] }] };
    for (const [i, profile] of PROFILES.filter((p) => CONSTRAINED[name].includes(p.id)).entries()) {
      const family = profile.families[0]!;
      const grammar = buildSegmentGrammars(names, family, { skeleton: profile, maxThinkBytes: 24 });
      const r = await runRollout(
        policy,
        promptOf(profile),
        resolveRolloutOptions({
          ...OWN_ANSWERS,
          executor,
          dbPath,
          profile,
          family,
          grammar,
          temperature: 1,
          seed: 10 + i,
          maxInteractions: 1,
          maxTokens: 400,
          // what is checked is the syntax; a log-probability under a grammar costs a sort of the whole vocabulary per token
          logprobs: false,
        }),
      );
      expect(r.stopReason, `${profile.id}: ${r.text}`).toBe(profile.answer.open.startsWith("<") ? "final" : "end");
      // the answer is SQL, or, where the profile allows it, a declared UNANSWERABLE
      expect(r.finalSql !== null || (profile.unanswerable && !r.answerable), `${profile.id}: ${r.text}`).toBe(true);
      expect(profile.formatCheck(r.text, family), `${profile.id}: ${r.text}`).toEqual({ ok: true, problems: [] });
    }
  });
});

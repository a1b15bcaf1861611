import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getLlama, type Llama, type LlamaGrammar } from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  buildSegmentGrammars,
  checkIdentifiers,
  extractFinal,
  formatCheck,
  formatFeedback,
  normalizeSql,
  runRollout,
  segments,
  type SchemaNames,
  OWN_ANSWERS,
  resolveRolloutOptions,
} from "../../../src/agent/index.js";
import { unwrapSql } from "../../../src/agent/testing.js";
import { createPromptBuilder } from "../../../src/decoding/index.js";
import type { PromptFamily } from "../../../src/decoding/types.js";
import { ScriptedPolicy } from "../../../src/policy/tooling.js";
import { executeDirect, loadSchema, type Executor } from "../../../src/sql/index.js";
import { generateSynth, synthDbPath, type SftRecord, type SynthResult } from "../../../lab/synth/index.js";
import { MAX_TRACE_PROBES, SYNTH_FILES, TRACE_FAMILIES, type SynthItem } from "../../../lab/synth/testing.js";

let dir: string;
let built: SynthResult;
let records: SftRecord[];
let items: Map<string, SynthItem>;

const key = (dbId: string, qid: number): string => `${dbId}#${qid}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "reex-synth-traces-"));
  built = generateSynth(dir, { seed: 11, dbs: 12 });
  records = readFileSync(join(dir, SYNTH_FILES.traces), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as SftRecord);
  items = new Map(built.train.map((q) => [key(q.db_id, q.question_id), q]));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function names(dbPath: string): SchemaNames {
  return { tables: loadSchema(dbPath).tables.map((t) => ({ name: t.name, columns: t.columns.map((c) => c.name) })) };
}

/** The probe / result pairs of a response, in order. */
function probeRounds(response: string): { sql: string; result: string; adjacent: boolean }[] {
  const segs = segments(response);
  const out: { sql: string; result: string; adjacent: boolean }[] = [];
  segs.forEach((s, i) => {
    if (s.kind !== "intermediate_sql") return;
    const next = segs[i + 1];
    expect(next?.kind).toBe("result");
    out.push({ sql: unwrapSql(s.content), result: next!.content, adjacent: next!.start === s.end });
  });
  return out;
}

describe("SFT traces", () => {
  it("has three records per train item, in family order, and none for dev", () => {
    expect(records.length).toBe(3 * built.train.length);
    expect(built.traces).toBe(records.length);
    for (let i = 0; i < built.train.length; i++) {
      const q = built.train[i]!;
      expect(records.slice(3 * i, 3 * i + 3).map((r) => [r.db_id, r.question_id, r.family])).toEqual(TRACE_FAMILIES.map((f) => [q.db_id, q.question_id, f]));
    }
    const devDbs = new Set(built.dev.map((q) => q.db_id));
    expect(records.some((r) => devDbs.has(r.db_id))).toBe(false);
  });

  it("passes formatCheck and ends in the gold SQL", () => {
    for (const r of records) {
      const verdict = formatCheck(r.response, r.family);
      expect(verdict.problems, r.response).toEqual([]);
      const item = items.get(key(r.db_id, r.question_id))!;
      const final = extractFinal(r.response);
      expect(final.source).toBe("final_sql");
      expect(final.sql).toBe(item.SQL);
      for (const s of segments(r.response)) if (s.kind === "think") expect(s.content).not.toContain("<");
    }
  });

  it("prompts with the server's prompt for the question: the whole schema text and the values it matches", async () => {
    const server = createPromptBuilder({ indexDir: join(dir, "server-indexes") });
    try {
      for (const r of records.filter((_, i) => i % 7 === 0)) {
        const item = items.get(key(r.db_id, r.question_id))!;
        const served = await server.promptFor(synthDbPath(dir, r.db_id), item.question, item.evidence, r.family);
        expect(r.messages).toEqual(served.messages);
      }
    } finally {
      server.close();
    }
    const matched = records.filter((r) => r.messages[1]!.content.includes("\nMatched values:\n")).length;
    expect(matched / records.length).toBeGreaterThan(0.3);
    expect(readdirSync(dir)).not.toContain(".trace-indexes");
  });

  it("execution-aware traces run 1-3 distinct probes (one more when one is misnamed) whose <result> blocks equal a fresh execution formatted like the server", () => {
    let total = 0;
    for (const r of records.filter((x) => x.family === "execution-aware")) {
      const path = synthDbPath(dir, r.db_id);
      const rounds = probeRounds(r.response);
      const errors = rounds.filter((p) => p.result.startsWith("\nError"));
      expect(rounds.length).toBeGreaterThanOrEqual(1);
      expect(rounds.length - errors.length).toBeLessThanOrEqual(MAX_TRACE_PROBES);
      expect(errors.length).toBeLessThanOrEqual(1);
      expect(new Set(rounds.map((p) => normalizeSql(p.sql))).size).toBe(rounds.length);
      for (const p of rounds) {
        const fresh = formatFeedback(executeDirect(path, p.sql), { mode: "full", rows: 3, schema: loadSchema(path) }, p.sql);
        expect(p.result).toBe(`\n${fresh}\n`);
        expect(p.adjacent).toBe(true); // the server appends the block right after </intermediate_sql>
        total++;
      }
    }
    expect(total).toBeGreaterThan(records.length / 3);
  });

  it("misnames a column in about a third of the traces, shows the real columns and corrects the name in the next probe", () => {
    const aware = records.filter((x) => x.family === "execution-aware");
    let misnamed = 0;
    for (const r of aware) {
      const rounds = probeRounds(r.response);
      const at = rounds.findIndex((p) => p.result.startsWith("\nError"));
      if (at < 0) continue;
      misnamed++;
      const [wrong, fixed] = [rounds[at]!, rounds[at + 1]!];
      expect(wrong.result).toMatch(/^\nError \(missing_column\): no such column: \S+\n\S+ columns: /);
      const bad = /no such column: (?:\w+\.)?(\S+)/.exec(wrong.result)![1]!;
      expect(fixed.sql).not.toMatch(new RegExp(`\\b${bad}\\b`));
      const right = fixed.sql.split(/\W+/).find((w) => !wrong.sql.split(/\W+/).includes(w))!;
      expect(wrong.result).toMatch(new RegExp(`columns: .*\\b${right}\\b`));
      const read = new RegExp(`<think>There is no column ${bad}; (\\w+) has (\\w+)\\.</think>`).exec(r.response);
      expect(read, r.response).not.toBeNull();
      expect(fixed.sql).toMatch(new RegExp(`\\b${read![1]}\\b`)); // the table it names is one the probe uses
      expect(fixed.sql).toMatch(new RegExp(`\\b${read![2]}\\b`));
    }
    expect(misnamed / aware.length).toBeGreaterThan(0.2);
    expect(misnamed / aware.length).toBeLessThan(0.5);
  });

  it("probes the columns whose encodings the question hides", () => {
    for (const r of records.filter((x) => x.family === "execution-aware")) {
      const item = items.get(key(r.db_id, r.question_id))!;
      const probes = probeRounds(r.response)
        .filter((p) => !p.result.startsWith("\nError"))
        .map((p) => p.sql);
      const first = item.lookups[0];
      if (first) expect(probes[0]).toContain(first.column);
      else expect(probes).toEqual([item.SQL]);
    }
  });

  it("uses only the database's identifiers in probes and final SQL", () => {
    const cache = new Map<string, SchemaNames>();
    for (const r of records.filter((x) => x.family === "execution-aware")) {
      const path = synthDbPath(dir, r.db_id);
      if (!cache.has(path)) cache.set(path, names(path));
      const answered = probeRounds(r.response).filter((p) => !p.result.startsWith("\nError"));
      for (const sql of [...answered.map((p) => p.sql), extractFinal(r.response).sql!]) {
        expect(checkIdentifiers(sql, cache.get(path)!), sql).toEqual([]);
      }
    }
  });

  it("is exactly the text the server's rollout produces when the model writes the trace's own parts", async () => {
    const executor: Executor = {
      execute: async (path, sql, options) => executeDirect(path, sql, options?.maxRows !== undefined ? { maxRows: options.maxRows } : {}),
      close: async () => {},
    };
    const sample = records;
    for (const r of sample) {
      const response = r.response;
      const policy = new ScriptedPolicy((ctx) => (response.startsWith(ctx.text) ? response.slice(ctx.text.length) : ""));
      const out = await runRollout(
        policy,
        { messages: r.messages, sharedPrefix: "" },
        resolveRolloutOptions({ ...OWN_ANSWERS, executor, dbPath: synthDbPath(dir, r.db_id), family: r.family, maxTokens: 100_000 }),
      );
      expect(out.text).toBe(response);
      expect(out.stopReason).toBe("final");
      expect(out.interactions).toBe(r.family === "execution-aware" ? probeRounds(response).length : 0);
    }
  });
});

/** llama.cpp's GBNF matcher on the constrained-decoding grammars: a constrained tiny model can write these traces. */
describe("SFT traces under the constrained-decoding grammars", () => {
  let llama: Llama;
  beforeAll(async () => {
    llama = await getLlama({ gpu: false, build: "never", logLevel: "warn" as never });
  });

  it("accepts every model-written segment", async () => {
    const compiled = new Map<string, LlamaGrammar>();
    const accepts = async (grammar: string, text: string): Promise<boolean> => {
      let g = compiled.get(grammar);
      if (!g) {
        g = await llama.createGrammar({ grammar });
        compiled.set(grammar, g);
      }
      return (g as unknown as { _testText(text: string): boolean })._testText(text);
    };
    const byDb = new Map<string, Record<PromptFamily, ReturnType<typeof buildSegmentGrammars>>>();
    for (const r of records) {
      const path = synthDbPath(dir, r.db_id);
      let g = byDb.get(r.db_id);
      if (!g) {
        const n = names(path);
        g = {
          "execution-aware": buildSegmentGrammars(n, "execution-aware"),
          standard: buildSegmentGrammars(n, "standard"),
          direct: buildSegmentGrammars(n, "direct"),
        };
        byDb.set(r.db_id, g);
      }
      const grammars = g[r.family];
      // the model writes up to each </intermediate_sql>; the server's <result> block follows
      const parts = r.response.split(/<result>\n[\s\S]*?\n<\/result>\n/);
      const results = [...r.response.matchAll(/<result>\n([\s\S]*?)\n<\/result>\n/g)].map((m) => m[1]!);
      for (let i = 0; i < parts.length; i++) {
        if (results[i]?.startsWith("Error (missing_column)")) continue; // a misnamed probe: the grammar rightly cannot write it
        const grammar = i === 0 ? grammars.first! : grammars.segment!;
        expect(await accepts(grammar, parts[i]!), `${r.family} part ${i}: ${parts[i]}`).toBe(true);
      }
    }
  }, 120_000);
});

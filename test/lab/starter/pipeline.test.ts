import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { makeStarterModel, type StarterOptions, type StarterReport } from "../../../lab/starter/index.js";
import { EVAL_FILES, ggufInfo, REAL_EVAL_FILES, REPORT_FILE, runSft } from "../../../lab/starter/testing.js";
import { STARTER_OUT } from "./fixtures.js";
import { hasTorch } from "../../helpers/python.js";

const torch = hasTorch();

const sha = (path: string): string => createHash("sha256").update(readFileSync(path)).digest("hex");

describe.skipIf(!torch)("starter pipeline (makeStarterModel)", () => {
  const work = join(STARTER_OUT, "pipeline");
  const base: StarterOptions = {
    seed: 4,
    workDir: work,
    out: join(work, "shipped.gguf"),
    devEvery: 0,
    evalItems: 4,
    vocabSize: 600,
    shape: { layers: 1, embedding: 32, heads: 2, kvHeads: 2, feedForward: 64, contextLength: 1024 },
    sft: { steps: 2, minutes: 0, lr: 3e-3, warmup: 0, evalFrac: 0, evalEvery: 0, saveEvery: 0, threads: 1 },
    grpo: null,
    checkItems: 0,
  };

  it("continues a reused SFT model on a larger data set, keeps every stage and command in report.json, and ships Q8_0 unless asked for f16", async () => {
    rmSync(work, { recursive: true, force: true });
    const first = await makeStarterModel({ ...base, dbs: 2, command: "first" });
    expect(first.sftDbs).toBe(2);
    expect(first.sftMore).toEqual([]);
    expect(first.outType).toBe("q8_0");
    expect(ggufInfo(base.out!).embeddingType).toBe("q8_0");
    expect(ggufInfo(join(work, "sft.gguf")).embeddingType).toBe("f16"); // the work folder's model keeps what training wrote
    const afterFirst = sha(join(work, "sft.gguf"));

    const second = await makeStarterModel({ ...base, dbs: 3, reuseSft: true, sftMore: { minutes: 0, steps: 1, lr: 1e-3 }, command: "second" });
    expect(second.sft).toEqual(first.sft); // the first stage's record is carried, not rerun
    expect(second.sftDbs).toBe(2);
    expect(second.sftMore).toHaveLength(1);
    expect(second.sftMore[0]).toMatchObject({ dbs: 3, lr: 1e-3, steps: 1 });
    // the stage was given the records of all three databases (those over the context length are dropped)
    const given = second.sftMore[0]!.data;
    expect(given.records + given.droppedTooLong).toBe(second.synth.traces);
    expect(second.synth.traces).toBeGreaterThan(first.synth.traces);
    expect(sha(join(work, "sft.gguf"))).not.toBe(afterFirst);

    const third = await makeStarterModel({ ...base, dbs: 3, reuseSft: true, sftMore: { minutes: 0, steps: 1 }, outType: "f16", command: "third" });
    expect(ggufInfo(base.out!).embeddingType).toBe("f16");
    expect(third.sftMore.map((m) => m.lr)).toEqual([1e-3, 8e-4]);
    const saved = JSON.parse(readFileSync(join(work, REPORT_FILE), "utf8")) as StarterReport;
    expect(saved.commands).toEqual(["first", "second", "third"]);
    expect(saved.sftMore).toHaveLength(2);
  }, 300_000);

  it("writes a GRPO validation file whose databases the model card's evaluation files never use", async () => {
    const dir = join(STARTER_OUT, "pipeline-val");
    rmSync(dir, { recursive: true, force: true });
    const report = await makeStarterModel({ ...base, workDir: dir, out: join(dir, "shipped.gguf"), dbs: 24, devEvery: 2, evalItems: 3, valItems: 4 });
    const dbsOf = (file: string): string[] => (JSON.parse(readFileSync(join(dir, file), "utf8")) as { db_id: string }[]).map((i) => i.db_id);
    const val = dbsOf(EVAL_FILES.val);
    const seen = dbsOf(EVAL_FILES.seen);
    const unseenDomains = new Set(dbsOf(EVAL_FILES.unseen).map((d) => d.replace(/_\d+$/, "")));
    expect(unseenDomains.size).toBeGreaterThan(0);
    expect(val).toHaveLength(4);
    expect(report.synth.val).toBe(4);
    expect(new Set(val).size).toBe(4); // one question per database
    for (const db of val) {
      expect(seen).not.toContain(db);
      expect(unseenDomains.has(db.replace(/_\d+$/, ""))).toBe(false);
    }
  }, 300_000);

  it("starts from an earlier model: its weights and tokenizer, this run's records, no first SFT stage", async () => {
    const src = join(STARTER_OUT, "pipeline-from-src");
    const dir = join(STARTER_OUT, "pipeline-from");
    rmSync(src, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    const earlier = await makeStarterModel({ ...base, workDir: src, out: join(src, "shipped.gguf"), dbs: 2 });
    const opts = { ...base, workDir: dir, out: join(dir, "shipped.gguf"), dbs: 3 };

    await expect(makeStarterModel({ ...opts, from: join(src, "missing.gguf") })).rejects.toThrow(/no such file/);
    writeFileSync(join(src, "not-a-model.gguf"), "hello");
    await expect(makeStarterModel({ ...opts, from: join(src, "not-a-model.gguf") })).rejects.toThrow(/not a model the learner can read/);
    expect(existsSync(join(dir, "sft.gguf"))).toBe(false);

    const report = await makeStarterModel({ ...opts, from: join(src, "shipped.gguf"), sftMore: { minutes: 0, steps: 1, lr: 1e-3 }, command: "from" });
    expect(report.from).toEqual({
      path: join(src, "shipped.gguf"),
      sha256: sha(join(src, "shipped.gguf")),
      bytes: readFileSync(join(src, "shipped.gguf")).length,
    });
    expect(report.sft).toBeNull();
    expect(report.shape).toMatchObject({ layers: 1, embedding: 32, heads: 2, feedForward: 64 });
    expect(report.vocabSize).toBe(earlier.vocabSize);
    expect(report.parameters).toBe(earlier.parameters);
    expect(report.tokens.records + report.tokens.droppedTooLong).toBe(report.synth.traces);
    expect(report.sftMore).toHaveLength(1);
    expect(report.sftMore[0]).toMatchObject({ steps: 1, lr: 1e-3, dbs: 3 });
    // the stage trains on the records tokenized at the start, not on a second tokenization of them
    expect(report.sftMore[0]!.data).toEqual(report.tokens);
    expect(existsSync(join(dir, "sft_more_tokens.jsonl"))).toBe(false);
    expect(sha(join(dir, "sft.gguf"))).not.toBe(sha(join(src, "shipped.gguf")));
    // reusing the folder keeps where it started
    const again = await makeStarterModel({ ...opts, reuseSft: true, command: "again" });
    expect(again.from?.sha256).toBe(report.from?.sha256);
    expect(again.commands).toEqual(["from", "again"]);
  }, 300_000);

  it("imports an SFT stage trained outside the pipeline on its records, with the trainer's command", async () => {
    const dir = join(STARTER_OUT, "pipeline-import");
    rmSync(dir, { recursive: true, force: true });
    const opts = { ...base, workDir: dir, out: join(dir, "shipped.gguf"), dbs: 2 };
    await expect(makeStarterModel({ ...opts, importSft: { model: "x.gguf", log: "x.jsonl" } })).rejects.toThrow(/report\.json/);
    expect(existsSync(dir)).toBe(false);
    await makeStarterModel({ ...opts, command: "first" });
    // what a GPU machine without Node runs: the trainer alone, on the work folder's records
    const log = join(dir, "elsewhere.jsonl");
    await runSft({
      model: join(dir, "sft.gguf"),
      data: join(dir, "sft_tokens.jsonl"),
      out: join(dir, "elsewhere.gguf"),
      steps: 2,
      lr: 5e-4,
      evalFrac: 0,
      threads: 1,
      log,
    });
    const before = sha(join(dir, "sft.gguf"));

    const report = await makeStarterModel({ ...opts, importSft: { model: join(dir, "elsewhere.gguf"), log }, command: "import" });
    expect(sha(join(dir, "sft.gguf"))).toBe(sha(join(dir, "elsewhere.gguf")));
    expect(sha(join(dir, "sft.gguf"))).not.toBe(before);
    expect(report.sftMore).toHaveLength(1);
    expect(report.sftMore[0]).toMatchObject({ steps: 2, lr: 5e-4, dbs: 2, device: "cpu", data: report.tokens });
    expect(report.commands).toHaveLength(3);
    expect(report.commands[1]).toBe(`python3 -m reex_learner step --request ${join(dir, "elsewhere.gguf.request.json")}`);
    expect(report.commands[2]).toBe("import");

    // a stage trained on other records is refused and changes nothing
    const fewer = join(dir, "fewer_tokens.jsonl");
    writeFileSync(fewer, `${readFileSync(join(dir, "sft_tokens.jsonl"), "utf8").split("\n")[0]}\n`);
    const other = join(dir, "other.jsonl");
    await runSft({ model: join(dir, "sft.gguf"), data: fewer, out: join(dir, "other.gguf"), steps: 1, evalFrac: 0, threads: 1, log: other });
    const kept = sha(join(dir, "sft.gguf"));
    await expect(makeStarterModel({ ...opts, importSft: { model: join(dir, "other.gguf"), log: other } })).rejects.toThrow(/trained on \d+ records/);
    expect(sha(join(dir, "sft.gguf"))).toBe(kept);
  }, 300_000);

  it("mixes real questions into the tokenizer's text and the SFT records, and with prepareOnly stops at the initial model for a stage trained elsewhere", async () => {
    const dir = join(STARTER_OUT, "pipeline-real");
    rmSync(dir, { recursive: true, force: true });
    const opts: StarterOptions = {
      ...base,
      workDir: dir,
      out: join(dir, "shipped.gguf"),
      dbs: 2,
      real: { sources: ["wikisql", "spider"], wikisqlTables: 12, spiderDatabases: 2 },
    };
    const prepared = await makeStarterModel({ ...opts, prepareOnly: true, command: "prepare" });
    const lines = (path: string): string[] => readFileSync(path, "utf8").split("\n").filter(Boolean);
    const mixed = lines(prepared.real!.trainSft);
    expect(prepared.real!.manifest.traces).toBeGreaterThan(0);
    expect(mixed).toHaveLength(prepared.synth.traces + prepared.real!.manifest.traces);
    expect(mixed.some((l) => l.includes('"db_id":"wikisql_'))).toBe(true);
    // the held-out WikiSQL file: test questions only, none of them in a training record
    const heldOut = JSON.parse(readFileSync(join(dir, REAL_EVAL_FILES.wikisql), "utf8")) as { question: string }[];
    expect(heldOut.length).toBeGreaterThan(0);
    for (const q of heldOut) expect(mixed.some((l) => l.includes(JSON.stringify(q.question).slice(1, -1)))).toBe(false);
    expect(prepared.sft).toBeNull();
    expect(prepared.tokens.records + prepared.tokens.droppedTooLong).toBe(mixed.length);
    expect(sha(join(dir, "sft.gguf"))).toBe(sha(join(dir, "init.gguf")));
    expect(existsSync(join(dir, "shipped.gguf"))).toBe(false);

    const log = join(dir, "gpu.jsonl");
    await runSft({ model: join(dir, "sft.gguf"), data: join(dir, "sft_tokens.jsonl"), out: join(dir, "gpu.gguf"), steps: 1, evalFrac: 0, threads: 1, log });
    const report = await makeStarterModel({ ...opts, importSft: { model: join(dir, "gpu.gguf"), log }, command: "import" });
    expect(report.commands).toEqual(["prepare", expect.stringMatching(/^python3 -m reex_learner step --request /), "import"]);
    expect(sha(join(dir, "sft.gguf"))).toBe(sha(join(dir, "gpu.gguf")));
    expect(ggufInfo(join(dir, "shipped.gguf")).embeddingType).toBe("q8_0"); // the imported stage, exported
  }, 300_000);
});

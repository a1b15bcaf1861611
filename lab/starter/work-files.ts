/** The files a starter run writes into its work folder besides the models, and how held-out items are drawn for them. */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { SftRecord } from "../synth/index.js";
import { STARTER_VAL_FILE } from "./grpo.js";

/**
 * Evaluation files the pipeline writes into its work folder (BIRD layout; databases under `<work>/synth/databases`):
 * the model card's sets (seen and unseen domains), and `val` for GRPO's held-out curve, whose databases the card's sets never use.
 */
export const EVAL_FILES = { seen: "eval_seen.json", unseen: "eval_unseen.json", val: STARTER_VAL_FILE } as const;

/**
 * With real questions, also: each source's own test split, drawn at random and spread over its databases (`REAL_EVAL_ITEMS` items,
 * {@link heldOutSample}; databases under `<work>/real/databases`). The training records never hold a test question (lab/realdata
 * traces only `train`).
 */
export const REAL_EVAL_FILES = { wikisql: "eval_wikisql_test.json", advising: "eval_advising_test.json" } as const;

/** Items per real evaluation file: 400 WikiSQL test questions (one per table), 100 Advising ones. */
export const REAL_EVAL_ITEMS = { wikisql: 400, advising: 100 } as const;

/**
 * Up to `n` items drawn at random (seeded) and spread over their databases: {@link spread} over the items in an order drawn from `seed`
 * (each item's place is the SHA-256 of the seed and its index),
 * so neither a database's first question (in WikiSQL the simplest: 393 of the first 400 tables' first questions have one condition,
 * against 68% of the split) nor the first databases of the file are favoured.
 */
export function heldOutSample<T extends { db_id: string }>(items: readonly T[], n: number, seed: string): T[] {
  const keyed = items.map((item, k) => ({ item, key: createHash("sha256").update(`${seed}:${k}`).digest("hex") }));
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return spread(
    keyed.map((k) => k.item),
    n,
  );
}

/** Up to `n` items taken round-robin over their databases (the first question of each, then the second …). */
export function spread<T extends { db_id: string }>(items: readonly T[], n: number): T[] {
  const byDb = new Map<string, T[]>();
  for (const it of items) byDb.set(it.db_id, [...(byDb.get(it.db_id) ?? []), it]);
  const lists = [...byDb.values()];
  const out: T[] = [];
  for (let round = 0; out.length < n && lists.some((l) => l.length > round); round++) {
    for (const l of lists) if (out.length < n && l[round]) out.push(l[round]!);
  }
  return out;
}

/** Texts the tokenizer is trained on: every message and response of the SFT records. */
export function corpusTexts(sftPath: string): string[] {
  const texts: string[] = [];
  for (const line of readFileSync(sftPath, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const rec = JSON.parse(line) as SftRecord;
    for (const m of rec.messages) texts.push(m.content);
    texts.push(rec.response);
  }
  return texts;
}

/** The pipeline's record in its work folder, read back by `reuseSft`. */
export const REPORT_FILE = "report.json";

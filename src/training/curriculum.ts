/** Screening questions before GRPO (the curriculum) and checking that every gold SQL runs. */
import { existsSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { ReexError } from "../errors/index.js";
import { type Executor } from "../sql/index.js";
import { fnv1a32 } from "../util/index.js";
import { sampleIfFits, type RolloutGroup, type TrainingQuestion } from "./groups.js";
import { GoldCache } from "./rewards.js";

/** The curriculum's screening record, `<runDir>/curriculum.json`. */
interface CurriculumFile {
  samples: number;
  minPass: number;
  maxPass: number;
  /** Pass rate of every screened question, by question id. */
  passRates: Record<string, number>;
  kept: (string | number)[];
  /** Questions whose prompt overflowed the context window (not kept). */
  skipped?: (string | number)[];
}

/**
 * Keeps the questions whose pass rate over `samples` rollouts of the start policy lies in [minPass, maxPass]
 * (written to `file`; a resumed run reads it back instead of screening again). A question whose prompt overflows the
 * context window is logged and not kept. DATASET_INVALID when none is kept.
 */
export async function screenQuestions(
  questions: TrainingQuestion[],
  c: { samples: number; minPass: number; maxPass: number },
  file: string,
  sample: (q: TrainingQuestion, groupSize: number, seed: number) => Promise<RolloutGroup>,
  seed: number,
  log: (line: string) => void,
): Promise<TrainingQuestion[]> {
  let saved: CurriculumFile | undefined;
  if (existsSync(file)) saved = JSON.parse(readFileSync(file, "utf8")) as CurriculumFile;
  if (!saved || saved.samples !== c.samples || saved.minPass !== c.minPass || saved.maxPass !== c.maxPass) {
    const passRates: Record<string, number> = {};
    const skipped: (string | number)[] = [];
    for (const [i, q] of questions.entries()) {
      const g = await sampleIfFits(() => sample(q, c.samples, fnv1a32(`curriculum:${seed}:${i}`) & 0x3fffffff));
      if (g instanceof ReexError) {
        skipped.push(q.questionId);
        log(`reex train: curriculum: question ${q.questionId} skipped: ${g.code}: ${g.message}`);
        continue;
      }
      passRates[String(q.questionId)] = g.rollouts.filter((r) => r.reward.correct).length / g.rollouts.length;
    }
    const inRange = (id: string | number): boolean => {
      const rate = passRates[String(id)];
      return rate !== undefined && rate >= c.minPass && rate <= c.maxPass;
    };
    const kept = questions.filter((q) => inRange(q.questionId)).map((q) => q.questionId);
    saved = { ...c, passRates, kept, ...(skipped.length > 0 ? { skipped } : {}) };
    await writeFile(file, `${JSON.stringify(saved, null, 2)}\n`);
  }
  const keep = new Set(saved.kept.map(String));
  const out = questions.filter((q) => keep.has(String(q.questionId)));
  log(`reex train: curriculum kept ${out.length} of ${questions.length} questions (pass rate ${c.minPass}–${c.maxPass} over ${c.samples} samples)`);
  if (out.length === 0)
    throw new ReexError(
      "DATASET_INVALID",
      `the curriculum kept no question: none has a pass rate in [${c.minPass}, ${c.maxPass}] over ${c.samples} samples of the start policy (${file})`,
    );
  return out;
}

/** Runs every question's gold SQL once on each row draw it has (cached for the rewards); DATASET_INVALID naming the questions whose gold does not run. */
export async function checkGold(
  questions: readonly TrainingQuestion[],
  executor: Executor,
  cache: GoldCache,
  timeoutMs: number,
  source: string,
): Promise<void> {
  const bad: { id: string | number; message: string }[] = [];
  for (const q of questions) {
    for (const [dbPath, draw] of [[q.dbPath, ""], ...(q.dbPath2 ? [[q.dbPath2, " (second row draw)"]] : [])] as const) {
      const r = await cache.get(executor, dbPath, q.goldSql, { timeoutMs, maxRows: 100_000 });
      if (!r.ok) {
        if (r.error.code === "EXECUTOR_UNAVAILABLE") throw new ReexError("EXECUTOR_UNAVAILABLE", r.error.message);
        bad.push({ id: q.questionId, message: `${r.error.code}${draw}: ${r.error.message}` });
      }
    }
  }
  if (bad.length > 0) {
    throw new ReexError(
      "DATASET_INVALID",
      `${source}: the gold SQL of ${bad.length} question(s) does not run, so no reward could be computed for them; first: question ${bad[0]!.id}: ${bad[0]!.message}`,
      {
        issues: bad.slice(0, 20).map((b) => ({ path: [String(b.id), "SQL"], message: b.message })),
      },
    );
  }
}

/**
 * What a conversation buys a follow-up question, measured through the real server (fastify app,
 * real runtime, real model). For each pair of examples/follow-ups.json (a first question, then one
 * with `"follows"` naming it), it asks the first in a fresh conversation, then the follow-up in the
 * same conversation and, separately, on its own; it scores all three against the gold SQL with the
 * evaluation's own EX rule and compares the follow-up with and without the conversation, paired.
 *
 *   npx tsx lab/scripts/follow-ups.ts --model models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
 *       [--pairs examples/follow-ups.json] [--db-root examples/databases] [--db ID[,ID]] [--threads 1] [--limit N] [--out FILE]
 *
 * --out (default .reex/follow-ups.json) gets every answer's SQL, verdict, seconds and the prompt
 * tokens the earlier turn took (`historyTokens`), and the summary.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { parseConfig } from "../../src/config/index.js";
import { type EvalItem, loadDataset, pairedDifference, scorePredictions } from "../../src/eval/index.js";
import { createRuntime } from "../../src/runtime/index.js";
import { buildApp } from "../../src/server/index.js";

const { values: v } = parseArgs({
  options: {
    model: { type: "string" },
    pairs: { type: "string", default: "examples/follow-ups.json" },
    "db-root": { type: "string", default: "examples/databases" },
    threads: { type: "string", default: "1" },
    limit: { type: "string" },
    db: { type: "string" },
    out: { type: "string", default: ".reex/follow-ups.json" },
  },
});
if (!v.model) {
  console.error("usage: follow-ups.ts --model GGUF [--pairs FILE] [--db-root DIR] [--db ID[,ID]] [--threads N] [--limit N] [--out FILE]");
  process.exit(2);
}

const { items } = loadDataset(v.pairs, { dbRoot: v["db-root"], layout: "bird" });
// the loader keeps the questions; which one a follow-up follows is this file's own field
const raw = JSON.parse(readFileSync(v.pairs, "utf8")) as Array<{ follows?: number }>;
const byId = new Map(items.map((i) => [i.questionId, i]));
let pairs = items.flatMap((second) => {
  const follows = raw[second.index]?.follows;
  const first = follows === undefined ? undefined : byId.get(follows);
  return first ? [{ first, second }] : [];
});
if (v.db) pairs = pairs.filter((p) => v.db!.split(",").includes(p.first.dbId));
if (v.limit) pairs = pairs.slice(0, Number(v.limit));

const dataDir = mkdtempSync(join(tmpdir(), "reex-follow-ups-"));
const config = parseConfig({
  // answers are measured, not served: a busy machine must not turn a slow answer into a missing one
  server: { logLevel: "silent", requestTimeoutMs: 1_800_000 },
  sql: { dataDir },
  policy: { model: v.model, gpu: "cpu", threads: Number(v.threads) },
});
const runtime = await createRuntime(config);
const app = buildApp({ ...runtime, config });

interface Asked {
  sql: string | null;
  seconds: number;
  historyTokens?: number;
}
async function ask(item: EvalItem, conversation?: string): Promise<Asked> {
  const started = performance.now();
  const res = await app.inject({
    method: "POST",
    url: "/v1/sql",
    payload: {
      database: item.dbId,
      question: item.question,
      strategy: "greedy",
      ...(item.evidence ? { evidence: item.evidence } : {}),
      ...(conversation ? { conversation } : {}),
    },
  });
  const seconds = (performance.now() - started) / 1000;
  const body = res.json() as { sql?: string; usage?: { historyTokens?: number } };
  if (res.statusCode !== 200) console.error(`  ${res.statusCode}: ${res.body.slice(0, 200)}`);
  return { sql: body.sql ?? null, seconds, ...(body.usage?.historyTokens !== undefined ? { historyTokens: body.usage.historyTokens } : {}) };
}

const answers: Array<{ first: Asked; withConversation: Asked; alone: Asked }> = [];
try {
  for (const [n, { first, second }] of pairs.entries()) {
    const conversation = `fu-${String(first.questionId)}`;
    const a = await ask(first, conversation);
    const b = await ask(second, conversation);
    const c = await ask(second);
    answers.push({ first: a, withConversation: b, alone: c });
    console.log(`${n + 1}/${pairs.length} ${second.dbId}: ${second.question}\n  with:  ${b.sql}\n  alone: ${c.sql}`);
  }
  const score = async (label: string, which: (a: (typeof answers)[number]) => Asked, of: (p: (typeof pairs)[number]) => EvalItem) =>
    scorePredictions({ label, items: pairs.map(of), predictions: answers.map((a) => which(a).sql), executor: runtime.executor });
  const firsts = await score(
    "first",
    (a) => a.first,
    (p) => p.first,
  );
  const withConv = await score(
    "with",
    (a) => a.withConversation,
    (p) => p.second,
  );
  const alone = await score(
    "alone",
    (a) => a.alone,
    (p) => p.second,
  );
  const paired = pairedDifference(withConv.items, alone.items);
  const ex = (run: typeof firsts) => run.items.filter((i) => i.ex.bird).length;
  const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);
  const summary = {
    model: v.model,
    pairs: pairs.length,
    firstEx: ex(firsts),
    followUpExWithConversation: ex(withConv),
    followUpExAlone: ex(alone),
    wonWithConversation: paired.firstOnly,
    lostWithConversation: paired.secondOnly,
    p: paired.pValue,
    secondsPerAnswer: mean(answers.flatMap((a) => [a.first.seconds, a.withConversation.seconds, a.alone.seconds])),
    historyTokensMean: mean(answers.flatMap((a) => (a.withConversation.historyTokens === undefined ? [] : [a.withConversation.historyTokens]))),
  };
  console.log(JSON.stringify(summary, null, 1));
  mkdirSync(dirname(v.out), { recursive: true });
  const rows = pairs.map((p, i) => ({
    db: p.first.dbId,
    first: p.first.question,
    followUp: p.second.question,
    firstSql: answers[i]!.first.sql,
    firstRight: firsts.items[i]!.ex.bird,
    withSql: answers[i]!.withConversation.sql,
    withRight: withConv.items[i]!.ex.bird,
    aloneSql: answers[i]!.alone.sql,
    aloneRight: alone.items[i]!.ex.bird,
  }));
  writeFileSync(v.out, `${JSON.stringify({ date: new Date().toISOString().slice(0, 10), pairsFile: v.pairs, summary, rows }, null, 1)}\n`);
} finally {
  await app.close();
  await runtime.close();
  rmSync(dataDir, { recursive: true, force: true });
}

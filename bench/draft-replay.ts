/**
 * What prompt-lookup drafting could save at most, and what reex's draft sizing saves, on a model's
 * own greedy rollouts: decodes the 45 example questions greedily (execution-aware, probes executed),
 * then replays each rollout step by step against a table of step costs, drafting what src/policy's
 * NgramDrafter looks up (its own `match()`: the longest match, up to 8 tokens, own text before
 * prompt; a draft never runs into injected text) and counting a step of n tokens at its cost:
 *
 *   - oracle: at each step the draft length that pays best given how many drafted tokens the model
 *     will accept (known from the rollout): the most any sizing of these drafts can save;
 *   - fixed k: always k tokens where a match has them;
 *   - padded to k: every step evaluates k tokens, the match's continuation filled up with guesses
 *     taken to be rejected (createLlamaPolicy's `draftShape: "fixed"`), so every step costs cost(k);
 *   - reex: DraftingState's choice, learning acceptance from the replayed verifications, with the
 *     step costs given to it as measured.
 *
 * Greedy acceptance is exact (a drafted token is accepted if the rollout wrote it), so the replay
 * is the real drafting's savings at those step costs; reex's own per-step overhead is not in it.
 *
 *   npx tsx bench/draft-replay.ts [--model PATH] [--costs "1:1,2:1.95,3:2.17,4:2.54,6:3.1,8:3.38,16:4.5"]
 *                                 [--max-tokens 400] [--history]
 *
 * --history: drafts from the earlier rollouts' text on the same database too (the policy's draft
 * history, `draftHistory`), the rollouts replayed in the order a server would have answered them.
 *
 * --costs: a step's cost by its tokens, relative to one token, linear in between (default: v3 Q8_0
 * on the 2-core development machine (AMD EPYC) by llama-bench at 1,200 tokens of context, one thread:
 * `llama-bench -m models/reex-starter.gguf -t 1 -p 1,2,3,4,6,8 -n 0 -d 1200 -fa 0`; at two threads
 * it measured "1:1,2:1.25,4:1.41,8:1.82,16:2.6"). Last line: `replay oracle X× reex Y×`.
 */
import { parseArgs } from "node:util";
import { buildPrompt, rollout, OWN_ANSWERS, resolveRolloutOptions } from "../src/agent/index.js";
import { buildExamples } from "../src/examples/index.js";
import { createLlamaPolicy } from "../src/policy/index.js";
import { DraftingState, NgramDrafter, StepCosts } from "../src/policy/draft.js";
import { ExecutorPool, loadSchema, schemaPrompt } from "../src/sql/index.js";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "models/reex-starter.gguf" },
    costs: { type: "string", default: "1:1,2:1.95,3:2.17,4:2.54,6:3.1,8:3.38,16:4.5" },
    "max-tokens": { type: "string", default: "400" },
    history: { type: "boolean", default: false },
  },
});

const points = values.costs.split(",").map((p) => p.split(":").map(Number) as [number, number]);
if (points.length < 2 || points.some(([n, c]) => !(n >= 1 && c > 0))) throw new Error(`--costs must list size:cost pairs, got ${values.costs}`);
/** A step's cost by its tokens, linear between the given sizes and beyond the last two. */
function cost(n: number): number {
  for (let i = 0; i < points.length - 1; i++) {
    const [a, ca] = points[i]!;
    const [b, cb] = points[i + 1]!;
    if (n >= a && n <= b) return ca + ((cb - ca) * (n - a)) / (b - a);
  }
  const [a, ca] = points.at(-2)!;
  const [b, cb] = points.at(-1)!;
  return cb + ((cb - ca) / (b - a)) * (n - b);
}

interface Rollout {
  /** The draft history's scope: the prompt's shared prefix (its database). */
  scope: string;
  prompt: readonly number[];
  tokens: number[];
  sampled: number[];
}

/** Greedy execution-aware rollouts of the example questions. */
async function rollouts(): Promise<Rollout[]> {
  const executor = new ExecutorPool({ workers: 1, timeoutMs: 5000 });
  const policy = await createLlamaPolicy({ gpu: "cpu", contextSize: 4096, sequences: 2, threads: 1, model: values.model });
  try {
    const out: Rollout[] = [];
    for (const set of await buildExamples()) {
      const schema = schemaPrompt(loadSchema(set.path)).text;
      for (const q of set.questions) {
        const built = buildPrompt({ family: "execution-aware", schema, question: q.question, evidence: q.evidence });
        const t = await policy.start(policy.renderChat(built.messages, { sharedPrefix: built.sharedPrefix }));
        try {
          const r = await rollout(
            t,
            resolveRolloutOptions({
              ...OWN_ANSWERS,
              executor,
              dbPath: set.path,
              maxTokens: Number(values["max-tokens"]),
              temperature: 0,
              path: "0",
              maxInteractions: 4,
              finalRetries: 0,
            }),
          );
          out.push({ scope: set.path, prompt: t.promptTokens, tokens: r.record.tokens, sampled: r.record.sampled });
        } finally {
          await t.release();
        }
      }
    }
    return out;
  } finally {
    await policy.close();
    await executor.close();
  }
}

/** One generation step of a rollout: what the drafter's lookup proposes and how much of it the model wrote. */
interface Step {
  /** Where nothing matches: how many of the tokens after the last token's latest earlier occurrence (NgramDrafter.afterLastToken, a fixed shape's filling) the rollout wrote. */
  filled: number;
  available: number;
  accepted: number;
  kind: string;
  n: number;
}

/** The steps of a rollout, each with the continuation NgramDrafter's own lookup finds at it. */
function stepsOf(r: Rollout, history: DraftingState): Step[] {
  const record: number[] = [];
  const drafter = new NgramDrafter(r.prompt, record, history, { scope: r.scope });
  const steps: Step[] = [];
  for (let p = 0; p < r.tokens.length; p++) {
    if (r.sampled[p] === 1) {
      const m = drafter.match(16);
      let accepted = 0;
      const available = m?.tokens.length ?? 0;
      // a drafted token is accepted where the rollout wrote it; a draft never runs into injected text
      while (m && accepted < available && r.sampled[p + accepted] === 1 && r.tokens[p + accepted] === m.tokens[accepted]) accepted++;
      const fill = m ? [] : drafter.afterLastToken(16);
      let filled = 0;
      while (filled < fill.length && r.sampled[p + filled] === 1 && r.tokens[p + filled] === fill[filled]) filled++;
      steps.push({ filled, available, accepted, kind: m?.kind ?? "", n: m?.n ?? 0 });
    }
    record.push(r.tokens[p]!);
  }
  drafter.remember();
  return steps;
}

/** Tokens per unit of cost relative to plain decoding, drafting `choose(step)` tokens at each step. */
function replay(
  all: Step[][],
  choose: (s: Step) => number,
  learn?: (s: Step, k: number, accepted: number) => void,
  stepCost: (k: number) => number = (k) => cost(1 + k),
): { ratio: number; drafted: number; accepted: number } {
  let total = 0;
  let spent = 0;
  let drafted = 0;
  let accepted = 0;
  for (const steps of all) {
    total += steps.length;
    for (let i = 0; i < steps.length; ) {
      const s = steps[i]!;
      const k = s.available > 0 ? Math.min(choose(s), s.available) : 0;
      const a = Math.min(k, s.accepted);
      spent += stepCost(k);
      drafted += k;
      accepted += a;
      if (k > 0) learn?.(s, k, a);
      i += a + 1;
    }
  }
  return { ratio: total / spent, drafted, accepted };
}

const t0 = performance.now();
const data = await rollouts();
// rollouts are replayed in the order served; with --history each drafts from the earlier ones on its database
const history = new DraftingState({ historyTokens: values.history ? 32768 : 0 });
const all = data.map((r) => stepsOf(r, history));
const generated = all.reduce((n, s) => n + s.length, 0);
console.log(
  `${data.length} greedy rollouts of ${values.model}, ${generated} generated tokens (${((performance.now() - t0) / 1000).toFixed(0)} s); step costs ${values.costs}`,
);
const show = (label: string, r: { ratio: number; drafted: number; accepted: number }): void =>
  console.log(
    `  ${label.padEnd(28)} ${r.ratio.toFixed(3)}×  drafted ${r.drafted}, accepted ${r.drafted ? ((100 * r.accepted) / r.drafted).toFixed(1) : "n/a"}%`,
  );
const oracle = replay(all, (s) => {
  let best = 0;
  let bestRate = 1;
  for (let k = 1; k <= s.available; k++) {
    const rate = (Math.min(k, s.accepted) + 1) / cost(1 + k);
    if (rate > bestRate) [best, bestRate] = [k, rate];
  }
  return best;
});
show("oracle", oracle);
for (const k of [1, 2, 4, 8])
  show(
    `fixed ${k}`,
    replay(all, () => k),
  );
// every step the same shape (draftShape "fixed"): the match's continuation, else the tokens after
// the last token's latest occurrence, filled up to `shape` − 1 tokens with a guess taken to be
// rejected, so a step always costs cost(shape); on a GPU this keeps llama.cpp's CUDA graph, which a
// change of step size makes it capture again
for (const shape of [2, 4, 8])
  show(
    `padded to ${shape}`,
    replay(
      all.map((steps) => steps.map((s) => (s.available > 0 ? s : { ...s, available: shape - 1, accepted: s.filled }))),
      () => shape - 1,
      undefined,
      () => cost(shape),
    ),
  );
const state = new DraftingState({ draftMax: 8 });
const measured = new StepCosts();
for (let n = 1; n <= 32; n++) measured.observe(n, cost(n));
const reex = replay(
  all,
  (s) => state.length(s.kind, s.n, s.available, 1, measured),
  (s, k, a) => state.observe(s.kind, Math.min(k, a + 1), a),
);
show("reex (draftMax 8)", reex);
console.log(`replay oracle ${oracle.ratio.toFixed(2)}× reex ${reex.ratio.toFixed(2)}×`);

/**
 * What verifying a greedy draft costs in native sample calls: after one decode of k tokens (the
 * step's token and k − 1 drafted ones), samples the k positions one after another with one sampler
 * (what a sampled draft must do, and what the direct decode step did for every draft before) and
 * all at once with one greedy sampler each (what it now does for greedy drafts without a grammar,
 * src/policy/direct-decode.ts), alternating the two, side by side in one run. node-llama-cpp only.
 *
 *   npx tsx bench/verify-sampling.ts [--model PATH] [--context 1200] [--rounds 40] [--threads 1] [--gpu cpu|cuda]
 *
 * Prints, per k, the median decode and the median of each way of sampling, in ms, and the step
 * (decode + sampling) one-at-a-time over at-once. Last line: `verify k=8 X× faster step`.
 */
import { parseArgs } from "node:util";
import { getLlama, type Token } from "node-llama-cpp";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "models/reex-starter.gguf" },
    context: { type: "string", default: "1200" },
    rounds: { type: "string", default: "40" },
    threads: { type: "string", default: "1" },
    gpu: { type: "string", default: "cpu" },
  },
});
const CONTEXT = Number(values.context);
const ROUNDS = Number(values.rounds);
const SIZES = [2, 4, 8];

interface Native {
  initBatch(size: number): void;
  addToBatch(seq: number, first: number, tokens: Uint32Array, logits: Uint32Array): Uint32Array;
  decodeBatch(): Promise<void>;
  sampleToken(index: number, sampler: unknown): Promise<number>;
  removeTokenCellsFromSequence(seq: number, start: number, end: number): boolean;
}

const llama = await getLlama({ gpu: values.gpu === "cuda" ? "cuda" : false, logLevel: "error" as never });
const model = await llama.loadModel({ modelPath: values.model });
const context = await model.createContext({ contextSize: CONTEXT + 64, sequences: 1, threads: Number(values.threads), flashAttention: false });
const seq = context.getSequence();
const internals = seq as unknown as {
  _sequenceId: number;
  _resolveSamplerConfig(o: Record<string, unknown>): unknown;
  model: { _model: unknown; _llama: { _bindings: { AddonSampler: new (m: unknown) => { applyConfig(c: unknown): void; dispose(): void } } } };
};
const native = (context as unknown as { _ctx: Native })._ctx;
const text = "SELECT COUNT(*) FROM customers WHERE country = 'DE' AND tier = 'G' ORDER BY name LIMIT 5;\n";
const filler = model.tokenize(text.repeat(Math.ceil(CONTEXT / 20))).slice(0, CONTEXT) as Token[];
await seq.evaluateWithoutGeneratingNewTokens(filler);
const config = internals._resolveSamplerConfig({ temperature: 0, minP: 0, topK: 0, topP: 1, seed: 1 });
const samplers = SIZES.slice(-1).flatMap((k) =>
  Array.from({ length: k }, () => {
    const s = new internals.model._llama._bindings.AddonSampler(internals.model._model);
    s.applyConfig(config);
    return s;
  }),
);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const pos = CONTEXT;
const draft = filler.slice(0, 8);

async function decode(k: number): Promise<{ indexes: Uint32Array; ms: number }> {
  const t0 = performance.now();
  native.initBatch(k);
  const indexes = native.addToBatch(
    internals._sequenceId,
    pos,
    Uint32Array.from(draft.slice(0, k)),
    Uint32Array.from({ length: k }, (_, j) => j),
  );
  await native.decodeBatch();
  return { indexes, ms: performance.now() - t0 };
}

console.log(`verify-sampling — ${values.model}, ${CONTEXT} tokens of context, ${values.threads} thread(s), ${values.gpu}, median of ${ROUNDS} rounds`);
console.log("  k   decode ms   one-at-a-time ms   at-once ms   step one-at-a-time / at-once");
let last = 0;
for (const k of SIZES) {
  const d: number[] = [];
  const one: number[] = [];
  const all: number[] = [];
  for (let r = 0; r < ROUNDS + 2; r++) {
    for (const way of r % 2 === 0 ? ["one", "all"] : ["all", "one"]) {
      const { indexes, ms } = await decode(k);
      const t0 = performance.now();
      let tokens: number[];
      if (way === "one") {
        tokens = [];
        for (let i = 0; i < k; i++) tokens.push(await native.sampleToken(indexes[i]!, samplers[0]));
      } else {
        tokens = await Promise.all(Array.from({ length: k }, (_, i) => native.sampleToken(indexes[i]!, samplers[i])));
      }
      const sampleMs = performance.now() - t0;
      native.removeTokenCellsFromSequence(internals._sequenceId, pos, pos + k);
      if (tokens.some((t) => t < 0)) throw new Error("a sample failed");
      // the first two rounds warm up
      if (r < 2) continue;
      d.push(ms);
      (way === "one" ? one : all).push(sampleMs);
    }
  }
  const ratio = (median(d) + median(one)) / (median(d) + median(all));
  last = ratio;
  console.log(
    `  ${String(k).padStart(1)}   ${median(d).toFixed(2).padStart(9)}   ${median(one).toFixed(3).padStart(16)}   ${median(all).toFixed(3).padStart(10)}   ${ratio.toFixed(3)}×`,
  );
}
for (const s of samplers) s.dispose();
await context.dispose();
await model.dispose();
console.log(`verify k=8 ${last.toFixed(2)}× faster step`);

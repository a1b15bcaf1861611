/**
 * The starter policy's initial GGUF: a llama-architecture decoder with GPT-2-style initial weights
 * (normal, std 0.02; residual output projections scaled by 1/√(2·layers)), the trained BPE
 * vocabulary, ChatML control tokens and chat template. The learner (an SFT run of `reex_learner step`) reads
 * it, trains it and writes the same metadata back.
 */
import { STARTER_NAME_PREFIX } from "../../src/agent/index.js";
import { encodeGguf, llamaMetadata, llamaTensors } from "../../src/policy/tooling.js";
import { seededRandom } from "../../src/util/index.js";
import type { StarterVocabulary } from "./tokenizer.js";

/**
 * llama.cpp pre-tokenizer name written to `tokenizer.ggml.pre`. "trillion" selects exactly GPT-2's
 * split regex (the one the BPE trainer counts over) with `clean_spaces` off. "gpt-2" would select the
 * same regex but also turn on clean_up_tokenization_spaces, which makes llama.cpp's detokenizer drop
 * the space in " ,", " .", " ?", " !", " 's", " ' " … — generated SQL text would then differ from
 * its tokens (e.g. `name || ' ' || x`), and the schema's " , " lists would not round-trip.
 */
export const STARTER_PRE_TOKENIZER = "trillion";

/** Shape of the starter model. */
export interface StarterShape {
  /** Transformer blocks. Default 6. */
  layers?: number;
  /** Hidden width. Default 256. */
  embedding?: number;
  /** Attention heads. Default 4 (head dim 64). */
  heads?: number;
  /** Key/value heads. Default 4. */
  kvHeads?: number;
  /** Feed-forward width. Default 704. */
  feedForward?: number;
  /** Trained context length (metadata). Default 1024. */
  contextLength?: number;
  /** Weight storage type of 2-D tensors. Default "f32". */
  weightType?: "f32" | "f16";
}

export type ResolvedShape = Required<StarterShape>;

export function resolveShape(shape: StarterShape = {}): ResolvedShape {
  return {
    layers: shape.layers ?? 6,
    embedding: shape.embedding ?? 256,
    heads: shape.heads ?? 4,
    kvHeads: shape.kvHeads ?? 4,
    feedForward: shape.feedForward ?? 704,
    contextLength: shape.contextLength ?? 1024,
    weightType: shape.weightType ?? "f32",
  };
}

/** Parameters of a model of this shape and vocabulary size (untied output). */
export function parameterCount(shape: StarterShape, vocab: number): number {
  const o = resolveShape(shape);
  const e = o.embedding;
  const kv = (e / o.heads) * o.kvHeads;
  const block = e + e * e * 2 + e * kv * 2 + e + 3 * e * o.feedForward;
  return 2 * vocab * e + e + o.layers * block;
}

/** The GGUF bytes of the untrained starter model. */
export function buildStarterModel(vocab: StarterVocabulary, shape: StarterShape = {}, options: { seed?: number; name?: string } = {}): Buffer {
  const o = resolveShape(shape);
  if (o.embedding % o.heads !== 0) throw new Error("embedding must be a multiple of heads");
  if (o.heads % o.kvHeads !== 0) throw new Error("heads must be a multiple of kvHeads");
  const seed = options.seed ?? 1;
  const std = 0.02;
  const resid = std / Math.sqrt(2 * o.layers);
  const init = { embedding: std, output: std, attention: std, attentionOutput: resid, feedForward: std, feedForwardDown: resid };
  const tensors = llamaTensors(o, vocab.tokens.length, init, seededRandom(seed).normal);
  const metadata = llamaMetadata(options.name ?? `${STARTER_NAME_PREFIX}-seed${seed}`, o, vocab, STARTER_PRE_TOKENIZER);
  return encodeGguf({ metadata, tensors });
}

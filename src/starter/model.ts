/**
 * The starter policy's initial GGUF: a llama-architecture decoder with GPT-2-style initial weights
 * (normal, std 0.02; residual output projections scaled by 1/√(2·layers)), the trained BPE
 * vocabulary, ChatML control tokens and chat template. The learner (`reex_learner.sft_train`) reads
 * it, trains it and writes the same metadata back.
 */
import { CHATML_TEMPLATE } from "../policy/tiny-model.js";
import { encodeGguf, gguf, type GgufTensor, type GgufValue } from "../policy/gguf.js";
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

function rng(seed: number): () => number {
  let s = seed >>> 0;
  const uniform = (): number => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => {
    const u = Math.max(uniform(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  };
}

/** The GGUF bytes of the untrained starter model. */
export function buildStarterModel(vocab: StarterVocabulary, shape: StarterShape = {}, options: { seed?: number; name?: string } = {}): Buffer {
  const o = resolveShape(shape);
  if (o.embedding % o.heads !== 0) throw new Error("embedding must be a multiple of heads");
  if (o.heads % o.kvHeads !== 0) throw new Error("heads must be a multiple of kvHeads");
  const seed = options.seed ?? 1;
  const normal = rng(seed);
  const n = vocab.tokens.length;
  const e = o.embedding;
  const headDim = e / o.heads;
  const kvWidth = headDim * o.kvHeads;
  const std = 0.02;
  const resid = std / Math.sqrt(2 * o.layers);
  const tensor = (name: string, dims: number[], s: number, fill?: number): GgufTensor => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    if (fill !== undefined) data.fill(fill);
    else for (let i = 0; i < data.length; i++) data[i] = s * normal();
    return { name, shape: dims, data, type: dims.length > 1 ? o.weightType : "f32" };
  };
  const tensors: GgufTensor[] = [
    tensor("token_embd.weight", [e, n], std),
    tensor("output_norm.weight", [e], 0, 1),
    tensor("output.weight", [e, n], std),
  ];
  for (let l = 0; l < o.layers; l++) {
    tensors.push(
      tensor(`blk.${l}.attn_norm.weight`, [e], 0, 1),
      tensor(`blk.${l}.attn_q.weight`, [e, e], std),
      tensor(`blk.${l}.attn_k.weight`, [e, kvWidth], std),
      tensor(`blk.${l}.attn_v.weight`, [e, kvWidth], std),
      tensor(`blk.${l}.attn_output.weight`, [e, e], resid),
      tensor(`blk.${l}.ffn_norm.weight`, [e], 0, 1),
      tensor(`blk.${l}.ffn_gate.weight`, [e, o.feedForward], std),
      tensor(`blk.${l}.ffn_up.weight`, [e, o.feedForward], std),
      tensor(`blk.${l}.ffn_down.weight`, [o.feedForward, e], resid),
    );
  }
  const sp = vocab.special;
  const metadata: [string, GgufValue][] = [
    ["general.architecture", gguf.str("llama")],
    ["general.name", gguf.str(options.name ?? `reex-starter-seed${seed}`)],
    ["general.file_type", gguf.u32(o.weightType === "f16" ? 1 : 0)],
    ["llama.context_length", gguf.u32(o.contextLength)],
    ["llama.embedding_length", gguf.u32(e)],
    ["llama.block_count", gguf.u32(o.layers)],
    ["llama.feed_forward_length", gguf.u32(o.feedForward)],
    ["llama.attention.head_count", gguf.u32(o.heads)],
    ["llama.attention.head_count_kv", gguf.u32(o.kvHeads)],
    ["llama.attention.layer_norm_rms_epsilon", gguf.f32(1e-5)],
    ["llama.rope.dimension_count", gguf.u32(headDim)],
    ["llama.rope.freq_base", gguf.f32(10000)],
    ["llama.vocab_size", gguf.u32(n)],
    ["tokenizer.ggml.model", gguf.str("gpt2")],
    ["tokenizer.ggml.pre", gguf.str(STARTER_PRE_TOKENIZER)],
    ["tokenizer.ggml.tokens", gguf.arr("string", vocab.tokens)],
    ["tokenizer.ggml.token_type", gguf.arr("i32", vocab.types)],
    ["tokenizer.ggml.merges", gguf.arr("string", vocab.merges)],
    ["tokenizer.ggml.bos_token_id", gguf.u32(sp["<|endoftext|>"])],
    ["tokenizer.ggml.eos_token_id", gguf.u32(sp["<|im_end|>"])],
    ["tokenizer.ggml.eot_token_id", gguf.u32(sp["<|im_end|>"])],
    ["tokenizer.ggml.padding_token_id", gguf.u32(sp["<|endoftext|>"])],
    ["tokenizer.ggml.add_bos_token", gguf.bool(false)],
    ["tokenizer.chat_template", gguf.str(CHATML_TEMPLATE)],
  ];
  return encodeGguf({ metadata, tensors });
}

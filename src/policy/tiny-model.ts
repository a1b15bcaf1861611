/**
 * A tiny llama-architecture GGUF with random weights, for tests and benchmarks that must run the
 * real llama.cpp path without downloading anything: byte-level BPE (gpt2-style) with merges learned
 * from a small SQL-flavoured sample, ChatML special tokens and chat template. Deterministic for a
 * given seed. Its outputs are meaningless; its tokenisation, shapes and control tokens are real.
 */
import { mkdir, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { seededRandom } from "../util/index.js";
import { encodeGguf, gguf, type GgufTensor, type GgufValue } from "./gguf.js";

/** Shape and seed of a tiny model. */
export interface TinyModelOptions {
  /** PRNG seed for the weights. Default 1. */
  seed?: number;
  /** Transformer blocks. Default 2. */
  layers?: number;
  /** Hidden width. Default 64. */
  embedding?: number;
  /** Attention heads. Default 4. */
  heads?: number;
  /** Key/value heads (grouped-query attention when fewer than `heads`). Default 2. */
  kvHeads?: number;
  /** Feed-forward width. Default 128. */
  feedForward?: number;
  /** Trained context length written to the metadata. Default 2048. */
  contextLength?: number;
  /** BPE merges learned on top of the 256 byte tokens. Default 300. */
  merges?: number;
  /** Weight storage type. Default "f32". */
  weightType?: "f32" | "f16";
  /** GGUF `general.name` (profile detection and the starter's defaults read it). Default `reex-tiny-seed<seed>`. */
  name?: string;
}

/** Options for a random LoRA adapter matching a tiny model of the same shape. */
export interface TinyLoraOptions {
  /** PRNG seed for the adapter weights. Default 7. */
  seed?: number;
  /** Adapter rank. Default 4. */
  rank?: number;
  /** LoRA alpha (scale = alpha / rank). Default 4. */
  alpha?: number;
}

/** ChatML, the template Qwen-style chat models ship in `tokenizer.chat_template`. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** ChatML control tokens, in vocabulary order after the merges: BOS/padding, turn start, turn end (EOS/EOT). */
export const CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
export type ChatmlSpecial = (typeof CHATML_SPECIALS)[number];

/** A byte-level BPE vocabulary with the ChatML control tokens, ready for the GGUF `tokenizer.ggml.*` keys. */
export interface ChatmlVocabulary {
  /** Token strings (byte-level unicode spelling), ids are indexes. */
  tokens: string[];
  /** llama.cpp token types: 1 normal, 3 control. */
  types: number[];
  /** Merges as `"a b"`, in priority order. */
  merges: string[];
  /** Ids of the control tokens. */
  special: Record<ChatmlSpecial, number>;
}

const BPE_SAMPLE = `
SELECT name FROM users WHERE id = 1;
SELECT COUNT(*) FROM orders WHERE status = 'shipped';
SELECT T1.name, T2.total FROM customers AS T1 JOIN orders AS T2 ON T1.id = T2.customer_id WHERE T2.total > 100 ORDER BY T2.total DESC LIMIT 3;
SELECT school, AVG(score) FROM results GROUP BY school HAVING COUNT(*) > 5;
SELECT DISTINCT country FROM singer WHERE age > 20 ORDER BY country;
SELECT MAX(price), MIN(price) FROM products WHERE category = 'books';
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT, created_at TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL, status TEXT);
users.name (TEXT | values : 'Alice', 'Bob')
orders.total (REAL | comment : order amount in dollars)
<think> The question asks for the number of orders per customer. I should join the tables. </think>
<intermediate_sql> SELECT customer_id, COUNT(*) FROM orders GROUP BY customer_id LIMIT 3; </intermediate_sql>
<result> customer_id | COUNT(*)
1 | 4
2 | 7 </result>
<think> The result looks right, the counts match the condition in the question. </think>
<final_sql> SELECT T1.name, COUNT(T2.id) FROM customers AS T1 JOIN orders AS T2 ON T1.id = T2.customer_id GROUP BY T1.id; </final_sql>
You are an experienced database expert. Given the database schema and the question, write a SQLite query that answers the question.
Question: How many schools have an average score above the state average? Hint: average score refers to AVG(score).
`;

/** GPT-2's reversible map from bytes to printable unicode characters. */
export function byteToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const map: string[] = new Array(256);
  bs.forEach((b, i) => (map[b] = String.fromCodePoint(cs[i]!)));
  return map;
}

/** GPT-2's pre-tokenizer (llama.cpp's `gpt-2` pre-type regex, plus a whitespace fallback). Use with `matchAll`. */
export const GPT2_PRETOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** Learns `count` byte-level BPE merges from `text`; ties go to the lexicographically smallest pair. */
export function learnMerges(text: string, count: number): [string, string][] {
  const b2u = byteToUnicode();
  const words = new Map<string, number>();
  for (const m of text.matchAll(GPT2_PRETOKENIZE)) {
    const w = [...Buffer.from(m[0], "utf8")].map((b) => b2u[b]).join("\u0000");
    words.set(w, (words.get(w) ?? 0) + 1);
  }
  let entries = [...words.entries()].map(([w, n]) => ({ parts: w.split("\u0000"), n }));
  const merges: [string, string][] = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { parts, n } of entries) {
      for (let i = 0; i + 1 < parts.length; i++) {
        const key = parts[i] + "\u0000" + parts[i + 1];
        pairs.set(key, (pairs.get(key) ?? 0) + n);
      }
    }
    let best: string | undefined;
    let bestN = 0;
    for (const [key, n] of pairs) {
      if (n > bestN || (n === bestN && best !== undefined && key < best)) {
        best = key;
        bestN = n;
      }
    }
    if (best === undefined) break;
    const [a, b] = best.split("\u0000") as [string, string];
    merges.push([a, b]);
    entries = entries.map(({ parts, n }) => {
      const out: string[] = [];
      for (let i = 0; i < parts.length; i++) {
        if (i + 1 < parts.length && parts[i] === a && parts[i + 1] === b) {
          out.push(a + b);
          i++;
        } else out.push(parts[i]!);
      }
      return { parts: out, n };
    });
  }
  return merges;
}

function resolve(options: TinyModelOptions): Required<TinyModelOptions> {
  return {
    seed: options.seed ?? 1,
    layers: options.layers ?? 2,
    embedding: options.embedding ?? 64,
    heads: options.heads ?? 4,
    kvHeads: options.kvHeads ?? 2,
    feedForward: options.feedForward ?? 128,
    contextLength: options.contextLength ?? 2048,
    merges: options.merges ?? 300,
    weightType: options.weightType ?? "f32",
    name: options.name ?? `reex-tiny-seed${options.seed ?? 1}`,
  };
}

/** Builds the vocabulary from merges: the 256 byte tokens, merged symbols (first occurrence), then the ChatML specials. */
export function vocabularyFromMerges(merges: readonly (readonly [string, string])[]): ChatmlVocabulary {
  const tokens = [...byteToUnicode()];
  const seen = new Set(tokens);
  for (const [a, b] of merges) {
    if (!seen.has(a + b)) {
      tokens.push(a + b);
      seen.add(a + b);
    }
  }
  const types = tokens.map(() => 1);
  const special = {} as Record<ChatmlSpecial, number>;
  for (const s of CHATML_SPECIALS) {
    special[s] = tokens.length;
    tokens.push(s);
    types.push(3);
  }
  return { tokens, types, merges: merges.map(([a, b]) => `${a} ${b}`), special };
}

/** The vocabulary of the tiny model: 256 byte tokens, learned merges, then the ChatML specials. */
export function tinyVocabulary(mergeCount = 300): ChatmlVocabulary {
  return vocabularyFromMerges(learnMerges(BPE_SAMPLE, mergeCount));
}

/** Shape of a llama-architecture model. */
export interface LlamaShape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads: number;
  feedForward: number;
  /** Trained context length written to the metadata. */
  contextLength: number;
  /** Storage type of 2-D tensors (1-D ones are always f32). */
  weightType: "f32" | "f16";
}

/** Initial standard deviations of a llama model's weight matrices (norm weights start at 1). */
export interface LlamaInit {
  embedding: number;
  output: number;
  /** attn_q, attn_k, attn_v. */
  attention: number;
  attentionOutput: number;
  /** ffn_gate, ffn_up. */
  feedForward: number;
  feedForwardDown: number;
}

/**
 * The tensors of a llama model of `shape` with `vocab` tokens (untied output), drawn from `normal`
 * in a fixed order (token_embd, output_norm, output, then each block's).
 */
export function llamaTensors(shape: LlamaShape, vocab: number, init: LlamaInit, normal: () => number): GgufTensor[] {
  const e = shape.embedding;
  const kvWidth = (e / shape.heads) * shape.kvHeads;
  const ff = shape.feedForward;
  const tensor = (name: string, dims: number[], std: number, mean = 0): GgufTensor => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = mean + (std === 0 ? 0 : std * normal());
    return { name, shape: dims, data, type: dims.length > 1 ? shape.weightType : "f32" };
  };
  const tensors: GgufTensor[] = [
    tensor("token_embd.weight", [e, vocab], init.embedding),
    tensor("output_norm.weight", [e], 0, 1),
    tensor("output.weight", [e, vocab], init.output),
  ];
  for (let l = 0; l < shape.layers; l++) {
    tensors.push(
      tensor(`blk.${l}.attn_norm.weight`, [e], 0, 1),
      tensor(`blk.${l}.attn_q.weight`, [e, e], init.attention),
      tensor(`blk.${l}.attn_k.weight`, [e, kvWidth], init.attention),
      tensor(`blk.${l}.attn_v.weight`, [e, kvWidth], init.attention),
      tensor(`blk.${l}.attn_output.weight`, [e, e], init.attentionOutput),
      tensor(`blk.${l}.ffn_norm.weight`, [e], 0, 1),
      tensor(`blk.${l}.ffn_gate.weight`, [e, ff], init.feedForward),
      tensor(`blk.${l}.ffn_up.weight`, [e, ff], init.feedForward),
      tensor(`blk.${l}.ffn_down.weight`, [ff, e], init.feedForwardDown),
    );
  }
  return tensors;
}

/**
 * The metadata of a llama model with a GPT-2-style BPE vocabulary, ChatML control tokens and chat
 * template; `preTokenizer` is written to `tokenizer.ggml.pre`.
 */
export function llamaMetadata(name: string, shape: LlamaShape, vocab: ChatmlVocabulary, preTokenizer: string): [string, GgufValue][] {
  const sp = vocab.special;
  return [
    ["general.architecture", gguf.str("llama")],
    ["general.name", gguf.str(name)],
    ["general.file_type", gguf.u32(shape.weightType === "f16" ? 1 : 0)],
    ["llama.context_length", gguf.u32(shape.contextLength)],
    ["llama.embedding_length", gguf.u32(shape.embedding)],
    ["llama.block_count", gguf.u32(shape.layers)],
    ["llama.feed_forward_length", gguf.u32(shape.feedForward)],
    ["llama.attention.head_count", gguf.u32(shape.heads)],
    ["llama.attention.head_count_kv", gguf.u32(shape.kvHeads)],
    ["llama.attention.layer_norm_rms_epsilon", gguf.f32(1e-5)],
    ["llama.rope.dimension_count", gguf.u32(shape.embedding / shape.heads)],
    ["llama.rope.freq_base", gguf.f32(10000)],
    ["llama.vocab_size", gguf.u32(vocab.tokens.length)],
    ["tokenizer.ggml.model", gguf.str("gpt2")],
    ["tokenizer.ggml.pre", gguf.str(preTokenizer)],
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
}

/** The GGUF bytes of a tiny random llama model. */
export function buildTinyModel(options: TinyModelOptions = {}): Buffer {
  const o = resolve(options);
  const vocab = tinyVocabulary(o.merges);
  const e = o.embedding;
  const attention = 1 / Math.sqrt(e);
  const init = { embedding: 1, output: 0.3, attention, attentionOutput: attention, feedForward: attention, feedForwardDown: 1 / Math.sqrt(o.feedForward) };
  const tensors = llamaTensors(o, vocab.tokens.length, init, seededRandom(o.seed).normal);
  const output = tensors[2]!.data;
  for (const id of Object.values(vocab.special)) output.fill(0, id * e, (id + 1) * e);
  return encodeGguf({ metadata: llamaMetadata(o.name, o, vocab, "default"), tensors });
}

/** The GGUF bytes of a random LoRA adapter for a tiny model built with the same shape options. */
export function buildTinyLora(model: TinyModelOptions = {}, options: TinyLoraOptions = {}): Buffer {
  const o = resolve(model);
  const rank = options.rank ?? 4;
  const r = seededRandom(options.seed ?? 7);
  const vocab = tinyVocabulary(o.merges).tokens.length;
  const pair = (name: string, inDim: number, outDim: number, std: number): GgufTensor[] => {
    const a = new Float32Array(inDim * rank).map(() => r.normal() / Math.sqrt(inDim));
    const b = new Float32Array(rank * outDim).map(() => std * r.normal());
    return [
      { name: `${name}.lora_a`, shape: [inDim, rank], data: a },
      { name: `${name}.lora_b`, shape: [rank, outDim], data: b },
    ];
  };
  const tensors: GgufTensor[] = [...pair("output.weight", o.embedding, vocab, 2)];
  for (let l = 0; l < o.layers; l++) tensors.push(...pair(`blk.${l}.ffn_down.weight`, o.feedForward, o.embedding, 0.5));
  return encodeGguf({
    metadata: [
      ["general.architecture", gguf.str("llama")],
      ["general.type", gguf.str("adapter")],
      ["general.name", gguf.str(`reex-tiny-lora-seed${options.seed ?? 7}`)],
      ["adapter.type", gguf.str("lora")],
      ["adapter.lora.alpha", gguf.f32(options.alpha ?? rank)],
    ],
    tensors,
  });
}

/** Writes `bytes` to `path` atomically (temporary file + rename), creating folders as needed. */
export async function writeFileAtomic(path: string, bytes: Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, bytes);
  await rename(tmp, path);
}

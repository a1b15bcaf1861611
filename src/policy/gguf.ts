/**
 * A minimal GGUF v3 writer: enough to produce small llama-architecture models and LoRA adapters
 * for tests and benchmarks without Python. Layout: header, metadata key/values, tensor infos,
 * padding to the alignment, then the tensor data, each tensor aligned.
 */
import { open } from "node:fs/promises";

/** Scalar GGUF value types by name. */
export type GgufScalarType = "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "bool" | "string" | "u64" | "i64" | "f64";

/** A typed metadata value; arrays hold scalars of one type. */
export type GgufValue =
  | { type: Exclude<GgufScalarType, "bool" | "string">; value: number | bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "array"; itemType: GgufScalarType; value: ReadonlyArray<number | bigint | boolean | string> };

/** One tensor: `shape` in ggml order (innermost dimension first), data in row-major ggml order. */
export interface GgufTensor {
  name: string;
  shape: readonly number[];
  /** Storage type; f16 values are rounded from the given f32 data. Default "f32". */
  type?: "f32" | "f16";
  data: Float32Array;
}

/** What a GGUF file holds. */
export interface GgufContents {
  metadata: ReadonlyArray<readonly [string, GgufValue]>;
  tensors: readonly GgufTensor[];
  /** Data alignment in bytes, also written as `general.alignment` when not 32. Default 32. */
  alignment?: number;
}

const TYPE_IDS: Record<GgufScalarType | "array", number> = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
};
const GGML_TYPE = { f32: 0, f16: 1 } as const;
const GGUF_MAGIC = 0x46554747;

/** Builders for typed metadata values. */
export const gguf = {
  u32: (value: number): GgufValue => ({ type: "u32", value }),
  i32: (value: number): GgufValue => ({ type: "i32", value }),
  u64: (value: number | bigint): GgufValue => ({ type: "u64", value }),
  f32: (value: number): GgufValue => ({ type: "f32", value }),
  bool: (value: boolean): GgufValue => ({ type: "bool", value }),
  str: (value: string): GgufValue => ({ type: "string", value }),
  arr: (itemType: GgufScalarType, value: ReadonlyArray<number | bigint | boolean | string>): GgufValue => ({ type: "array", itemType, value }),
};

class ByteWriter {
  private chunks: Buffer[] = [];
  private current = Buffer.alloc(1 << 16);
  private pos = 0;
  length = 0;

  private ensure(n: number): void {
    if (this.pos + n <= this.current.length) return;
    this.chunks.push(this.current.subarray(0, this.pos));
    this.current = Buffer.alloc(Math.max(1 << 16, n));
    this.pos = 0;
  }

  u8(v: number): void {
    this.ensure(1);
    this.current.writeUInt8(v, this.pos);
    this.advance(1);
  }
  i8(v: number): void {
    this.ensure(1);
    this.current.writeInt8(v, this.pos);
    this.advance(1);
  }
  u16(v: number): void {
    this.ensure(2);
    this.current.writeUInt16LE(v, this.pos);
    this.advance(2);
  }
  i16(v: number): void {
    this.ensure(2);
    this.current.writeInt16LE(v, this.pos);
    this.advance(2);
  }
  u32(v: number): void {
    this.ensure(4);
    this.current.writeUInt32LE(v, this.pos);
    this.advance(4);
  }
  i32(v: number): void {
    this.ensure(4);
    this.current.writeInt32LE(v, this.pos);
    this.advance(4);
  }
  f32(v: number): void {
    this.ensure(4);
    this.current.writeFloatLE(v, this.pos);
    this.advance(4);
  }
  f64(v: number): void {
    this.ensure(8);
    this.current.writeDoubleLE(v, this.pos);
    this.advance(8);
  }
  u64(v: number | bigint): void {
    this.ensure(8);
    this.current.writeBigUInt64LE(BigInt(v), this.pos);
    this.advance(8);
  }
  i64(v: number | bigint): void {
    this.ensure(8);
    this.current.writeBigInt64LE(BigInt(v), this.pos);
    this.advance(8);
  }

  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.current.set(b, this.pos);
    this.advance(b.length);
  }

  string(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.bytes(b);
  }

  pad(alignment: number): void {
    const rem = this.length % alignment;
    if (rem !== 0) this.bytes(new Uint8Array(alignment - rem));
  }

  private advance(n: number): void {
    this.pos += n;
    this.length += n;
  }

  toBuffer(): Buffer {
    return Buffer.concat([...this.chunks, this.current.subarray(0, this.pos)]);
  }
}

function writeScalar(w: ByteWriter, type: GgufScalarType, value: number | bigint | boolean | string): void {
  switch (type) {
    case "u8":
      return w.u8(Number(value));
    case "i8":
      return w.i8(Number(value));
    case "u16":
      return w.u16(Number(value));
    case "i16":
      return w.i16(Number(value));
    case "u32":
      return w.u32(Number(value));
    case "i32":
      return w.i32(Number(value));
    case "f32":
      return w.f32(Number(value));
    case "f64":
      return w.f64(Number(value));
    case "u64":
      return w.u64(typeof value === "bigint" ? value : Number(value));
    case "i64":
      return w.i64(typeof value === "bigint" ? value : Number(value));
    case "bool":
      return w.u8(value ? 1 : 0);
    case "string":
      return w.string(String(value));
  }
}

/** Rounds an f32 to IEEE half precision bits (round to nearest even). */
export function toHalf(value: number): number {
  const f = new Float32Array([value]);
  const x = new Uint32Array(f.buffer)[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  return sign | half;
}

/** Serialises a GGUF v3 file into one buffer. */
export function encodeGguf(contents: GgufContents): Buffer {
  const alignment = contents.alignment ?? 32;
  const metadata = [...contents.metadata];
  if (alignment !== 32 && !metadata.some(([k]) => k === "general.alignment")) {
    metadata.push(["general.alignment", gguf.u32(alignment)]);
  }
  const w = new ByteWriter();
  w.u32(GGUF_MAGIC);
  w.u32(3);
  w.u64(contents.tensors.length);
  w.u64(metadata.length);
  for (const [key, v] of metadata) {
    w.string(key);
    w.u32(TYPE_IDS[v.type]);
    if (v.type === "array") {
      w.u32(TYPE_IDS[v.itemType]);
      w.u64(v.value.length);
      for (const item of v.value) writeScalar(w, v.itemType, item);
    } else {
      writeScalar(w, v.type, v.value);
    }
  }

  const encoded: Uint8Array[] = [];
  let offset = 0;
  for (const t of contents.tensors) {
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) {
      throw new Error(`tensor ${t.name}: shape ${t.shape.join("x")} holds ${count} values, data has ${t.data.length}`);
    }
    const type = t.type ?? "f32";
    let bytes: Uint8Array;
    if (type === "f32") {
      bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    } else {
      const halves = new Uint16Array(count);
      for (let i = 0; i < count; i++) halves[i] = toHalf(t.data[i]!);
      bytes = new Uint8Array(halves.buffer);
    }
    w.string(t.name);
    w.u32(t.shape.length);
    for (const d of t.shape) w.u64(d);
    w.u32(GGML_TYPE[type]);
    w.u64(offset);
    encoded.push(bytes);
    offset += Math.ceil(bytes.length / alignment) * alignment;
  }
  w.pad(alignment);
  for (const bytes of encoded) {
    w.bytes(bytes);
    w.pad(alignment);
  }
  return w.toBuffer();
}

/**
 * Why the file at `path` cannot be a loadable GGUF (bad magic, unknown version, impossible counts),
 * or undefined when its header looks sane. node-llama-cpp's own metadata reader can spin forever on
 * such headers, so loaders check this first.
 */
export async function ggufHeaderProblem(path: string): Promise<string | undefined> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    const header = Buffer.alloc(24);
    const { bytesRead } = await file.read(header, 0, 24, 0);
    if (bytesRead < 24) return `file is too short to be GGUF (${size} bytes)`;
    if (header.readUInt32LE(0) !== GGUF_MAGIC) return "file does not start with the GGUF magic";
    const version = header.readUInt32LE(4);
    if (version !== 2 && version !== 3) return `unsupported GGUF version ${version}`;
    const tensors = header.readBigUInt64LE(8);
    const kvs = header.readBigUInt64LE(16);
    if (tensors > BigInt(Math.floor(size / 32)) || kvs > BigInt(Math.floor(size / 12))) {
      return `GGUF header claims ${tensors} tensors and ${kvs} metadata entries, more than a ${size}-byte file can hold`;
    }
    return undefined;
  } finally {
    await file.close();
  }
}

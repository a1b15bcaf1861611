import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readGgufFileInfo } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { buildTinyModel, encodeGguf } from "../../src/policy/tooling.js";
import { gguf } from "../../src/policy/testing.js";

describe("GGUF writer", () => {
  it("writes metadata of every type and aligned tensors that node-llama-cpp reads back", async () => {
    const dir = await mkdtemp(join(tmpdir(), "reex-gguf-"));
    const path = join(dir, "kv.gguf");
    const f32 = Float32Array.from([1, -2, 0.5, 3]);
    const f16 = Float32Array.from([1, -2, 0.5, 65504, 1e-8, -0]);
    await writeFile(
      path,
      encodeGguf({
        metadata: [
          ["general.architecture", gguf.str("llama")],
          ["test.u32", gguf.u32(7)],
          ["test.i32", gguf.i32(-7)],
          ["test.u64", gguf.u64(2n ** 40n)],
          ["test.f32", gguf.f32(1.5)],
          ["test.bool", gguf.bool(true)],
          ["test.strings", gguf.arr("string", ["a", "ĠSELECT", "<|im_end|>"])],
          ["test.ints", gguf.arr("i32", [1, -1, 3])],
          ["test.u8", { type: "u8", value: 255 }],
          ["test.f64", { type: "f64", value: 0.25 }],
        ],
        tensors: [
          { name: "a", shape: [2, 2], data: f32 },
          { name: "b", shape: [6], data: f16, type: "f16" },
        ],
      }),
    );
    const info = await readGgufFileInfo(path, { readTensorInfo: true });
    const test = (info.metadata as unknown as { test: Record<string, unknown> }).test;
    expect(info.version).toBe(3);
    expect(test).toMatchObject({ u32: 7, i32: -7, f32: 1.5, bool: true, strings: ["a", "ĠSELECT", "<|im_end|>"], ints: [1, -1, 3], u8: 255, f64: 0.25 });
    expect(BigInt(test.u64 as number | bigint)).toBe(2n ** 40n);
    const [a, b] = info.tensorInfo!;
    expect(a).toMatchObject({ name: "a", dimensions: [2, 2], ggmlType: 0 });
    expect(b).toMatchObject({ name: "b", dimensions: [6], ggmlType: 1 });
    expect(Number(a!.fileOffset) % 32).toBe(0);
    expect(Number(b!.fileOffset) % 32).toBe(0);
    const bytes = await readFile(path);
    const readF32 = Array.from({ length: 4 }, (_, i) => bytes.readFloatLE(Number(a!.fileOffset) + 4 * i));
    expect(readF32).toEqual([1, -2, 0.5, 3]);
    const halves = Array.from({ length: 6 }, (_, i) => bytes.readUInt16LE(Number(b!.fileOffset) + 2 * i));
    expect(halves).toEqual([0x3c00, 0xc000, 0x3800, 0x7bff, 0x0000, 0x8000]);
  });

  it("builds the tiny model deterministically per seed, with a BPE vocabulary and ChatML specials", async () => {
    const one = buildTinyModel({ seed: 1 });
    expect(buildTinyModel({ seed: 1 }).equals(one)).toBe(true);
    expect(buildTinyModel({ seed: 2 }).equals(one)).toBe(false);
    const dir = await mkdtemp(join(tmpdir(), "reex-gguf-"));
    await writeFile(join(dir, "tiny.gguf"), one);
    const info = await readGgufFileInfo(join(dir, "tiny.gguf"));
    const tokenizer = info.metadata.tokenizer.ggml as unknown as { tokens: string[]; merges: string[]; token_type: number[]; eos_token_id: number };
    expect(tokenizer.merges.length).toBe(300);
    expect(tokenizer.tokens.slice(-3)).toEqual(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]);
    expect(tokenizer.token_type.slice(-3)).toEqual([3, 3, 3]);
    expect(tokenizer.tokens[tokenizer.eos_token_id]).toBe("<|im_end|>");
    expect(info.metadata.tokenizer.chat_template).toContain("<|im_start|>");
  });
});

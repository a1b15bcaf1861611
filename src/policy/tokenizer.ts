/**
 * A GGUF's tokenizer, for tooling that turns text into the exact token ids a trajectory would hold
 * (the starter's pre-tokenisation): node-llama-cpp stays behind src/policy.
 */
import { getLlama, type Llama, type LlamaModel, type Token } from "node-llama-cpp";
import { createLlamaPolicy } from "./llama.js";
import { piecesOf, tokenizePieces } from "./prompt.js";
import type { ChatMessage, Policy } from "./types.js";

/** A loaded GGUF's tokenizer (CPU) plus the policy whose chat template renders prompts. */
export interface ModelTokenizer {
  tokenize(text: string, special: boolean): number[];
  detokenize(tokens: readonly number[]): string;
  /** Prompt tokens for a chat, rendered and tokenised exactly as the llama policy starts a trajectory. */
  promptTokens(messages: ChatMessage[]): number[];
  endOfTurn: number;
  close(): Promise<void>;
}

let sharedLlama: Promise<Llama> | undefined;

/** Opens `modelPath` for tokenisation (no context is created for the raw model; the policy holds a small one). */
export async function openModelTokenizer(modelPath: string): Promise<ModelTokenizer> {
  sharedLlama ??= getLlama({ gpu: false, build: "never", logLevel: "error" as never });
  const llama = await sharedLlama;
  const model: LlamaModel = await llama.loadModel({ modelPath });
  let policy: Policy;
  try {
    policy = await createLlamaPolicy({ model: modelPath, gpu: "cpu", contextSize: 512, sequences: 1, threads: 1 });
  } catch (err) {
    await model.dispose();
    throw err;
  }
  const eot = model.tokens.eot ?? model.tokens.eos;
  if (eot === null || eot === undefined) throw new Error(`${modelPath}: no end-of-turn token`);
  const tokenize = (text: string, special: boolean): number[] => [...model.tokenize(text, special)].map(Number);
  return {
    tokenize,
    detokenize: (tokens) =>
      model.detokenize(
        tokens.map((t) => t as Token),
        true,
      ),
    promptTokens(messages) {
      const spec = policy.renderChat(messages);
      return [...tokenizePieces(piecesOf(spec.prefix, spec.parts?.prefix), tokenize), ...tokenizePieces(piecesOf(spec.suffix, spec.parts?.suffix), tokenize)];
    },
    endOfTurn: Number(eot),
    async close() {
      await policy.close();
      await model.dispose();
    },
  };
}

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resultBlock } from "../../../src/agent/index.js";
import { encodeResponse, openTokenizer, readJsonl, splitResponse, tokenizeRecord, type StarterTokenizer } from "../../../lab/starter/testing.js";
import type { SftRecord } from "../../../lab/synth/index.js";
import { microFixture, type MicroFixture } from "./fixtures.js";

const RESPONSE =
  "<think>Goal: x. First check how t.c stores France.</think>\n<intermediate_sql>SELECT DISTINCT c FROM t LIMIT 5</intermediate_sql>" +
  resultBlock("c\nFR\nDE") +
  "<think>France is 'FR'.</think>\n<intermediate_sql>SELECT COUNT(*) FROM t WHERE c = 'FR'</intermediate_sql>" +
  resultBlock("COUNT(*)\n4") +
  "<think>Done.</think>\n<final_sql>SELECT COUNT(*) FROM t WHERE c = 'FR'</final_sql>";

describe("response pieces and loss mask", () => {
  it("cuts exactly the injected result blocks", () => {
    const pieces = splitResponse(RESPONSE);
    expect(pieces.map((p) => p.injected)).toEqual([false, true, false, true, false]);
    expect(pieces.map((p) => p.text).join("")).toBe(RESPONSE);
    expect(pieces[0]!.text.endsWith("</intermediate_sql>")).toBe(true);
    expect(pieces[1]!.text).toBe(resultBlock("c\nFR\nDE"));
    expect(pieces[4]!.text.endsWith("</final_sql>")).toBe(true);
  });

  it("masks result blocks 0 and everything the model writes (closing tags, end of turn) 1", () => {
    const chars = (t: string): number[] => [...t].map((c) => c.codePointAt(0)!);
    const EOT = 99999;
    const { tokens, mask } = encodeResponse(splitResponse(RESPONSE), chars, EOT);
    expect(tokens.length).toBe([...RESPONSE].length + 1);
    expect(tokens.at(-1)).toBe(EOT);
    expect(mask.at(-1)).toBe(1);
    const text = String.fromCodePoint(...tokens.slice(0, -1));
    const masked = tokens.slice(0, -1).filter((_, i) => mask[i] === 0);
    expect(String.fromCodePoint(...masked)).toBe(resultBlock("c\nFR\nDE") + resultBlock("COUNT(*)\n4"));
    const close = text.indexOf("</intermediate_sql>");
    for (let i = close; i < close + "</intermediate_sql>".length; i++) expect(mask[i]).toBe(1);
    const after = text.indexOf("<think>France");
    expect(mask[after]).toBe(1);
    expect(mask[after - 1]).toBe(0); // the "\n" closing the injected block
  });
});

describe("tokenizeRecord on a real trace", () => {
  let fx: MicroFixture;
  let tok: StarterTokenizer;
  let records: SftRecord[];
  beforeAll(async () => {
    fx = await microFixture("mask");
    tok = await openTokenizer(fx.modelPath);
    records = [];
    for await (const r of readJsonl<SftRecord>(fx.sftPath)) records.push(r);
  });
  afterAll(async () => {
    await tok?.close();
  });

  it("renders the prompt through ChatML and masks result blocks, not the model's text or <|im_end|>", () => {
    const rec = records.find((r) => r.family === "execution-aware" && r.response.includes("<result>"))!;
    const t = tokenizeRecord(rec, tok);
    const prompt = tok.detokenize(t.prompt_tokens);
    expect(prompt.startsWith("<|im_start|>system\n")).toBe(true);
    expect(prompt.endsWith("<|im_end|>\n<|im_start|>assistant\n")).toBe(true);
    expect(prompt).toContain(rec.messages[1]!.content);
    expect(t.mask.length).toBe(t.tokens.length);
    expect(tok.detokenize(t.tokens)).toBe(rec.response + "<|im_end|>");
    expect(t.tokens.at(-1)).toBe(fx.vocab.special["<|im_end|>"]);
    expect(t.mask.at(-1)).toBe(1);
    const injected = t.tokens.filter((_, i) => t.mask[i] === 0);
    const blocks = splitResponse(rec.response)
      .filter((p) => p.injected)
      .map((p) => p.text)
      .join("");
    expect(tok.detokenize(injected)).toBe(blocks);
    // the model-written text is every other token, in order
    const written = t.tokens.slice(0, -1).filter((_, i) => t.mask[i] === 1);
    expect(tok.detokenize(written)).toBe(
      splitResponse(rec.response)
        .filter((p) => !p.injected)
        .map((p) => p.text)
        .join(""),
    );
  });
});

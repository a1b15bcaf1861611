import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { byteToUnicode } from "../../../src/policy/tiny-model.js";
import { learnMergesFast, countWords, openTokenizer, trainTokenizer, type StarterTokenizer } from "../../../lab/starter/testing.js";
import { learnMerges } from "../../../src/policy/tiny-model.js";
import { microFixture, type MicroFixture } from "./fixtures.js";

describe("BPE training", () => {
  it("learns the same merges as the reference learnMerges on a small text", () => {
    const text = "SELECT COUNT(*) FROM member WHERE country = 'FR'\nSELECT name FROM member WHERE memberSince LIKE '%/08/2023' ".repeat(3);
    const fast = learnMergesFast(countWords([text]), 40, 1);
    expect(fast).toEqual(learnMerges(text, 40));
  });

  it("is deterministic and lays out bytes, merges, then the ChatML specials", () => {
    const texts = ["<think>Goal: count members.</think>", "<final_sql>SELECT COUNT(*) FROM member</final_sql>"].flatMap((t) => [t, t, t]);
    const a = trainTokenizer(texts, { vocabSize: 300 });
    const b = trainTokenizer(texts, { vocabSize: 300 });
    expect(a).toEqual(b);
    expect(a.tokens.slice(0, 256)).toEqual(byteToUnicode());
    expect(a.tokens.length).toBeLessThanOrEqual(300);
    expect(a.special["<|im_end|>"]).toBe(a.tokens.length - 1);
    expect(a.types.at(-1)).toBe(3);
  });
});

describe("tokenizer in llama.cpp", () => {
  let fx: MicroFixture;
  let tok: StarterTokenizer;
  beforeAll(async () => {
    fx = await microFixture("tokenizer");
    tok = await openTokenizer(fx.modelPath);
  });
  afterAll(async () => {
    await tok?.close();
  });

  const samples = [
    "<think>Goal: count members who joined in August 2023.</think>\n<intermediate_sql>SELECT memberSince FROM member LIMIT 3</intermediate_sql>",
    "<result>\nmemberSince\n20/03/2021\n21/02/2022\n</result>\n",
    "SELECT T1.name FROM books AS T1 JOIN checkouts AS T2 ON T1.id = T2.bookId WHERE T2.fine > 2000",
    "  odd   spacing\t\ttabs\n\n\nand naïve ünïcödé — 東京 🙂 'quotes' it's",
    "Database schema:\ntable member , columns = [ member.memberId ( integer | primary key | values : 1 , 2 , 3 ) ]",
  ];

  it("round-trips text through tokenize and detokenize", () => {
    for (const s of samples) {
      const ids = tok.tokenize(s, false);
      expect(tok.detokenize(ids)).toBe(s);
    }
  });

  it("applies the learned merges (fewer tokens than bytes on corpus text)", () => {
    const s = samples[2]!;
    expect(tok.tokenize(s, false).length).toBeLessThan(Buffer.byteLength(s) * 0.9);
  });

  it("parses the ChatML control tokens only when asked to", () => {
    const imEnd = fx.vocab.special["<|im_end|>"];
    expect(tok.tokenize("<|im_end|>", true)).toEqual([imEnd]);
    expect(tok.tokenize("<|im_end|>", false)).not.toContain(imEnd);
    expect(tok.endOfTurn).toBe(imEnd);
  });
});

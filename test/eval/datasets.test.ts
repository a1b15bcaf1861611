import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { isReexError, type ReexError } from "../../src/errors/index.js";
import { alignPredictions, loadDataset, parsePredictions } from "../../src/eval/index.js";
import { parseDataset, resolveDbPath } from "../../src/eval/testing.js";
import { BIRD_QUESTIONS, makeFixture, writeJson, type Fixture } from "./fixtures.js";

function caught(fn: () => unknown): ReexError {
  try {
    fn();
  } catch (err) {
    if (isReexError(err)) return err;
    throw err;
  }
  throw new Error("expected a ReexError");
}

let fx: Fixture;
beforeAll(() => {
  fx = makeFixture();
});

describe("loading a BIRD-layout dataset", () => {
  it("normalises every question and resolves <root>/<db_id>/<db_id>.sqlite", () => {
    const { layout, items } = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot });
    expect(layout).toBe("bird");
    expect(items).toHaveLength(6);
    expect(items[1]).toEqual({
      index: 1,
      questionId: 101,
      dbId: "shop",
      dbPath: join(fx.dbRoot, "shop", "shop.sqlite"),
      question: "Names of fruit from cheapest to dearest.",
      evidence: "fruit refers to category = 'fruit'",
      goldSql: "SELECT name FROM products WHERE category = 'fruit' ORDER BY price",
      difficulty: "simple",
    });
    expect(items[5]!.dbPath).toBe(join(fx.dbRoot, "zoo", "zoo.sqlite"));
  });

  it("uses the index as question id and an empty hint when BIRD train-style items lack them", () => {
    const { items } = parseDataset([{ db_id: "zoo", question: "q?", SQL: "SELECT 1" }], { dbRoot: fx.dbRoot });
    expect(items[0]).toMatchObject({ index: 0, questionId: 0, evidence: "" });
    expect(items[0]!.difficulty).toBeUndefined();
  });
});

describe("loading a Spider-layout dataset", () => {
  it("reads question/query/db_id and accepts flat <root>/<db_id>.sqlite files", () => {
    const { layout, items } = loadDataset(fx.spiderFile, { dbRoot: fx.flatRoot });
    expect(layout).toBe("spider");
    expect(items).toHaveLength(6);
    expect(items[3]).toEqual({
      index: 3,
      questionId: 3,
      dbId: "shop",
      dbPath: join(fx.flatRoot, "shop.sqlite"),
      question: BIRD_QUESTIONS[3]!.question,
      evidence: "",
      goldSql: BIRD_QUESTIONS[3]!.SQL,
    });
  });

  it("also resolves Spider databases in the nested layout", () => {
    expect(loadDataset(fx.spiderFile, { dbRoot: fx.dbRoot }).items[0]!.dbPath).toBe(join(fx.dbRoot, "shop", "shop.sqlite"));
    expect(resolveDbPath(fx.dbRoot, "nope")).toBeNull();
  });
});

describe("invalid dataset files", () => {
  it("reports each bad field with its item index and field name", () => {
    const data = [BIRD_QUESTIONS[0], { db_id: "shop", question: "no SQL here" }, { ...BIRD_QUESTIONS[1], question: 42 }];
    const err = caught(() => parseDataset(data, { dbRoot: fx.dbRoot, layout: "bird" }));
    expect(err.code).toBe("DATASET_INVALID");
    const paths = err.issues!.map((i) => i.path.join("."));
    expect(paths).toContain("1.SQL");
    expect(paths).toContain("2.question");
  });

  it("names the db_id whose database file is missing", () => {
    const err = caught(() => parseDataset([...BIRD_QUESTIONS, { ...BIRD_QUESTIONS[0], db_id: "warehouse" }], { dbRoot: fx.dbRoot }));
    expect(err.code).toBe("DATASET_INVALID");
    expect(err.message).toContain('"warehouse"');
    expect(err.issues).toEqual([expect.objectContaining({ path: [6, "db_id"] })]);
  });

  it("rejects non-arrays, unknown layouts and files that are not JSON", () => {
    expect(caught(() => parseDataset({ questions: [] }, { dbRoot: fx.dbRoot })).code).toBe("DATASET_INVALID");
    expect(caught(() => parseDataset([{ db_id: "shop", question: "q", sparql: "x" }], { dbRoot: fx.dbRoot })).code).toBe("DATASET_INVALID");
    expect(caught(() => loadDataset(writeJson(fx, "broken.json", "[{"), { dbRoot: fx.dbRoot })).code).toBe("DATASET_INVALID");
  });

  it("treats a missing dataset file or database root as a bad argument", () => {
    expect(caught(() => loadDataset(join(fx.dir, "absent.json"), { dbRoot: fx.dbRoot })).code).toBe("BAD_REQUEST");
    expect(caught(() => loadDataset(fx.birdFile, { dbRoot: join(fx.dir, "absent") })).code).toBe("BAD_REQUEST");
  });
});

describe("predictions files", () => {
  it("reads one SQL per line and strips BIRD's suffix", () => {
    const preds = parsePredictions("SELECT 1\t----- bird -----\tshop\nSELECT 2\n\n");
    expect(preds).toEqual([
      { index: 0, sql: "SELECT 1", dbId: "shop" },
      { index: 1, sql: "SELECT 2" },
    ]);
  });

  it("reads BIRD's predict_dev.json keyed by question index", () => {
    const preds = parsePredictions(JSON.stringify({ "1": "SELECT 2\t----- bird -----\tzoo", "0": "SELECT 1" }));
    expect(preds).toEqual([
      { index: 0, sql: "SELECT 1" },
      { index: 1, sql: "SELECT 2", dbId: "zoo" },
    ]);
  });

  it("fails loudly when predictions do not line up with the questions", () => {
    const { items } = loadDataset(fx.birdFile, { dbRoot: fx.dbRoot });
    expect(caught(() => alignPredictions(items, parsePredictions("SELECT 1\nSELECT 2"))).issues![0]!.path).toEqual([2]);
    const wrongDb = parsePredictions(items.map((it, i) => `SELECT ${i}\t----- bird -----\t${i === 2 ? "zoo" : it.dbId}`).join("\n"));
    expect(caught(() => alignPredictions(items, wrongDb)).issues).toEqual([expect.objectContaining({ path: [2, "db_id"] })]);
    expect(caught(() => parsePredictions('{"first": "SELECT 1"}')).code).toBe("DATASET_INVALID");
  });
});
